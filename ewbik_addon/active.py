"""Which armature the UI works on (the active object, when it is an armature), and which of its
bones are selected."""

import bpy

_POSE_BONE_HAS_SELECT = "select" in bpy.types.PoseBone.bl_rna.properties  # moved from Bone in Blender 5.0


def active_armature(context):
    """The active object when it is an armature, else None."""
    obj = context.active_object
    return obj if obj is not None and obj.type == "ARMATURE" else None


def posed_armature(context):
    """The active armature when it is in pose mode (where pins and limits are edited), else None."""
    obj = active_armature(context)
    return obj if obj is not None and obj.mode == "POSE" else None


def armature_to_step_through(cls, context, hint):
    """Operator poll of Bake and Limits from Action: the context's object is an armature in Pose or
    Object Mode (they step through frames, so not in Edit Mode); otherwise say why."""
    obj = context.object
    if obj is None or obj.type != "ARMATURE":
        cls.poll_message_set(hint)
        return False
    if obj.mode not in {"POSE", "OBJECT"}:
        cls.poll_message_set("Switch the armature to Pose or Object Mode")
        return False
    return True


def active_limit_bone(context):
    """The active pose bone of the active armature in pose mode, else None."""
    obj = posed_armature(context)
    pose_bone = context.active_pose_bone
    if obj is None or pose_bone is None or pose_bone.id_data != obj:
        return None
    return pose_bone


def is_selected(pose_bone):
    """Selection of a pose bone, wherever this Blender keeps it."""
    owner = pose_bone if _POSE_BONE_HAS_SELECT else pose_bone.bone
    return owner.select and not pose_bone.bone.hide


def set_selected(pose_bone, state):
    """Select or deselect a pose bone, wherever this Blender keeps the flag."""
    (pose_bone if _POSE_BONE_HAS_SELECT else pose_bone.bone).select = state


def selected_pose_bones(obj):
    return [pose_bone for pose_bone in obj.pose.bones if is_selected(pose_bone)]
