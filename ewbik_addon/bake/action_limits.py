"""Joint limits fitted to an armature's animation ("Limits from Action").

The animation is evaluated frame by frame (so NLA, drivers and constraints on the channels count
as the viewport shows them) with live solving paused, every pose bone's local rotation is read
with foreach_get whatever its rotation mode, `solver.fit_limits` fits the limits, and they are
stored on `Bone.ewbik`. Nothing is written before the fit succeeded, and the current frame is
always restored (the operator puts the pose channels back too, so unkeyed edits survive).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

import numpy as np

from ...solver import FitError, fit_limits, quat
from ..com.armature_checks import RigError
from ..com.limit_settings import scene_bones, set_limits
from ..com.live_pause import suspended
from ..com.rotation_channels import channels_to_quaternions

if TYPE_CHECKING:
    import bpy


def animated_rotations(
    scene: bpy.types.Scene, obj: bpy.types.Object, frame_start: int, frame_end: int
) -> np.ndarray:
    """Local rotations (F, N, 4) of every pose bone (pose.bones order) on each frame of the range."""
    if frame_end < frame_start:
        reason = "is empty: the end comes before the start"
        raise RigError("frame_end", reason, f"Frame range {frame_start}..{frame_end} {reason}")
    pose_bones = obj.pose.bones
    n_frames, n_bones = frame_end - frame_start + 1, len(pose_bones)
    quaternion = np.empty((n_frames, n_bones, 4), np.float32)
    euler = np.empty((n_frames, n_bones, 3), np.float32)
    axis_angle = np.empty((n_frames, n_bones, 4), np.float32)
    current, subframe = scene.frame_current, scene.frame_subframe
    with suspended():
        try:
            for i, frame in enumerate(range(frame_start, frame_end + 1)):
                scene.frame_set(frame)
                pose_bones.foreach_get("rotation_quaternion", quaternion[i].reshape(-1))
                pose_bones.foreach_get("rotation_euler", euler[i].reshape(-1))
                pose_bones.foreach_get("rotation_axis_angle", axis_angle[i].reshape(-1))
        finally:
            scene.frame_set(current, subframe=subframe)
    modes = [pose_bone.rotation_mode for pose_bone in pose_bones]
    rotations = channels_to_quaternions(modes, quaternion, euler, axis_angle)
    if not np.all(np.isfinite(rotations)):
        raise RigError(
            "rotations", "NaN or infinite", "The animation has NaN or infinite rotations in this frame range"
        )
    return quat.normalize(rotations)


def fit_action_limits(
    scene: bpy.types.Scene,
    obj: bpy.types.Object,
    frame_start: int,
    frame_end: int,
    *,
    coverage: float,
    max_cones: int,
    margin: float,
    bone_names: Collection[str] | None = None,
) -> list[str]:
    """Fit limits to the animation over the range and store them; the names of the bones limited.

    `bone_names` (None: every bone) are the bones whose limits may change. Bones the fit leaves
    unlimited (roots; every bone when nothing turns) keep what they had, and so does every bone's
    comfort.
    """
    rotations = animated_rotations(scene, obj, frame_start, frame_end)
    bones = scene_bones(obj)
    pose_index = {pose_bone.name: i for i, pose_bone in enumerate(obj.pose.bones)}
    in_bone_order = rotations[:, [pose_index[bone["name"]] for bone in bones]]
    try:
        limits = fit_limits(bones, in_bone_order, coverage=coverage, max_cones=max_cones, margin=margin)
    except FitError as error:
        raise RigError.told_after("Cannot fit limits: ", error) from None
    limited = []
    for pose_bone in obj.pose.bones:
        fitted = limits.get(pose_bone.name)
        if fitted is None or (bone_names is not None and pose_bone.name not in bone_names):
            continue
        settings = pose_bone.bone.ewbik
        set_limits(settings, {**fitted, "comfort": settings.comfort})
        limited.append(pose_bone.name)
    obj.update_tag()
    return limited
