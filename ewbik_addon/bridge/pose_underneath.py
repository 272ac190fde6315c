"""The pose underneath the solve: what every solve of an armature starts from and blends over.

One pose per set of targets: the solved body is a function of the targets, the settings and this
pose, never of the previous solve, so a drag away and back, a frame jump, playback either way,
Solve, the bake and a reopened file all give the same body. A bone's pose underneath is its
channels as anyone but the solver last set them: the animation at this frame for keyed channels
(Blender sets them on a frame change), the user's own edit, and otherwise the pose the bone had
before it was first solved.

Channels that still hold what the last solve wrote are told apart by keeping that write beside
the pose underneath, in the rig (between solves) and on the armature object (so a reopened file
and an undo step restore both with the channels they belong to). Only the bones whose written
pose differs from their pose underneath are stored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .pose_io import unit_quaternions

if TYPE_CHECKING:
    import bpy

    from .rig_cache import Rig

PROPERTY = "underneath"  # ID property in the armature's `Object.ewbik` group, not a custom property
_SAME_ROTATION = 1e-10  # 1 - |q . q'| below which two rotations are the same channels
_SAME_LOCATION = 1e-5


def track(
    obj: bpy.types.Object, rig: Rig, rotations: np.ndarray, locations: np.ndarray, channels_kept: bool = False
) -> None:
    """Update the rig's pose underneath from channels just read (pose.bones order).

    A channel that differs from what the last solve wrote was set by the animation or the user
    and becomes the pose underneath; one that still holds the solver's value keeps the earlier
    pose underneath. channels_kept: nobody but the solver set them since its last write.
    """
    if rig.underneath is None or len(rig.underneath[0]) != len(rotations):
        _restore(obj, rig, rotations, locations)
    if channels_kept:
        return
    assert rig.underneath is not None and rig.written is not None  # read or seeded above
    written_rotations, written_locations = rig.written
    changed = _differs(rotations, locations, written_rotations, written_locations)
    rig.underneath[0][changed] = rotations[changed]
    rig.underneath[1][changed] = locations[changed]


def start_pose(rig: Rig) -> tuple[np.ndarray, np.ndarray]:
    """(rotations, locations), copies of the pose underneath: where a solve starts."""
    assert rig.underneath is not None  # tracked from the channels just read
    return rig.underneath[0].copy(), rig.underneath[1].copy()


def remember(obj: bpy.types.Object, rig: Rig, rotations: np.ndarray, locations: np.ndarray) -> None:
    """Record what a solve wrote (pose.bones order), in the rig and on the armature object.

    Normalized in float64: bones written through mathutils come back with float32 norms, which
    would read as a change of the channels."""
    rotations = unit_quaternions(rotations)
    rig.written = (rotations, locations)
    assert rig.underneath is not None  # tracked when the solve read the channels
    under_rotations, under_locations = rig.underneath
    solved = np.flatnonzero(_differs(rotations, locations, under_rotations, under_locations))
    record = np.concatenate([under_rotations, under_locations, rotations, locations], axis=1)[solved]
    names = [rig.names[i] for i in solved.tolist()]
    stored = obj.ewbik.get(PROPERTY)
    if stored is not None and list(stored.get("bones", ())) == names:
        stored["pose"] = record.reshape(-1)
    else:
        obj.ewbik[PROPERTY] = {"bones": names, "pose": record.reshape(-1)}


def _restore(obj: bpy.types.Object, rig: Rig, rotations: np.ndarray, locations: np.ndarray) -> None:
    """Seed the rig from the record on the object (a reopened file, an undo step, a rebuilt rig):
    bones without one have their channels as both the pose underneath and the last write."""
    under = (rotations.copy(), locations.copy())
    written = (rotations.copy(), locations.copy())
    stored = obj.ewbik.get(PROPERTY)
    if stored is not None:
        names = list(stored.get("bones", ()))
        record = np.asarray(stored.get("pose", ()), float)
        if record.size == 14 * len(names) and np.isfinite(record).all():
            record = record.reshape(-1, 14)
            known = [(rig.index[name], k) for k, name in enumerate(names) if name in rig.index]
            rows = np.array([row for row, _ in known], int)
            kept = record[[k for _, k in known]] if known else record[:0]
            under[0][rows], under[1][rows] = unit_quaternions(kept[:, :4]), kept[:, 4:7]
            written[0][rows], written[1][rows] = unit_quaternions(kept[:, 7:11]), kept[:, 11:14]
    rig.underneath, rig.written = under, written


def forget(rig: Rig) -> None:
    """The rig's record no longer matches the channels (undo): the next solve reads the object's."""
    rig.underneath = rig.written = None


def _differs(
    rotations: np.ndarray, locations: np.ndarray, other_rotations: np.ndarray, other_locations: np.ndarray
) -> np.ndarray:
    return (1.0 - np.abs(np.einsum("ij,ij->i", rotations, other_rotations)) > _SAME_ROTATION) | np.any(
        np.abs(locations - other_locations) > _SAME_LOCATION, axis=1
    )
