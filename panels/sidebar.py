"""The "EWBIK" tab of the 3D viewport sidebar: solver settings, pins, joint limits of the active bone.

Panels only show properties and call operators by idname; everything they change
is a stored RNA property, so it is undoable and saved with the file.
"""

from __future__ import annotations

import bpy

from ..ewbik_addon.com.active import (
    active_armature,
    active_limit_bone,
    pinning_armature,
    posed_armature,
    shown_pin,
)
from ..ewbik_addon.com.messages import count
from ..ewbik_addon.com.pin_kinds import pin_kind
from ..ewbik_addon.com.stored_settings import bone_target
from ..ewbik_addon.limits.limit_status import LimitStatus, limit_status
from ..ewbik_addon.rigs import production_checks, production_rigs
from ..solver import available_presets, compiled_loop_available

NUMPY_LOOP_NOTE = "Compiled solver not built for this system: solving in numpy (slower)"


class EWBIK_MT_limit_presets(bpy.types.Menu):
    """Humanoid joint-limit presets, for the whole armature or the selected bones."""

    bl_idname = "EWBIK_MT_limit_presets"
    bl_label = "Limit Presets"

    def draw(self, context: bpy.types.Context) -> None:
        layout = self.layout
        layout.label(text="All Bones")
        for preset_id, label, _description in available_presets():
            op = layout.operator("ewbik.apply_limit_preset", text=label)
            op.preset = preset_id
            op.only_selected = False
        layout.separator()
        layout.label(text="Selected Bones")
        for preset_id, label, _description in available_presets():
            op = layout.operator("ewbik.apply_limit_preset", text=label)
            op.preset = preset_id
            op.only_selected = True


class EWBIK_UL_pins(bpy.types.UIList):
    """Pinned pose bones of the armature: the list filters `pose.bones` down to those with a target."""

    bl_idname = "EWBIK_UL_pins"

    def draw_item(
        self,
        context: bpy.types.Context,
        layout: bpy.types.UILayout,
        data: bpy.types.bpy_struct,
        item: bpy.types.PoseBone,
        icon: int,
        active_data: bpy.types.bpy_struct,
        active_propname: str,
        index: int,
    ) -> None:
        settings = item.ewbik
        row = layout.row(align=True)
        dragged = settings.target is not None and settings.target == context.active_object
        row.label(text=item.name, icon="PINNED" if dragged else "BONE_DATA")
        row.prop(settings, "target", text="")
        row.prop(settings, "weight", text="", emboss=False)

    def filter_items(
        self, context: bpy.types.Context, data: bpy.types.bpy_struct, propname: str
    ) -> tuple[list[int], list[int]]:
        bones = getattr(data, propname)
        helpers = bpy.types.UI_UL_list
        flags = (
            helpers.filter_items_by_name(self.filter_name, self.bitflag_filter_item, bones, "name")
            if self.filter_name
            else [self.bitflag_filter_item] * len(bones)
        )
        flags = [flag if bone_target(bone) is not None else 0 for flag, bone in zip(flags, bones)]
        order = helpers.sort_items_by_name(bones, "name") if self.use_filter_sort_alpha else []
        return flags, order


class EWBIK_UL_cones(bpy.types.UIList):
    """The active bone's limit cones, in kusudama order."""

    bl_idname = "EWBIK_UL_cones"

    def draw_item(
        self,
        context: bpy.types.Context,
        layout: bpy.types.UILayout,
        data: bpy.types.bpy_struct,
        item: bpy.types.PropertyGroup,
        icon: int,
        active_data: bpy.types.bpy_struct,
        active_propname: str,
        index: int,
    ) -> None:
        row = layout.row(align=True)
        row.label(text=f"Cone {index + 1}", icon="MESH_CONE")
        row.prop(item, "flex", text="", emboss=False)
        row.prop(item, "abduct", text="", emboss=False)
        row.prop(item, "radius", text="", emboss=False)


class SidebarPanel:
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "EWBIK"


class EWBIK_PT_solver(SidebarPanel, bpy.types.Panel):
    """Solver settings of the active armature, and how the last solve went."""

    bl_idname = "EWBIK_PT_solver"
    bl_label = "EWBIK Solver"

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        obj = active_armature(context)
        return obj is not None and obj.mode in {"POSE", "OBJECT"}

    def draw_header_preset(self, context: bpy.types.Context) -> None:
        """Live, labelled, at the header's right end: a bare checkbox before the title would read
        as switching the whole solver off (Solve still works with Live off)."""
        self.layout.prop(active_armature(context).ewbik, "live")

    def draw(self, context: bpy.types.Context) -> None:
        settings = active_armature(context).ewbik
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False

        col = layout.column(align=True)
        col.prop(settings, "iterations")
        col.prop(settings, "time_budget_ms")
        col.prop(settings, "tolerance")
        col = layout.column(align=True)
        col.prop(settings, "dampening")
        col.prop(settings, "stabilization_passes")
        layout.prop(settings, "influence", slider=True)
        layout.prop(settings, "soft_reach", slider=True)
        col = layout.column(heading="Options")
        col.prop(settings, "translate_root")
        row = col.row()
        row.active = settings.translate_root
        row.prop(settings, "balance")
        col.prop(settings, "strict_limits")
        col.prop(settings, "show_limits")
        col.prop(settings, "auto_limits")
        col.prop(settings, "stand_on_pin")

        layout.operator("ewbik.solve", icon="PLAY")
        if settings.status:
            layout.label(text=settings.status, icon="ERROR" if settings.status_is_error else "INFO")
        if not compiled_loop_available():
            layout.label(text=NUMPY_LOOP_NOTE, icon="ERROR")
        row = layout.row(align=True)
        row.operator("ewbik.export_scene", text="Export Scene", icon="EXPORT")
        row.operator("ewbik.import_scene", text="Import", icon="IMPORT")


class EWBIK_PT_pins(SidebarPanel, bpy.types.Panel):
    """Pinned bones: add and remove pins, tune the active one."""

    bl_idname = "EWBIK_PT_pins"
    bl_label = "Pins"

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return pinning_armature(context) is not None

    def draw(self, context: bpy.types.Context) -> None:
        obj = pinning_armature(context)
        layout = self.layout

        row = layout.row()
        row.template_list("EWBIK_UL_pins", "", obj.pose, "bones", obj.ewbik, "active_pin_index", rows=4)
        col = row.column(align=True)
        col.operator("ewbik.pin", icon="ADD", text="")
        col.operator("ewbik.unpin", icon="REMOVE", text="")
        layout.prop(obj.ewbik, "target_follow")

        pose_bone = shown_pin(context, obj)
        if pose_bone is None:
            layout.label(text="Select bones and press + to pin them", icon="INFO")
            return
        settings = pose_bone.ewbik
        layout.use_property_split = True
        layout.use_property_decorate = False
        col = layout.column()
        row = col.row(align=True)
        row.prop(settings, "target")
        row.operator("ewbik.select_pin_target", text="", icon="RESTRICT_SELECT_OFF").bone = pose_bone.name
        row.operator("ewbik.jump_to_target", text="", icon="ARROW_LEFTRIGHT")
        if settings.target is not None and settings.target.type == "ARMATURE":
            col.prop_search(settings, "target_bone", settings.target.pose, "bones")
        row = col.row(align=True)
        row.prop(settings, "pole")
        row.operator("ewbik.add_pole", text="", icon="ADD")
        _draw_pin_kind(col, settings)


def _draw_pin_kind(layout: bpy.types.UILayout, settings: bpy.types.PropertyGroup) -> None:
    """What the active pin holds and how hard: kind (and an aim's axis), planted, priority, weight,
    axis weights, falloff."""
    layout.prop(settings, "pin_kind")
    kind = pin_kind(settings.pin_kind)
    if kind.aims:
        layout.prop(settings, "aim_axis")
    layout.prop(settings, "planted")
    layout.prop(settings, "priority")
    layout.prop(settings, "weight")
    axes = layout.column()
    axes.active = kind.turns_with_target
    axes.prop(settings, "orientation_weights")
    layout.prop(settings, "falloff")


class EWBIK_UL_role_mapping(bpy.types.UIList):
    """The armature's name mapping: bones and the body roles presets give them."""

    bl_idname = "EWBIK_UL_role_mapping"

    def draw_item(
        self,
        context: bpy.types.Context,
        layout: bpy.types.UILayout,
        data: bpy.types.bpy_struct,
        item: bpy.types.PropertyGroup,
        icon: int,
        active_data: bpy.types.bpy_struct,
        active_propname: str,
        index: int,
    ) -> None:
        row = layout.row(align=True)
        row.prop_search(item, "bone", data.id_data.pose, "bones", text="")
        row.prop(item, "role", text="")


class EWBIK_PT_rig(SidebarPanel, bpy.types.Panel):
    """What the solver can move on this rig: bones posed by constraints or drivers, the Rigify
    IK/FK switch, and the name mapping presets use."""

    bl_idname = "EWBIK_PT_rig"
    bl_label = "Rig"
    bl_options = {"DEFAULT_CLOSED"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return posed_armature(context) is not None

    def draw(self, context: bpy.types.Context) -> None:
        obj = posed_armature(context)
        layout = self.layout
        fixed = production_checks.fixed_bones(obj)
        layout.label(text=f"{len(fixed)} bones posed by constraints or drivers", icon="CONSTRAINT_BONE")
        pose_bone = context.active_pose_bone
        if pose_bone is not None and pose_bone.name in fixed:
            col = layout.column(align=True)
            col.label(text=f"{pose_bone.name}: {fixed[pose_bone.name]}", icon="ERROR")
            col.label(text=production_rigs.pin_instead_hint(obj, pose_bone.name, fixed))
        if production_rigs.is_rigify(obj):
            row = layout.row(align=True)
            row.operator("ewbik.switch_to_fk", icon="CON_KINEMATIC")
            row.operator("ewbik.restore_ik_fk", icon="LOOP_BACK")
            switched = production_rigs.switched_limbs(obj)
            if switched:
                layout.label(text="In FK for pins: " + ", ".join(switched))
        layout.label(text="Body Roles (presets)")
        row = layout.row()
        row.template_list(
            "EWBIK_UL_role_mapping", "", obj.ewbik, "role_mapping", obj.ewbik, "active_role_index", rows=3
        )
        col = row.column(align=True)
        col.operator("ewbik.role_mapping_add", icon="ADD", text="")
        col.operator("ewbik.role_mapping_remove", icon="REMOVE", text="")


def draw_limit_sharing(layout: bpy.types.UILayout, obj: bpy.types.Object) -> None:
    """Mirror/copy, what the viewport shows, and how many bones the current pose holds at their limits."""
    row = layout.row(align=True)
    row.operator("ewbik.mirror_limits", icon="MOD_MIRROR")
    row.operator("ewbik.copy_limits", icon="COPYDOWN")
    col = layout.column(heading="Viewport")
    col.prop(obj.ewbik, "limits_scope", text="Show")
    col.prop(obj.ewbik, "limits_see_through")
    status = limit_status(obj)
    if status.count:
        layout.label(text=at_limit_text(status), icon="ERROR")


def at_limit_text(status: LimitStatus) -> str:
    """E.g. "2 bones at limits, 1 beyond" or "1 bone beyond limits"."""
    at, beyond = len(status.at), len(status.beyond)
    text = f"{count(at, 'bone')} at limits" if at else f"{count(beyond, 'bone')} beyond limits"
    return text + (f", {beyond} beyond" if at and beyond else "")


class EWBIK_PT_limits(SidebarPanel, bpy.types.Panel):
    """Joint limits of the active pose bone: the kusudama cones, stiffness and comfort."""

    bl_idname = "EWBIK_PT_limits"
    bl_label = "Joint Limits"

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return active_limit_bone(context) is not None

    def draw(self, context: bpy.types.Context) -> None:
        pose_bone = active_limit_bone(context)
        settings = pose_bone.bone.ewbik
        layout = self.layout

        row = layout.row(align=True)
        row.label(text=pose_bone.name, icon="BONE_DATA")
        row.menu("EWBIK_MT_limit_presets", text="Presets", icon="PRESET")
        row.operator("ewbik.limits_from_action", text="From Action", icon="ACTION")
        row.operator("ewbik.reset_limits", text="", icon="X")

        row = layout.row()
        row.template_list("EWBIK_UL_cones", "", settings, "cones", settings, "active_cone_index", rows=3)
        col = row.column(align=True)
        col.operator("ewbik.cone_add", icon="ADD", text="")
        col.operator("ewbik.cone_remove", icon="REMOVE", text="")
        col.separator()
        col.operator("ewbik.cone_move", icon="TRIA_UP", text="").direction = "UP"
        col.operator("ewbik.cone_move", icon="TRIA_DOWN", text="").direction = "DOWN"

        layout.use_property_split = True
        layout.use_property_decorate = False
        if 0 <= settings.active_cone_index < len(settings.cones):
            cone = settings.cones[settings.active_cone_index]
            col = layout.column(align=True)
            col.prop(cone, "flex")
            col.prop(cone, "abduct")
            col.prop(cone, "radius")
            col.prop(cone, "direction")
        col = layout.column()
        col.prop(pose_bone.ewbik, "stiffness", slider=True)
        col.prop(pose_bone.ewbik, "stretch")
        col.prop(settings, "comfort", slider=True)
        draw_limit_sharing(layout, pose_bone.id_data)


class EWBIK_PT_limits_twist(SidebarPanel, bpy.types.Panel):
    """Twist limit of the active pose bone (rotation about its own axis)."""

    bl_idname = "EWBIK_PT_limits_twist"
    bl_label = "Twist"
    bl_parent_id = "EWBIK_PT_limits"

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return active_limit_bone(context) is not None

    def draw_header(self, context: bpy.types.Context) -> None:
        self.layout.prop(active_limit_bone(context).bone.ewbik, "use_twist_limit", text="")

    def draw(self, context: bpy.types.Context) -> None:
        settings = active_limit_bone(context).bone.ewbik
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False
        col = layout.column(align=True)
        col.active = settings.use_twist_limit
        col.prop(settings, "twist_min", text="Min")
        col.prop(settings, "twist_max", text="Max")


CLASSES = (
    EWBIK_MT_limit_presets,
    EWBIK_UL_pins,
    EWBIK_UL_cones,
    EWBIK_UL_role_mapping,
    EWBIK_PT_solver,
    EWBIK_PT_pins,
    EWBIK_PT_rig,
    EWBIK_PT_limits,
    EWBIK_PT_limits_twist,
)
