"""A pose's channels read and written in bulk, and the frame range the timeline plays.

Bake and Limits from Action step through frames and must leave the pose as they found it,
unkeyed edits included: they read every channel before and write it back after.
"""

import numpy as np
from bpy.props import IntProperty

POSE_CHANNELS = {"rotation_quaternion": 4, "rotation_euler": 3, "rotation_axis_angle": 4, "location": 3}


def read_pose_channels(pose_bones):
    """Every pose bone's rotation channels and location: {property: (N, size) float32}."""
    channels = {}
    for name, size in POSE_CHANNELS.items():
        values = np.empty(len(pose_bones) * size, dtype=np.float32)
        pose_bones.foreach_get(name, values)
        channels[name] = values.reshape(-1, size)
    return channels


def write_pose_channels(pose_bones, channels):
    """Put channels read by `read_pose_channels` back."""
    for name, values in channels.items():
        pose_bones.foreach_set(name, values.ravel())


def scene_range(scene):
    """The frame range the timeline plays: the preview range when it is on."""
    if scene.use_preview_range:
        return scene.frame_preview_start, scene.frame_preview_end
    return scene.frame_start, scene.frame_end


class SceneFrameRange:
    """Operator mixin: a frame range that, left unset, is the range the timeline plays.

    Bake and Limits from Action step through the same kind of range; the filled-in values show in
    the redo panel, so the user sees which frames were used.
    """

    frame_start: IntProperty(
        name="Start Frame",
        description="First frame (default: the scene's frame range, or its preview range)",
        options={"SKIP_SAVE"},
    )
    frame_end: IntProperty(
        name="End Frame",
        description="Last frame (default: the scene's frame range, or its preview range)",
        options={"SKIP_SAVE"},
    )

    def fill_frame_range(self, scene):
        """Set whichever end the user left unset from the scene's range."""
        start, end = scene_range(scene)
        if not self.properties.is_property_set("frame_start"):
            self.frame_start = start
        if not self.properties.is_property_set("frame_end"):
            self.frame_end = end
