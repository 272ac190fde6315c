"""Reading a bone's EWBIK settings without storing them on bones that have none.

Asking for `pose_bone.ewbik` stores an empty group on a bone that had none, and Blender copies
every bone's groups each time it evaluates the pose: on every live update, ~0.3 ms at 1000 bones
(Blender 5.2). Code that reads every bone of a rig (scans, sidebar lists, overlay, checks) asks
here first, so only the bones a user set something on carry a group.
"""

import bpy

_SYSTEM_PROPERTIES = bpy.app.version >= (5, 0, 0)  # bpy.props groups kept apart from custom properties


def stored_bone_settings(pose_bone):
    """The bone's `PoseBone.ewbik` when it stores any, else None (every setting at its default)."""
    store = pose_bone.bl_system_properties_get() if _SYSTEM_PROPERTIES else pose_bone
    if store is None or "ewbik" not in store:
        return None
    return pose_bone.ewbik


def bone_target(pose_bone):
    """The bone's pin target, or None (asked without storing settings on the bone)."""
    props = stored_bone_settings(pose_bone)
    return None if props is None else props.target
