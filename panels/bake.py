"""The "Bake" panel of the EWBIK sidebar tab: turn the solved motion into keys (`ewbik.bake`).

The range shown is the scene's (or its preview range when that is on), which the bake uses by
default. The options are the operator's last-used properties, the way Blender's own panels
offer operator options (Symmetrize in sculpt mode): the button runs with what the panel shows.
"""

from __future__ import annotations

import bpy

from ..ewbik_addon.com.active import active_armature
from .sidebar import SidebarPanel


class EWBIK_PT_bake(SidebarPanel, bpy.types.Panel):
    """Bake the active armature's solved motion over the scene range into rotation keys."""

    bl_idname = "EWBIK_PT_bake"
    bl_label = "Bake"
    bl_options = {"DEFAULT_CLOSED"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        obj = active_armature(context)
        return obj is not None and obj.mode in {"POSE", "OBJECT"}

    def draw(self, context: bpy.types.Context) -> None:
        scene = context.scene
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False

        col = layout.column(align=True)
        if scene.use_preview_range:
            col.prop(scene, "frame_preview_start", text="Preview Start")
            col.prop(scene, "frame_preview_end", text="End")
        else:
            col.prop(scene, "frame_start", text="Frame Start")
            col.prop(scene, "frame_end", text="End")
        options = context.window_manager.operator_properties_last("ewbik.bake")
        layout.prop(options, "step")
        col = layout.column(heading="Keys")
        col.prop(options, "keys_only")
        col = layout.column(align=True)
        col.prop(options, "tolerance_mm")
        angle = col.row()
        angle.active = options.tolerance_mm > 0.0
        angle.prop(options, "tolerance_deg")
        col = layout.column(heading="Options")
        col.prop(options, "only_selected")
        col.prop(options, "replace_range")
        col.prop(options, "new_action")
        col.prop(options, "disable_live")
        layout.operator("ewbik.bake", icon="KEYINGSET")


CLASSES = (EWBIK_PT_bake,)
