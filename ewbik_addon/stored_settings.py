"""Reading a bone's EWBIK settings without storing them on bones that have none.

Asking for `pose_bone.ewbik` stores an empty group on a bone that had none, and Blender copies
every bone's groups each time it evaluates the pose: on every live update, ~0.3 ms at 1000 bones
(Blender 5.2). Code that reads every bone of a rig (scans, sidebar lists, overlay, checks) asks
here first, so only the bones a user set something on carry a group.
"""

RETIRED_CONE_SETTINGS = ("last_direction",)  # stored by earlier versions, read by none


def _stored(struct):
    """Where Blender keeps the bpy.props values of `struct`, or None: Blender 5 keeps them apart
    from custom properties (`bl_system_properties_get`), earlier versions among them."""
    system_properties = getattr(struct, "bl_system_properties_get", None)
    return struct if system_properties is None else system_properties()


def stored_bone_settings(pose_bone):
    """The bone's `PoseBone.ewbik` when it stores any, else None (every setting at its default)."""
    store = _stored(pose_bone)
    if store is None or "ewbik" not in store:
        return None
    return pose_bone.ewbik


def stored_object(props, name):
    """The object an object property of `props` points to, or None; asked without storing it:
    reading one through Blender stores an empty value on a group that had none."""
    store = _stored(props)
    return getattr(props, name) if store is not None and name in store else None


def bone_target(pose_bone):
    """The bone's pin target, or None (asked without storing settings on the bone)."""
    props = stored_bone_settings(pose_bone)
    return None if props is None else stored_object(props, "target")


def bone_stretch(pose_bone):
    """The most the solver may lengthen the bone by (1 = never), asked without storing settings."""
    props = stored_bone_settings(pose_bone)
    return 1.0 if props is None else props.stretch


def pinned_bones(obj):
    """The armature's pose bones that have a pin target, in pose.bones order."""
    return [pose_bone for pose_bone in obj.pose.bones if bone_target(pose_bone) is not None]


def drop_retired_settings(objects):
    """Remove from the armatures among `objects` the cone settings earlier versions stored and none
    reads (`RETIRED_CONE_SETTINGS`): Blender copies every stored value of every pose bone each
    time it evaluates the pose. Linked armatures are left as their library holds them."""
    for obj in objects:
        if obj.type != "ARMATURE" or obj.pose is None or obj.library is not None:
            continue
        for pose_bone in obj.pose.bones:
            props = stored_bone_settings(pose_bone)
            for cone in props.cones if props is not None else ():
                store = _stored(cone)
                for name in RETIRED_CONE_SETTINGS:
                    if store is not None and name in store:
                        del store[name]
