"""Joint-limit editing: humanoid presets, the active bone's cone list, and clearing limits.

The preset data and the bone-name -> role mapping live in the solver (`solver.presets`);
these operators only hand it the armature's bones and store what comes back in
`Bone.ewbik`, so a preset gives the same limits in Blender and in the CLI.
"""

import bpy
from bpy.props import BoolProperty, EnumProperty
from mathutils import Vector

from ..ewbik_addon.com.active import (
    active_limit_bone,
    editable_limit_bone,
    is_selected,
    limits_editable,
    posed_armature,
    selected_pose_bones,
)
from ..ewbik_addon.com.limit_settings import set_limits
from ..ewbik_addon.com.messages import count
from ..ewbik_addon.com.stored_settings import stored_bone_limits
from ..ewbik_addon.limits.limit_presets import fitted_preset, preset_report, store_preset
from ..solver import presets


def current_direction(pose_bone: bpy.types.PoseBone) -> Vector:
    """The bone's swing direction in its rest frame: its local rotation applied to +Y.

    Adding a cone there lets the animator pose a bone and capture the pose as allowed.
    """
    return pose_bone.matrix_basis.to_quaternion() @ Vector((0.0, 1.0, 0.0))


class EWBIK_OT_apply_limit_preset(bpy.types.Operator):
    """Set joint limits on the armature's bones from a preset, recognising bones by their names"""

    bl_idname = "ewbik.apply_limit_preset"
    bl_label = "Apply Limit Preset"
    bl_options = {"REGISTER", "UNDO"}

    preset: EnumProperty(
        name="Preset",
        description="Which set of joint limits to apply",
        items=presets.available_presets(),
    )
    only_selected: BoolProperty(
        name="Only Selected",
        description="Change only the selected bones instead of every bone of the armature",
        default=False,
    )

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        obj = context.active_object
        if obj is None or obj.type != "ARMATURE":
            return False
        if obj.mode == "EDIT":  # the bones are rebuilt from the edit bones on leaving Edit Mode
            cls.poll_message_set("Switch the armature to Pose or Object Mode")
            return False
        return limits_editable(cls, obj)

    def execute(self, context: bpy.types.Context) -> set[str]:
        obj = context.active_object
        try:
            fitted = fitted_preset(obj, self.preset, context.scene.frame_current)
        except presets.PresetError as error:
            self.report({"ERROR"}, f"No limits set: {error.reason}")
            return {"CANCELLED"}
        wanted = [
            pose_bone
            for pose_bone in obj.pose.bones
            if not self.only_selected or (obj.mode == "POSE" and is_selected(pose_bone))
        ]
        if not wanted:
            self.report({"WARNING"}, "No bones selected")
            return {"CANCELLED"}
        limited = [pose_bone for pose_bone in wanted if pose_bone.name in fitted.limits]
        store_preset(obj, limited, fitted)
        message = (
            f"Limits set on {count(len(limited), 'bone')} {fitted.source}{preset_report(wanted, fitted)}"
        )
        self.report({"INFO"} if limited else {"WARNING"}, message)
        return {"FINISHED"} if limited else {"CANCELLED"}


class EWBIK_OT_cone_add(bpy.types.Operator):
    """Add a limit cone after the active one, centred on the bone's current direction"""

    bl_idname = "ewbik.cone_add"
    bl_label = "Add Limit Cone"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return editable_limit_bone(cls, context) is not None

    def execute(self, context: bpy.types.Context) -> set[str]:
        pose_bone = active_limit_bone(context)
        settings = pose_bone.bone.ewbik
        cones = settings.cones
        insert_at = min(settings.active_cone_index + 1, len(cones))
        cone = cones.add()
        cone.direction = current_direction(pose_bone)
        cones.move(len(cones) - 1, insert_at)
        settings.active_cone_index = insert_at
        return {"FINISHED"}


class EWBIK_OT_cone_remove(bpy.types.Operator):
    """Remove the active limit cone"""

    bl_idname = "ewbik.cone_remove"
    bl_label = "Remove Limit Cone"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        pose_bone = editable_limit_bone(cls, context)
        if pose_bone is None:
            return False
        settings = pose_bone.bone.ewbik
        return 0 <= settings.active_cone_index < len(settings.cones)

    def execute(self, context: bpy.types.Context) -> set[str]:
        settings = active_limit_bone(context).bone.ewbik
        settings.cones.remove(settings.active_cone_index)
        settings.active_cone_index = max(0, min(settings.active_cone_index, len(settings.cones) - 1))
        return {"FINISHED"}


class EWBIK_OT_cone_move(bpy.types.Operator):
    """Move the active limit cone up or down the list (the order decides which cones are bridged)"""

    bl_idname = "ewbik.cone_move"
    bl_label = "Move Limit Cone"
    bl_options = {"REGISTER", "UNDO"}

    direction: EnumProperty(name="Direction", items=(("UP", "Up", ""), ("DOWN", "Down", "")))

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        pose_bone = editable_limit_bone(cls, context)
        return pose_bone is not None and len(pose_bone.bone.ewbik.cones) > 1

    def execute(self, context: bpy.types.Context) -> set[str]:
        settings = active_limit_bone(context).bone.ewbik
        index = settings.active_cone_index
        target = index - 1 if self.direction == "UP" else index + 1
        if not (0 <= index < len(settings.cones) and 0 <= target < len(settings.cones)):
            return {"CANCELLED"}
        settings.cones.move(index, target)
        settings.active_cone_index = target
        return {"FINISHED"}


class EWBIK_OT_reset_limits(bpy.types.Operator):
    """Remove the joint limits (cones, twist limit, comfort) of the selected bones"""

    bl_idname = "ewbik.reset_limits"
    bl_label = "Reset Limits"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return limits_editable(cls, posed_armature(context))

    def execute(self, context: bpy.types.Context) -> set[str]:
        obj = posed_armature(context)
        chosen = selected_pose_bones(obj)
        if not chosen:
            self.report({"WARNING"}, "No bones selected")
            return {"CANCELLED"}
        for pose_bone in chosen:
            if stored_bone_limits(pose_bone.bone) is not None:
                set_limits(pose_bone.bone.ewbik, {})
        self.report({"INFO"}, f"Limits cleared on {count(len(chosen), 'bone')}")
        return {"FINISHED"}


CLASSES = (
    EWBIK_OT_apply_limit_preset,
    EWBIK_OT_cone_add,
    EWBIK_OT_cone_remove,
    EWBIK_OT_cone_move,
    EWBIK_OT_reset_limits,
)
