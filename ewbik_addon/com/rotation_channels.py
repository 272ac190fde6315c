"""Pose-bone rotation channels (quaternion, Euler in any order, axis-angle): which one a bone uses,
and all of them as quaternions.

One vectorized conversion for everything that reads a pose: the pose reader (live solving, bake)
and Limits from Action (a whole frame range at once).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...solver import quat


def rotation_channel(rotation_mode: str) -> str:
    """The pose-bone property a bone in this rotation mode is set and keyed on."""
    return {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}.get(
        rotation_mode, "rotation_euler"
    )


def is_euler(rotation_mode: str) -> bool:
    """Whether a bone in this rotation mode turns by Euler angles (every mode but quaternion and
    axis-angle): its locks hold single angles, and Blender ignores its 4D lock flags."""
    return rotation_channel(rotation_mode) == "rotation_euler"


def channels_to_quaternions(
    modes: Sequence[str] | np.ndarray, quaternion: np.ndarray, euler: np.ndarray, axis_angle: np.ndarray
) -> np.ndarray:
    """Quaternions (..., N, 4) from each bone's channels in its own `rotation_mode`.

    `modes` (N,) are Blender's mode names; the channel arrays may carry a leading frame axis.
    Only the channels of a bone's own mode are read, so the others may hold anything. The
    result is not normalized (callers decide what a zero quaternion means) and may hold NaN
    where the channels do.
    """
    rotations = np.array(quaternion, dtype=float)
    modes = np.asarray(modes)
    for mode in set(modes.tolist()) - {"QUATERNION"}:
        bones = modes == mode
        if mode == "AXIS_ANGLE":
            rotations[..., bones, :] = quat.from_axis_angle(
                axis_angle[..., bones, 1:], axis_angle[..., bones, 0]
            )
        else:
            rotations[..., bones, :] = quat.from_euler(euler[..., bones, :], mode)
    return rotations
