"""`ewbik.pin` / `ewbik.unpin`: give selected pose bones a target empty to drag, or take it away."""

import bpy
from bpy.props import StringProperty

from ..ewbik_addon.bridge.pinning import pin_bones, unpin_bones
from ..ewbik_addon.com.active import editable_posing_armature, selected_pose_bones, show_object
from ..ewbik_addon.com.stored_settings import bone_target
from ..solver import EwbikError


class EWBIK_OT_pin(bpy.types.Operator):
    """Pin the selected pose bones: each gets an empty at its current pose to drag around (a humanoid without limits gets them; the first pins of a standing body also plant its feet and turn Move Root on); a pin whose empty was deleted gets a new one"""

    bl_idname = "ewbik.pin"
    bl_label = "Pin Bones"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return editable_posing_armature(cls, context)

    def execute(self, context: bpy.types.Context) -> set[str]:
        obj = context.object
        bones = selected_pose_bones(obj)
        if not bones:
            self.report({"ERROR"}, "Select the pose bones to pin")
            return {"CANCELLED"}
        try:
            self.report({"INFO"}, pin_bones(context, obj, bones))
        except EwbikError as error:
            self.report({"ERROR"}, str(error))
            return {"CANCELLED"}
        return {"FINISHED"}


class EWBIK_OT_unpin(bpy.types.Operator):
    """Unpin the selected pose bones (or all of them); delete the target empties Pin made unless they are animated, constrained or something else uses them"""

    bl_idname = "ewbik.unpin"
    bl_label = "Unpin Bones"
    bl_options = {"REGISTER", "UNDO"}

    all_bones: bpy.props.BoolProperty(name="All Bones", description="Unpin every bone of the armature")

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return editable_posing_armature(cls, context)

    def execute(self, context: bpy.types.Context) -> set[str]:
        obj = context.object
        bones = [
            pose_bone
            for pose_bone in (obj.pose.bones if self.all_bones else selected_pose_bones(obj))
            if bone_target(pose_bone) is not None
        ]
        if not bones:
            self.report({"WARNING"}, "No pinned bone selected")
            return {"CANCELLED"}
        self.report({"INFO"}, unpin_bones(obj, bones))
        return {"FINISHED"}


class EWBIK_OT_select_pin_target(bpy.types.Operator):
    """Select the target empty of this pin (leaving pose mode) so it can be moved"""

    bl_idname = "ewbik.select_pin_target"
    bl_label = "Select Target"
    bl_options = {"REGISTER", "UNDO"}

    bone: StringProperty(name="Bone", description="Pinned pose bone whose target to select")

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        obj = context.active_object
        return obj is not None and obj.type == "ARMATURE"

    def execute(self, context: bpy.types.Context) -> set[str]:
        obj = context.active_object
        pose_bone = obj.pose.bones.get(self.bone)
        target = bone_target(pose_bone) if pose_bone is not None else None
        if target is None:
            self.report({"WARNING"}, f"Bone '{self.bone}' is not pinned")
            return {"CANCELLED"}
        if target.name not in context.view_layer.objects:
            self.report({"WARNING"}, f"Target '{target.name}' is not in this view layer")
            return {"CANCELLED"}
        show_object(context, target)
        return {"FINISHED"}


CLASSES = (EWBIK_OT_pin, EWBIK_OT_unpin, EWBIK_OT_select_pin_target)
