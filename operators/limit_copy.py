"""Joint limits from one bone to others: mirror to the other side, copy from the active bone."""

from collections.abc import Sequence

import bpy

from ..ewbik_addon.com.active import (
    active_limit_bone,
    editable_limit_bone,
    limits_editable,
    posed_armature,
    selected_pose_bones,
)
from ..ewbik_addon.com.limit_settings import limits_dict, set_limits
from ..ewbik_addon.com.messages import count
from ..ewbik_addon.limits.limit_mirror import mirror_pairs, mirrored_limits

NAMES_SHOWN = 8


def _names(names: Sequence[str]) -> str:
    """The first few names, and how many more."""
    more = len(names) - NAMES_SHOWN
    return ", ".join(names[:NAMES_SHOWN]) + (f" and {more} more" if more > 0 else "")


class EWBIK_OT_mirror_limits(bpy.types.Operator):
    """Give the bones on the other side (L <-> R by name) the mirror image of the active and selected bones' limits"""

    bl_idname = "ewbik.mirror_limits"
    bl_label = "Mirror Limits"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return limits_editable(cls, posed_armature(context))

    def execute(self, context: bpy.types.Context) -> set[str]:
        obj = posed_armature(context)
        chosen = selected_pose_bones(obj)
        active = active_limit_bone(context)
        if active is not None and active not in chosen:
            chosen.append(active)
        if not chosen:
            self.report({"WARNING"}, "No bones selected")
            return {"CANCELLED"}
        pairs, alone = mirror_pairs(obj, chosen)
        sources = {source.name for source, _target in pairs}
        pairs = [
            (source, target) for source, target in pairs if target.name not in sources or source == active
        ]
        new_limits = [
            mirrored_limits(source.bone, target.bone, limits_dict(source.bone.ewbik))
            for source, target in pairs
        ]
        for (_source, target), limits in zip(pairs, new_limits):
            set_limits(target.bone.ewbik, limits)
        message = f"Limits mirrored to {count(len(pairs), 'bone')}"
        if alone:
            message += f"; no other side for: {_names(alone)}"
        self.report({"INFO"} if pairs else {"WARNING"}, message)
        return {"FINISHED"} if pairs else {"CANCELLED"}


class EWBIK_OT_copy_limits(bpy.types.Operator):
    """Give the selected bones the active bone's joint limits (cones, twist and comfort)"""

    bl_idname = "ewbik.copy_limits"
    bl_label = "Copy Limits to Selected"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return editable_limit_bone(cls, context) is not None

    def execute(self, context: bpy.types.Context) -> set[str]:
        active = active_limit_bone(context)
        targets = [pose_bone for pose_bone in selected_pose_bones(active.id_data) if pose_bone != active]
        if not targets:
            self.report({"WARNING"}, "Select the bones to copy to, then make the source bone active")
            return {"CANCELLED"}
        limits = limits_dict(active.bone.ewbik)
        for pose_bone in targets:
            set_limits(pose_bone.bone.ewbik, limits)
        self.report({"INFO"}, f"Limits of {active.name} copied to {count(len(targets), 'bone')}")
        return {"FINISHED"}


CLASSES = (EWBIK_OT_mirror_limits, EWBIK_OT_copy_limits)
