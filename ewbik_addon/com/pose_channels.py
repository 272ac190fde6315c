"""A pose's channels read and written in bulk, and the frame ranges operators step through.

Bake and Limits from Action step through frames and must leave the pose as they found it,
unkeyed edits included: they read every channel before and write it back after.
"""

import math

import bpy
import numpy as np
from bpy.props import IntProperty

POSE_CHANNELS = {
    "rotation_quaternion": 4,
    "rotation_euler": 3,
    "rotation_axis_angle": 4,
    "location": 3,
    "scale": 3,
}


def read_pose_channels(pose_bones: bpy.types.bpy_prop_collection) -> dict[str, np.ndarray]:
    """Every pose bone's rotation channels, location and scale (stretch writes it): {property:
    (N, size) float32}."""
    channels = {}
    for name, size in POSE_CHANNELS.items():
        values = np.empty(len(pose_bones) * size, dtype=np.float32)
        pose_bones.foreach_get(name, values)
        channels[name] = values.reshape(-1, size)
    return channels


def write_pose_channels(pose_bones: bpy.types.bpy_prop_collection, channels: dict[str, np.ndarray]) -> None:
    """Put channels read by `read_pose_channels` back."""
    for name, values in channels.items():
        pose_bones.foreach_set(name, values.ravel())


def scene_range(scene: bpy.types.Scene) -> tuple[int, int]:
    """The frame range the timeline plays: the preview range when it is on."""
    if scene.use_preview_range:
        return scene.frame_preview_start, scene.frame_preview_end
    return scene.frame_start, scene.frame_end


def action_range(scene: bpy.types.Scene, obj: bpy.types.Object) -> tuple[int, int]:
    """The frames an armature's action holds (its manual frame range when set); the timeline's
    preview range when it is on (the user narrowed the frames), or without an action.

    A clip shorter than the scene must not be read past its last key: those frames repeat the
    last pose and would weigh it as if the actor held it."""
    action = obj.animation_data.action if obj.animation_data is not None else None
    if action is None or scene.use_preview_range:
        return scene_range(scene)
    start, end = action.frame_range
    return math.floor(start), math.ceil(end)


def frame_range(default: str) -> type:
    """Operator mixin: a frame range that, left unset, is filled in by `fill_frame_range` from the
    range `default` names (Bake: the timeline's; Limits from Action: the action's).

    The filled-in values show in the redo panel, so the user sees which frames were used.
    """

    class FrameRange:
        frame_start: IntProperty(
            name="Start Frame", description=f"First frame (default: {default})", options={"SKIP_SAVE"}
        )
        frame_end: IntProperty(
            name="End Frame", description=f"Last frame (default: {default})", options={"SKIP_SAVE"}
        )

        def fill_frame_range(self, start: int, end: int) -> None:
            """Set whichever end the user left unset."""
            if not self.properties.is_property_set("frame_start"):
                self.frame_start = start
            if not self.properties.is_property_set("frame_end"):
                self.frame_end = end

    return FrameRange
