"""Which bones sit at or beyond their joint limits in the current pose (overlay and panel).

The solver's `JointLimits.violation` decides: a bone is beyond its limits when its local rotation
is measurably outside, and at them when it is inside but a turn of `AT_LIMIT_MARGIN` (swing about
two axes across the bone, or twist) would take it outside: where a clamped bone stops a pose. The
answer is cached per armature until Blender reports a change of an armature (`changes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import bpy
import numpy as np

from ...solver import quat
from ...solver.kusudama import JointLimits
from ..com.limit_settings import has_limits, kusudama_from_key, limits_key
from ..com.stored_settings import stored_bone_limits

AT_LIMIT_MARGIN = math.radians(1.0)
BEYOND_TOLERANCE = 1e-3

_NUDGES = tuple(
    (side, quat.from_axis_angle(np.array(axis, dtype=float), sign * AT_LIMIT_MARGIN))
    for side, axis in (("swing", (1, 0, 0)), ("swing", (0, 0, 1)), ("twist", (0, 1, 0)))
    for sign in (1.0, -1.0)
)
_cache = {}
_generation = [0]


def changes() -> int:
    """A number that grows whenever an armature (pose, bone settings, selection) was re-evaluated.

    Blender evaluates the depsgraph before every redraw, so caches keyed by it are fresh when drawn.
    """
    return _generation[0]


@bpy.app.handlers.persistent
def note_armature_updates(_scene: bpy.types.Scene, depsgraph: bpy.types.Depsgraph) -> None:
    """depsgraph_update_post: count updates of armature objects and armature data."""
    for update in depsgraph.updates:
        if isinstance(update.id, bpy.types.Armature) or getattr(update.id, "type", None) == "ARMATURE":
            _generation[0] += 1
            return


@bpy.app.handlers.persistent
def forget_everything(*_args: object) -> None:
    """load_post / undo_post / redo_post: the data the caches describe was replaced."""
    _generation[0] += 1
    _cache.clear()


HANDLERS = (
    (bpy.app.handlers.depsgraph_update_post, note_armature_updates),
    (bpy.app.handlers.load_post, forget_everything),
    (bpy.app.handlers.undo_post, forget_everything),
    (bpy.app.handlers.redo_post, forget_everything),
)


@dataclass(frozen=True)
class LimitStatus:
    """Names of the limited bones beyond their limits and of those at them (inside, on the edge)."""

    beyond: tuple
    at: tuple

    @property
    def count(self) -> int:
        return len(self.beyond) + len(self.at)


def pose_matrices(obj: bpy.types.Object, prop: str) -> np.ndarray:
    """(N, 4, 4) row-major matrices of a pose-bone matrix property, read in one call."""
    flat = np.empty(len(obj.pose.bones) * 16, dtype=np.float32)
    obj.pose.bones.foreach_get(prop, flat)
    return flat.reshape(-1, 4, 4).transpose(0, 2, 1).astype(float)


def limit_status(obj: bpy.types.Object) -> LimitStatus:
    """The LimitStatus of the armature's current pose (cached until an armature changes)."""
    key = (obj.as_pointer(), changes())
    found = _cache.get(obj.name_full)
    if found is not None and found[0] == key:
        return found[1]
    basis = pose_matrices(obj, "matrix_basis")
    # a NaN pose (the solve refuses it, a script may set it) has no rotation to measure
    finite = np.isfinite(basis).all(axis=(1, 2))
    limited = [
        (i, pose_bone)
        for i, pose_bone in enumerate(obj.pose.bones)
        if finite[i] and has_limits(stored_bone_limits(pose_bone.bone))
    ]
    status = _measure(obj, limited, basis)
    _cache[obj.name_full] = (key, status)
    return status


@lru_cache(maxsize=8)
def _joint_limits(keys: tuple[tuple, ...]) -> JointLimits:
    return JointLimits({row: kusudama_from_key(key) for row, key in enumerate(keys)}, len(keys))


def _measure(
    obj: bpy.types.Object, limited: list[tuple[int, bpy.types.PoseBone]], basis: np.ndarray
) -> LimitStatus:
    if not limited:
        return LimitStatus((), ())
    indices = np.array([i for i, _pose_bone in limited])
    limits = _joint_limits(tuple(limits_key(pose_bone.bone.ewbik) for _i, pose_bone in limited))
    rotations = quat.from_matrix(basis[indices, :3, :3])
    beyond = limits.violation(rotations) > BEYOND_TOLERANCE
    near = np.zeros(len(limited), dtype=bool)
    for side, nudge in _NUDGES:
        nudged = (
            quat.multiply(nudge[None], rotations)
            if side == "swing"
            else quat.multiply(rotations, nudge[None])
        )
        near |= limits.violation(nudged) > 0.0
    names = np.array([pose_bone.name for _i, pose_bone in limited], dtype=object)
    return LimitStatus(beyond=tuple(names[beyond]), at=tuple(names[near & ~beyond]))
