"""`ewbik.pin` / `ewbik.unpin`: give selected pose bones a target empty to drag, or take it away."""

import bpy
from bpy.props import StringProperty

from ..ewbik_addon import (
    armature_checks,
    limit_presets,
    live,
    pin_reading,
    production_checks,
    production_rigs,
    standing_body,
)
from ..ewbik_addon.active import editable_posing_armature, selected_pose_bones
from ..ewbik_addon.messages import count
from ..ewbik_addon.stored_settings import pinned_bones
from ..ewbik_addon.targets import TARGET_MARK, TargetFollowError, check_follow, is_deleted, new_target


class EWBIK_OT_pin(bpy.types.Operator):
    """Pin the selected pose bones: each gets an empty at its current pose to drag around (a humanoid without limits gets them; the first pins of a standing body also plant its feet and turn Move Root on); a pin whose empty was deleted gets a new one"""

    bl_idname = "ewbik.pin"
    bl_label = "Pin Bones"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        return editable_posing_armature(cls, context)

    def execute(self, context):
        obj = context.object
        bones = selected_pose_bones(obj)
        if not bones:
            self.report({"ERROR"}, "Select the pose bones to pin")
            return {"CANCELLED"}
        try:
            check_follow(obj)
        except TargetFollowError as error:
            self.report({"ERROR"}, f"Nothing pinned: {error}")
            return {"CANCELLED"}
        names, remarks = production_rigs.bones_to_pin(
            obj, [pose_bone.name for pose_bone in bones], production_checks.fixed_bones(obj)
        )
        with live.suspended():
            switched = production_rigs.switch_to_fk(obj, names)
        if switched:
            remarks.append("limbs switched to FK (Rig > Restore IK/FK switches them back)")
        if not names:
            self.report({"ERROR"}, "; ".join(remarks))
            return {"CANCELLED"}
        bones = [obj.pose.bones[name] for name in names]
        pinned_before = any(not is_deleted(pose_bone.ewbik.target) for pose_bone in pinned_bones(obj))
        created = 0
        for pose_bone in bones:
            if pose_bone.ewbik.target is not None and not is_deleted(pose_bone.ewbik.target):
                continue
            pose_bone.ewbik.target = new_target(context, obj, pose_bone)
            created += 1
        auto_limits = limit_presets.set_humanoid_limits_if_none(obj, context.scene.frame_current)
        standing = standing_body.stand_on_pin(context, obj, pinned_before)
        remarks = "".join(f"; {remark}" for remark in remarks)
        self.report(
            {"INFO"},
            f"Pinned {count(len(bones), 'bone')}, {count(created, 'new target')}{auto_limits}{standing}{remarks}",
        )
        return {"FINISHED"}


class EWBIK_OT_unpin(bpy.types.Operator):
    """Unpin the selected pose bones (or all of them); delete the target empties Pin made unless they are animated, constrained or something else uses them"""

    bl_idname = "ewbik.unpin"
    bl_label = "Unpin Bones"
    bl_options = {"REGISTER", "UNDO"}

    all_bones: bpy.props.BoolProperty(name="All Bones", description="Unpin every bone of the armature")

    @classmethod
    def poll(cls, context):
        return editable_posing_armature(cls, context)

    def execute(self, context):
        obj = context.object
        bones = [
            pose_bone
            for pose_bone in (obj.pose.bones if self.all_bones else selected_pose_bones(obj))
            if pose_bone.ewbik.target is not None
        ]
        if not bones:
            self.report({"WARNING"}, "No pinned bone selected")
            return {"CANCELLED"}
        targets = {pose_bone.ewbik.target for pose_bone in bones}
        for pose_bone in bones:
            pose_bone.ewbik.target = None
        try:
            pin_reading.pinned_targets(
                obj, rescan=True
            )  # the cached pins forget these before their empties go
        except armature_checks.RigError:
            pass  # the live status reports what else is wrong with the rig
        removed, kept = _remove_unused_targets(targets)
        message = f"Unpinned {count(len(bones), 'bone')}, removed {count(removed, 'target')}"
        if kept:
            message += f"; kept {', '.join(kept)}"
        self.report({"INFO"}, message)
        return {"FINISHED"}


def _why_kept(target, users):
    """Why an empty Pin made must stay when unpinned ("" when it can go): it carries the user's
    keys, NLA strips or drivers, constraints, has children, or something else (another pin, a
    constraint) uses it."""
    animation = target.animation_data
    if animation is not None and (animation.action or animation.nla_tracks or animation.drivers):
        return "it is animated"
    if target.constraints:
        return "it has constraints"
    if target.children:
        return "it has children"
    if any(not isinstance(user, (bpy.types.Collection, bpy.types.Scene)) for user in users):
        return "something else uses it"
    return ""


def _remove_unused_targets(targets):
    """Delete the empties this extension created that nothing but collections (and scenes listing
    them) uses. Returns (how many were removed, ["'name' (why)"] of ours that were kept)."""
    ours = [target for target in targets if TARGET_MARK in target and target.library is None]
    users = bpy.data.user_map(subset=ours)
    removed, kept = 0, []
    collections = set()
    for target in ours:
        why = _why_kept(target, users[target]) if not is_deleted(target) else ""
        if why:
            kept.append(f"target '{target.name}' ({why})")
            continue
        collections.update(target.users_collection)
        bpy.data.objects.remove(target)
        removed += 1
    for collection in collections:
        if (
            collection.name.startswith("EWBIK Targets ")
            and not collection.all_objects
            and not collection.children
        ):
            bpy.data.collections.remove(collection)
    return removed, kept


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
