"""EWBIK where animators look: the Pose menu, the bone right-click menu, Pose Mode shortcuts, jumping
between a pinned bone and its target."""

import addon_utils
import bpy
import pytest

from tests.support.blender_helpers import (
    PACKAGE,
    addon_module,
    build_metarig,
    make_active,
    pin,
    select_pose_bones,
)
from tests.support.keymaps import default_pose_mode_bindings
from tests.support.ui_layout import RecordingLayout


class MenuLayout(RecordingLayout):
    """The recording layout, also noting the text each operator entry shows."""

    def __init__(self):
        super().__init__([])

    def operator(self, idname, text="", **kwargs):
        self.log.append(("operator text", text))
        return super().operator(idname, **kwargs)

    def logged(self, kind):
        return [value for entry_kind, value in self.log if entry_kind == kind]


def drawn_by(draw_functions):
    layout = MenuLayout()
    host = type("Host", (), {"layout": layout})()
    for draw in draw_functions:
        draw(host, bpy.context)
    return layout


@pytest.mark.parametrize("host", ["VIEW3D_MT_pose", "VIEW3D_MT_pose_context_menu"])
def test_pose_menus_offer_the_ewbik_submenu(host):
    appended = getattr(bpy.types, host).draw._draw_funcs
    layout = drawn_by([draw for draw in appended if draw.__module__.startswith(PACKAGE)])
    assert layout.logged("menu") == ["EWBIK_MT_pose"]


def test_the_submenu_lists_registered_operators_with_distinct_readable_names():
    layout = drawn_by([bpy.types.EWBIK_MT_pose.draw])
    idnames = layout.logged("operator")
    assert {"ewbik.pin", "ewbik.unpin", "ewbik.pin_to_active_bone", "ewbik.jump_to_target"} <= set(idnames)
    labels = layout.logged("operator text")
    assert len(set(labels)) == len(labels) and all(len(text.split()) >= 2 for text in labels)
    for idname in idnames:
        category, name = idname.split(".")
        assert hasattr(getattr(bpy.ops, category), name), idname
    assert bpy.types.EWBIK_MT_pose.bl_label == "EWBIK Pins"


def test_shortcuts_are_on_keys_pose_mode_leaves_free_and_go_away_on_disable():
    keymaps = addon_module("ewbik_addon.ui.keymaps")
    bindings = default_pose_mode_bindings()
    assert ("G", False, False, False) in bindings  # the oracle sees Blender's own grab key
    shortcuts = {
        shortcut.operator: (shortcut.key, shortcut.shift, shortcut.ctrl, shortcut.alt)
        for shortcut in keymaps.SHORTCUTS
        if shortcut.keymap == keymaps.POSE
    }
    assert set(shortcuts) == {"ewbik.toggle_pin", "ewbik.jump_to_target"}
    assert not set(shortcuts.values()) & bindings

    keymap = bpy.context.window_manager.keyconfigs.addon.keymaps["Pose"]
    ours = {
        item.idname: (item.type, item.shift, item.ctrl, item.alt)
        for item in keymap.keymap_items
        if item.idname.startswith("ewbik.")
    }
    assert ours == {
        operator: (key, bool(s), bool(c), bool(a)) for operator, (key, s, c, a) in shortcuts.items()
    }

    addon_utils.disable(PACKAGE, default_set=True)
    assert not [item for item in keymap.keymap_items if item.idname.startswith("ewbik.")]
    addon_utils.enable(PACKAGE, default_set=True)
    items = bpy.context.window_manager.keyconfigs.addon.keymaps["Pose"].keymap_items
    assert sorted(item.idname for item in items if item.idname.startswith("ewbik.")) == sorted(shortcuts)


def test_preferences_list_the_shortcuts():
    preferences = bpy.context.preferences.addons[PACKAGE].preferences
    assert type(preferences).__name__ == "EWBIK_AP_preferences"

    layout = MenuLayout()
    type(preferences).draw(type("Host", (), {"layout": layout})(), bpy.context)
    labels = layout.logged("label")  # no user keyconfig headless: listed as text
    assert "Toggle Pin: Shift Ctrl P" in labels
    assert "Add/Remove Limit Cone Here: Shift Ctrl LEFTMOUSE" in labels


def test_toggle_pin_pins_then_unpins_the_selection(metarig):
    make_active(metarig)
    bpy.ops.object.mode_set(mode="POSE")
    select_pose_bones(metarig, ["hand.L", "foot.L"])
    assert bpy.ops.ewbik.toggle_pin() == {"FINISHED"}
    assert all(metarig.pose.bones[name].ewbik.target is not None for name in ("hand.L", "foot.L"))
    assert bpy.ops.ewbik.toggle_pin() == {"FINISHED"}
    assert all(metarig.pose.bones[name].ewbik.target is None for name in ("hand.L", "foot.L"))


def test_jump_goes_from_bone_to_empty_and_back(metarig):
    target = pin(metarig, "hand.L", "foot.R")["hand.L"]
    select_pose_bones(metarig, ["hand.L"])
    assert bpy.ops.ewbik.jump_to_target() == {"FINISHED"}
    assert bpy.context.view_layer.objects.active == target and target.select_get()
    assert metarig.mode == "OBJECT"
    assert bpy.ops.ewbik.jump_to_target() == {"FINISHED"}
    assert bpy.context.view_layer.objects.active == metarig and metarig.mode == "POSE"
    assert bpy.context.active_pose_bone.name == "hand.L"


def test_jump_goes_from_bone_to_its_target_bone_and_back(metarig):
    control = build_metarig(location=(2.0, 0.0, 0.0))
    make_active(metarig)
    bpy.ops.object.mode_set(mode="POSE")
    settings = metarig.pose.bones["hand.R"].ewbik
    settings.target, settings.target_bone = control, "hand.R"
    select_pose_bones(metarig, ["hand.R"])
    assert bpy.ops.ewbik.jump_to_target() == {"FINISHED"}
    assert bpy.context.object == control and control.mode == "POSE"
    assert bpy.context.active_pose_bone.name == "hand.R"
    assert bpy.ops.ewbik.jump_to_target() == {"FINISHED"}
    assert bpy.context.object == metarig and bpy.context.active_pose_bone.name == "hand.R"


def test_jump_from_an_unrelated_object_says_so(metarig):
    make_active(metarig)
    assert bpy.ops.ewbik.jump_to_target() == {"CANCELLED"}
    assert bpy.context.object == metarig
