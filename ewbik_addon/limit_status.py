"""Which bones sit at or beyond their joint limits in the current pose (overlay and panel).

The solver's `JointLimits.violation` decides: a bone is beyond its limits when its local rotation
is measurably outside, and at them when it is inside but a turn of `AT_LIMIT_MARGIN` (swing about
two axes across the bone, or twist) would take it outside: where a clamped bone stops a pose. The
answer is cached per armature and recomputed only when the pose or the limits change.
"""

import math
from dataclasses import dataclass

import numpy as np

from ..solver import quat
from ..solver.kusudama import JointLimits
from .limit_settings import has_limits, kusudama_of

AT_LIMIT_MARGIN = math.radians(1.0)
BEYOND_TOLERANCE = 1e-3

_NUDGES = tuple(
    (side, quat.from_axis_angle(np.array(axis, dtype=float), sign * AT_LIMIT_MARGIN))
    for side, axis in (("swing", (1, 0, 0)), ("swing", (0, 0, 1)), ("twist", (0, 1, 0)))
    for sign in (1.0, -1.0)
)
_cache = {}


@dataclass(frozen=True)
class LimitStatus:
    """Names of the limited bones beyond their limits and of those at them (inside, on the edge)."""

    beyond: tuple
    at: tuple

    @property
    def count(self):
        return len(self.beyond) + len(self.at)


def pose_matrices(obj, prop):
    """(N, 4, 4) row-major matrices of a pose-bone matrix property, read in one call."""
    flat = np.empty(len(obj.pose.bones) * 16, dtype=np.float32)
    obj.pose.bones.foreach_get(prop, flat)
    return flat.reshape(-1, 4, 4).transpose(0, 2, 1).astype(float)


def limits_signature(pose_bone):
    """A hashable fingerprint of one bone's stored limits (changes whenever a limit is edited)."""
    settings = pose_bone.ewbik
    cones = tuple((*cone.direction, cone.radius) for cone in settings.cones)
    twist = (settings.twist_min, settings.twist_max) if settings.use_twist_limit else None
    return cones, twist


def limit_status(obj):
    """The LimitStatus of the armature's current pose (cached while pose and limits stay)."""
    limited = [(i, pose_bone) for i, pose_bone in enumerate(obj.pose.bones) if has_limits(pose_bone.ewbik)]
    basis = pose_matrices(obj, "matrix_basis")
    key = (tuple((pose_bone.name, limits_signature(pose_bone)) for _i, pose_bone in limited), basis.tobytes())
    found = _cache.get(obj.name_full)
    if found is not None and found[0] == key:
        return found[1]
    status = _measure(obj, limited, basis)
    _cache[obj.name_full] = (key, status)
    return status


def _measure(obj, limited, basis):
    if not limited:
        return LimitStatus((), ())
    indices = np.array([i for i, _pose_bone in limited])
    limits = JointLimits({row: kusudama_of(pose_bone.ewbik) for row, (_i, pose_bone) in enumerate(limited)}, len(limited))
    rotations = quat.from_matrix(basis[indices, :3, :3])
    beyond = limits.violation(rotations) > BEYOND_TOLERANCE
    near = np.zeros(len(limited), dtype=bool)
    for side, nudge in _NUDGES:
        nudged = quat.multiply(nudge[None], rotations) if side == "swing" else quat.multiply(rotations, nudge[None])
        near |= limits.violation(nudged) > 0.0
    names = np.array([pose_bone.name for _i, pose_bone in limited], dtype=object)
    return LimitStatus(beyond=tuple(names[beyond]), at=tuple(names[near & ~beyond]))
