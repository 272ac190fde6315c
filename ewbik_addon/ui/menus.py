"""EWBIK entries where animators look for them: the Pose menu and the bone right-click menu."""

from __future__ import annotations

import bpy

ENTRIES = (  # (operator, label, icon): one list serves both menus
    ("ewbik.pin", "Pin Bones", "PINNED"),
    ("ewbik.pin_to_active_bone", "Pin to Active Bone", "BONE_DATA"),
    ("ewbik.unpin", "Unpin Bones", "UNPINNED"),
    ("ewbik.jump_to_target", "Jump Between Pin and Target", "ARROW_LEFTRIGHT"),
    ("ewbik.solve", "Solve Pins Now", "PLAY"),
    ("ewbik.bake", "Bake Pins to Keys", "KEYINGSET"),
)
HOST_MENUS = ("VIEW3D_MT_pose", "VIEW3D_MT_pose_context_menu")


class EWBIK_MT_pose(bpy.types.Menu):
    """Full-body IK pins of the armature."""

    bl_idname = "EWBIK_MT_pose"
    bl_label = "EWBIK Pins"

    def draw(self, context: bpy.types.Context) -> None:
        for operator, label, icon in ENTRIES:
            self.layout.operator(operator, text=label, icon=icon)


def draw_entry(menu: bpy.types.Menu, context: bpy.types.Context) -> None:
    menu.layout.separator()
    menu.layout.menu(EWBIK_MT_pose.bl_idname, icon="CON_KINEMATIC")


def register() -> None:
    bpy.utils.register_class(EWBIK_MT_pose)
    for host in HOST_MENUS:
        getattr(bpy.types, host).append(draw_entry)


def unregister() -> None:
    for host in HOST_MENUS:
        getattr(bpy.types, host).remove(draw_entry)
    bpy.utils.unregister_class(EWBIK_MT_pose)
