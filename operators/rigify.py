"""Production-rig actions: Rigify's IK/FK switch for the pinned limbs, and the armature's name
mapping (bones -> body roles) that presets use where names are not recognised."""

import bpy

from ..ewbik_addon.com.active import active_armature, selected_pose_bones
from ..ewbik_addon.com.live_pause import suspended
from ..ewbik_addon.com.stored_settings import pinned_bones
from ..ewbik_addon.rigs import production_rigs


def _armature(cls: type[bpy.types.Operator], context: bpy.types.Context) -> bool:
    if active_armature(context) is None:
        cls.poll_message_set("Select an armature")
        return False
    return True


class EWBIK_OT_switch_to_fk(bpy.types.Operator):
    """Switch the limbs of the pinned FK controls to FK (the controls take the limb's current pose first), so the deform bones follow what the solver moves"""

    bl_idname = "ewbik.switch_to_fk"
    bl_label = "Switch to FK"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return _armature(cls, context)

    def execute(self, context: bpy.types.Context) -> set[str]:
        obj = active_armature(context)
        pinned = [pose_bone.name for pose_bone in pinned_bones(obj)]
        with suspended():
            switched = production_rigs.switch_to_fk(obj, pinned)
        obj.update_tag()
        if not switched:
            self.report({"INFO"}, "No pinned limb is in IK")
            return {"CANCELLED"}
        self.report({"INFO"}, f"Switched to FK: {', '.join(switched)}")
        return {"FINISHED"}


class EWBIK_OT_restore_ik_fk(bpy.types.Operator):
    """Put back the IK/FK settings that pinning switched to FK"""

    bl_idname = "ewbik.restore_ik_fk"
    bl_label = "Restore IK/FK"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return _armature(cls, context)

    def execute(self, context: bpy.types.Context) -> set[str]:
        restored = production_rigs.restore_ik_fk(active_armature(context))
        if not restored:
            self.report({"INFO"}, "No IK/FK switch to restore")
            return {"CANCELLED"}
        self.report({"INFO"}, f"Restored the IK/FK switch of {restored} limb(s)")
        return {"FINISHED"}


class EWBIK_OT_role_mapping_add(bpy.types.Operator):
    """Add the selected bones to the name mapping, each with the role its name gives (or None), to set by hand"""

    bl_idname = "ewbik.role_mapping_add"
    bl_label = "Map Bones"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        obj = active_armature(context)
        if obj is None or obj.mode != "POSE":
            cls.poll_message_set("Select bones in Pose Mode")
            return False
        return True

    def execute(self, context: bpy.types.Context) -> set[str]:
        obj = active_armature(context)
        mapped = {row.bone for row in obj.ewbik.role_mapping}
        bones = [pose_bone.name for pose_bone in selected_pose_bones(obj) if pose_bone.name not in mapped]
        if not bones:
            self.report({"WARNING"}, "Select bones that are not mapped yet")
            return {"CANCELLED"}
        roles = production_rigs.bone_roles(obj)
        for bone in bones:
            row = obj.ewbik.role_mapping.add()
            row.bone = bone
            row.role = roles.get(bone, production_rigs.NO_ROLE)
        obj.ewbik.active_role_index = len(obj.ewbik.role_mapping) - 1
        self.report({"INFO"}, f"Mapped {len(bones)} bone(s)")
        return {"FINISHED"}


class EWBIK_OT_role_mapping_remove(bpy.types.Operator):
    """Remove the active row of the name mapping (the bone's name decides its role again)"""

    bl_idname = "ewbik.role_mapping_remove"
    bl_label = "Remove Mapping"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        obj = active_armature(context)
        return obj is not None and 0 <= obj.ewbik.active_role_index < len(obj.ewbik.role_mapping)

    def execute(self, context: bpy.types.Context) -> set[str]:
        settings = active_armature(context).ewbik
        settings.role_mapping.remove(settings.active_role_index)
        settings.active_role_index = min(settings.active_role_index, len(settings.role_mapping) - 1)
        return {"FINISHED"}


CLASSES = (
    EWBIK_OT_switch_to_fk,
    EWBIK_OT_restore_ik_fk,
    EWBIK_OT_role_mapping_add,
    EWBIK_OT_role_mapping_remove,
)
