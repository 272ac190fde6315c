"""Reading a bone's EWBIK settings without storing them on bones that have none.

Asking for `pose_bone.ewbik` stores an empty group on a bone that had none, and Blender copies
every bone's groups each time it evaluates the pose: on every live update, ~0.3 ms at 1000 bones
(Blender 5.2). Code that reads every bone of a rig (scans, sidebar lists, overlay, checks) asks
here first, so only the bones a user set something on carry a group.
"""


def stored_bone_settings(pose_bone):
    """The bone's `PoseBone.ewbik` when it stores any, else None (every setting at its default).

    Blender 5 keeps bpy.props groups apart from custom properties (`bl_system_properties_get`);
    earlier versions store them among the bone's custom properties."""
    system_properties = getattr(pose_bone, "bl_system_properties_get", None)
    store = pose_bone if system_properties is None else system_properties()
    if store is None or "ewbik" not in store:
        return None
    return pose_bone.ewbik


def bone_target(pose_bone):
    """The bone's pin target, or None (asked without storing settings on the bone)."""
    props = stored_bone_settings(pose_bone)
    return None if props is None else props.target


def bone_stretch(pose_bone):
    """The most the solver may lengthen the bone by (1 = never), asked without storing settings."""
    props = stored_bone_settings(pose_bone)
    return 1.0 if props is None else props.stretch


def pinned_bones(obj):
    """The armature's pose bones that have a pin target, in pose.bones order."""
    return [pose_bone for pose_bone in obj.pose.bones if bone_target(pose_bone) is not None]
