"""Pinning without leaving Pose Mode: pin bones to the active bone, toggle the pins of the selection."""

import bpy

from ..ewbik_addon.bridge.pin_reading import follows_pinned_bone
from ..ewbik_addon.com.active import editable_posing_armature, selected_pose_bones
from ..ewbik_addon.com.stored_settings import bone_target


class EWBIK_OT_pin_to_active_bone(bpy.types.Operator):
    """Pin the selected bones to the active bone (a control bone of this rig), as Blender's constraints follow a
    subtarget; a bone that would follow itself is refused"""

    bl_idname = "ewbik.pin_to_active_bone"
    bl_label = "Pin to Active Bone"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        if not editable_posing_armature(cls, context):
            return False
        if context.active_pose_bone is None:
            cls.poll_message_set("Make the control bone to follow the active bone")
            return False
        return True

    def execute(self, context: bpy.types.Context) -> set[str]:
        obj = context.object
        control = context.active_pose_bone.name
        bones = [pose_bone for pose_bone in selected_pose_bones(obj) if pose_bone.name != control]
        if not bones:
            self.report({"ERROR"}, "Select the bones to pin, then the control bone last (active)")
            return {"CANCELLED"}
        loops = [(pose_bone.name, follows_pinned_bone(obj, control, pose_bone.name)) for pose_bone in bones]
        loops = [(name, reason) for name, reason in loops if reason]
        if loops:
            name, reason = loops[0]
            self.report(
                {"ERROR"}, f"pin '{name}': target bone '{control}' {reason}, so it cannot be its target"
            )
            return {"CANCELLED"}
        for pose_bone in bones:
            pose_bone.ewbik.target = obj
            pose_bone.ewbik.target_bone = control
        noun = "bone" if len(bones) == 1 else "bones"
        self.report({"INFO"}, f"Pinned {len(bones)} {noun} to '{control}'")
        return {"FINISHED"}


class EWBIK_OT_toggle_pin(bpy.types.Operator):
    """Pin the selected bones, or unpin them when they are all pinned already"""

    bl_idname = "ewbik.toggle_pin"
    bl_label = "Toggle Pin"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return editable_posing_armature(cls, context)

    def execute(self, context: bpy.types.Context) -> set[str]:
        bones = selected_pose_bones(context.object)
        if not bones:
            self.report({"ERROR"}, "Select the pose bones to pin or unpin")
            return {"CANCELLED"}
        if all(bone_target(pose_bone) is not None for pose_bone in bones):
            return bpy.ops.ewbik.unpin()
        return bpy.ops.ewbik.pin()


CLASSES = (EWBIK_OT_pin_to_active_bone, EWBIK_OT_toggle_pin)
