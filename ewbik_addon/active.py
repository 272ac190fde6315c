"""Which armature the UI works on: the active object, when it is an armature."""


def active_armature(context):
    """The active object when it is an armature, else None."""
    obj = context.active_object
    return obj if obj is not None and obj.type == "ARMATURE" else None


def posed_armature(context):
    """The active armature when it is in pose mode (where pins and limits are edited), else None."""
    obj = active_armature(context)
    return obj if obj is not None and obj.mode == "POSE" else None
