"""`ewbik.add_pole`: a pole for the active pin, placed where its limb already bends."""

import bpy

from ..ewbik_addon.bridge.targets import check_follow, new_pole, pole_place
from ..ewbik_addon.com.active import editable_posing_armature
from ..ewbik_addon.com.stored_settings import bone_target
from ..solver import EwbikError


class EWBIK_OT_add_pole(bpy.types.Operator):
    """Add a pole for the active pinned bone where its limb already bends (the pose does not move):
    move it to turn the elbow or knee"""

    bl_idname = "ewbik.add_pole"
    bl_label = "Add Pole"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        if not editable_posing_armature(cls, context):
            return False
        pose_bone = context.active_pose_bone
        if pose_bone is None or bone_target(pose_bone) is None:
            cls.poll_message_set("Make a pinned bone active")
            return False
        return True

    def execute(self, context: bpy.types.Context) -> set[str]:
        obj, pose_bone = context.object, context.active_pose_bone
        if pose_bone.ewbik.pole is not None:
            self.report({"ERROR"}, f"'{pose_bone.name}' bends toward '{pose_bone.ewbik.pole.name}' already")
            return {"CANCELLED"}
        try:
            check_follow(obj)
            pole = new_pole(context, obj, pose_bone, pole_place(obj, pose_bone))
        except EwbikError as error:
            self.report({"ERROR"}, str(error))
            return {"CANCELLED"}
        pose_bone.ewbik.pole = pole
        self.report({"INFO"}, f"'{pose_bone.name}' bends toward '{pole.name}': move it to turn the limb")
        return {"FINISHED"}


CLASSES = (EWBIK_OT_add_pole,)
