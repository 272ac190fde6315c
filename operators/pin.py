"""`ewbik.pin` / `ewbik.unpin`: give selected pose bones a target empty to drag, or take it away."""

import bpy
import mathutils
from bpy.props import StringProperty

from ..ewbik_addon import bridge, limit_presets, live, production_rigs
from ..ewbik_addon.active import selected_pose_bones
from ..ewbik_addon.targets import TARGET_MARK, new_target



def _posing_armature(cls, context):
    obj = context.object
    if obj is None or obj.type != "ARMATURE":
        cls.poll_message_set("Select an armature")
        return False
    if obj.mode != "POSE":
        cls.poll_message_set("Switch the armature to Pose Mode and select bones")
        return False
    if obj.library is not None or not obj.is_editable:
        cls.poll_message_set("The armature is linked or read-only")
        return False
    return True


class EWBIK_OT_pin(bpy.types.Operator):
    """Pin the selected pose bones: each gets an empty at its current pose to drag around (a humanoid without limits gets them)"""

    bl_idname = "ewbik.pin"
    bl_label = "Pin Bones"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        return _posing_armature(cls, context)

    def execute(self, context):
        obj = context.object
        bones = selected_pose_bones(obj)
        if not bones:
            self.report({"ERROR"}, "Select the pose bones to pin")
            return {"CANCELLED"}
        names, remarks = production_rigs.bones_to_pin(obj, [pose_bone.name for pose_bone in bones],
                                                      bridge.fixed_bones(obj))
        with live.suspended():
            switched = production_rigs.switch_to_fk(obj, names)
        if switched:
            remarks.append("limbs switched to FK (Rig > Restore IK/FK switches them back)")
        if not names:
            self.report({"ERROR"}, "; ".join(remarks))
            return {"CANCELLED"}
        bones = [obj.pose.bones[name] for name in names]
        created = 0
        for pose_bone in bones:
            if pose_bone.ewbik.target is not None:
                continue
            pose_bone.ewbik.target = new_target(context, obj, pose_bone)
            created += 1
        auto_limits = limit_presets.set_humanoid_limits_if_none(obj, context.scene.frame_current)
        remarks = "".join(f"; {remark}" for remark in remarks)
        self.report({"INFO"}, f"Pinned {len(bones)} bone(s), {created} new target(s){auto_limits}{remarks}")
        return {"FINISHED"}


class EWBIK_OT_unpin(bpy.types.Operator):
    """Unpin the selected pose bones (or all of them); delete their targets unless something else uses them"""

    bl_idname = "ewbik.unpin"
    bl_label = "Unpin Bones"
    bl_options = {"REGISTER", "UNDO"}

    all_bones: bpy.props.BoolProperty(name="All Bones", description="Unpin every bone of the armature")

    @classmethod
    def poll(cls, context):
        return _posing_armature(cls, context)

    def execute(self, context):
        obj = context.object
        bones = [pose_bone for pose_bone in (obj.pose.bones if self.all_bones else selected_pose_bones(obj))
                 if pose_bone.ewbik.target is not None]
        if not bones:
            self.report({"WARNING"}, "No pinned bone selected")
            return {"CANCELLED"}
        targets = {pose_bone.ewbik.target for pose_bone in bones}
        for pose_bone in bones:
            pose_bone.ewbik.target = None
        removed = _remove_unused_targets(targets)
        self.report({"INFO"}, f"Unpinned {len(bones)} bone(s), removed {removed} target(s)")
        return {"FINISHED"}


def _remove_unused_targets(targets):
    """Delete the empties this extension created that nothing but collections (and scenes listing them) uses."""
    ours = [target for target in targets if TARGET_MARK in target and target.library is None]
    users = bpy.data.user_map(subset=ours)
    removed = 0
    collections = set()
    for target in ours:
        if target.children or any(not isinstance(user, (bpy.types.Collection, bpy.types.Scene))
                                  for user in users[target]):
            continue
        collections.update(target.users_collection)
        bpy.data.objects.remove(target)
        removed += 1
    for collection in collections:
        if collection.name.startswith("EWBIK Targets ") and not collection.all_objects and not collection.children:
            bpy.data.collections.remove(collection)
    return removed


class EWBIK_OT_select_pin_target(bpy.types.Operator):
    """Select the target empty of this pin (leaving pose mode) so it can be moved"""

    bl_idname = "ewbik.select_pin_target"
    bl_label = "Select Target"
    bl_options = {"REGISTER", "UNDO"}

    bone: StringProperty(name="Bone", description="Pinned pose bone whose target to select")

    @classmethod
    def poll(cls, context):
        obj = context.active_object
        return obj is not None and obj.type == "ARMATURE"

    def execute(self, context):
        obj = context.active_object
        pose_bone = obj.pose.bones.get(self.bone)
        target = pose_bone.ewbik.target if pose_bone is not None else None
        if target is None:
            self.report({"WARNING"}, f"Bone '{self.bone}' is not pinned")
            return {"CANCELLED"}
        if target.name not in context.view_layer.objects:
            self.report({"WARNING"}, f"Target '{target.name}' is not in this view layer")
            return {"CANCELLED"}
        if obj.mode != "OBJECT":
            bpy.ops.object.mode_set(mode="OBJECT")
        for other in context.view_layer.objects:
            other.select_set(False)
        target.hide_set(False)
        target.select_set(True)
        context.view_layer.objects.active = target
        return {"FINISHED"}


CLASSES = (EWBIK_OT_pin, EWBIK_OT_unpin, EWBIK_OT_select_pin_target)
