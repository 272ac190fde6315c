"""`ewbik.jump_to_target`: go from a pinned bone to what it follows, or from a target back to its bones."""

from collections.abc import Sequence

import bpy

from ..ewbik_addon.com.active import set_selected, show_object
from ..ewbik_addon.com.stored_settings import bone_target, pinned_bones


def _pins_following(
    context: bpy.types.Context, target: bpy.types.Object, bone_name: str = ""
) -> list[tuple[bpy.types.Object, bpy.types.PoseBone]]:
    """(armature, pose bone) of every pin in the view layer whose target is `target` (and bone_name)."""
    return [
        (obj, pose_bone)
        for obj in context.view_layer.objects
        if obj.type == "ARMATURE" and obj.pose is not None
        for pose_bone in pinned_bones(obj)
        if bone_target(pose_bone) == target and (not bone_name or pose_bone.ewbik.target_bone == bone_name)
    ]


def _show_bones(context: bpy.types.Context, obj: bpy.types.Object, names: Sequence[str]) -> None:
    """Make obj active in Pose Mode with exactly these bones selected, the last one active."""
    if context.object is not None and context.object.mode != "OBJECT" and context.object != obj:
        bpy.ops.object.mode_set(mode="OBJECT")
    for other in context.view_layer.objects:
        other.select_set(other == obj)
    obj.hide_set(False)
    context.view_layer.objects.active = obj
    if obj.mode != "POSE":
        bpy.ops.object.mode_set(mode="POSE")
    for pose_bone in obj.pose.bones:
        set_selected(pose_bone, pose_bone.name in names)
    obj.data.bones.active = obj.data.bones[names[-1]]


class EWBIK_OT_jump_to_target(bpy.types.Operator):
    """Jump from the active pinned bone to its target (empty or bone), or from a target back to the bones pinned
    to it"""

    bl_idname = "ewbik.jump_to_target"
    bl_label = "Jump Between Pin and Target"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        if context.object is None:
            cls.poll_message_set("Select a pinned bone or a pin target")
            return False
        return True

    def execute(self, context: bpy.types.Context) -> set[str]:
        obj = context.object
        pose_bone = context.active_pose_bone if obj.type == "ARMATURE" and obj.mode == "POSE" else None
        if pose_bone is not None and bone_target(pose_bone) is not None:
            return self._to_target(context, pose_bone)
        followers = _pins_following(context, obj, pose_bone.name if pose_bone is not None else "")
        if not followers:
            what = f"bone '{pose_bone.name}'" if pose_bone is not None else f"'{obj.name}'"
            self.report({"WARNING"}, f"{what} is neither pinned nor a pin's target")
            return {"CANCELLED"}
        armature = followers[0][0]
        _show_bones(context, armature, [bone.name for owner, bone in followers if owner == armature])
        return {"FINISHED"}

    def _to_target(self, context: bpy.types.Context, pose_bone: bpy.types.PoseBone) -> set[str]:
        props = pose_bone.ewbik
        target = props.target
        if target.name not in context.view_layer.objects:
            self.report({"WARNING"}, f"Target '{target.name}' is not in this view layer")
            return {"CANCELLED"}
        if target.type != "ARMATURE":
            show_object(context, target)
            return {"FINISHED"}
        if target.pose is None or props.target_bone not in target.pose.bones:
            self.report({"WARNING"}, f"Pin '{pose_bone.name}' has no Target Bone in '{target.name}'")
            return {"CANCELLED"}
        _show_bones(context, target, [props.target_bone])
        return {"FINISHED"}


CLASSES = (EWBIK_OT_jump_to_target,)
