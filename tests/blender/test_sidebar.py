"""The EWBIK sidebar tab: registration, when each panel shows, and drawing every panel."""

import bpy

from tests.support.blender_helpers import (
    addon_module,
    disable_extension,
    enable_extension,
    make_active,
    pin,
    select_pose_bones,
)
from tests.support.ui_layout import RecordingLayout, draw

PANELS = ("EWBIK_PT_solver", "EWBIK_PT_pins", "EWBIK_PT_limits", "EWBIK_PT_limits_twist")


def visible(panel_name):
    return getattr(bpy.types, panel_name).poll(bpy.context)


def test_panels_are_in_the_ewbik_tab_of_the_viewport_sidebar():
    for name in PANELS:
        panel = getattr(bpy.types, name)
        assert (panel.bl_space_type, panel.bl_region_type, panel.bl_category) == ("VIEW_3D", "UI", "EWBIK")
    assert bpy.types.EWBIK_PT_limits_twist.bl_parent_id == "EWBIK_PT_limits"


def test_nothing_shows_without_an_armature():
    bpy.ops.mesh.primitive_cube_add()
    assert not any(visible(name) for name in PANELS)


def test_object_mode_shows_only_the_solver_settings(metarig):
    make_active(metarig)
    assert [name for name in PANELS if visible(name)] == ["EWBIK_PT_solver"]


def test_pose_mode_shows_pins_and_limits_of_the_active_bone(metarig):
    make_active(metarig)
    bpy.ops.object.mode_set(mode="POSE")
    select_pose_bones(metarig, ["forearm.L"])
    assert all(visible(name) for name in PANELS)
    metarig.data.bones.active = None
    assert [name for name in PANELS if visible(name)] == ["EWBIK_PT_solver", "EWBIK_PT_pins"]


def test_solver_panel_draws_every_setting_and_the_status(metarig):
    make_active(metarig)
    metarig.ewbik.status = "12 iterations, 0.8 ms"
    log = draw("EWBIK_PT_solver")
    props = {name for kind, name in log if kind == "prop"}
    assert {
        "iterations",
        "time_budget_ms",
        "tolerance",
        "dampening",
        "stabilization_passes",
        "translate_root",
        "show_limits",
    } <= props
    assert ("label", "12 iterations, 0.8 ms") in log
    assert {
        ("operator", "ewbik.solve"),
        ("operator", "ewbik.export_scene"),
        ("operator", "ewbik.import_scene"),
    } <= set(log)
    assert draw("EWBIK_PT_solver", "draw_header_preset") == [("prop", "live")]
    texts = []

    class TextLayout(RecordingLayout):
        def prop(self, data, name, text=None, **kwargs):
            texts.append(data.bl_rna.properties[name].name if text is None else text)

    bpy.types.EWBIK_PT_solver.draw_header_preset(
        type("FakePanel", (), {"layout": TextLayout([])})(), bpy.context
    )
    assert texts == ["Live"], "the header's checkbox says what it switches"


def test_solver_panel_says_when_the_compiled_solver_is_missing(metarig, monkeypatch):
    make_active(metarig)
    sidebar = addon_module("panels.sidebar")
    assert not [entry for entry in draw("EWBIK_PT_solver") if entry == ("label", sidebar.NUMPY_LOOP_NOTE)]
    monkeypatch.setattr(addon_module("solver.native"), "_LIBRARY", None)
    assert ("label", sidebar.NUMPY_LOOP_NOTE) in draw("EWBIK_PT_solver")


def test_pins_panel_lists_pins_and_shows_the_active_one(metarig):
    make_active(metarig)
    bpy.ops.object.mode_set(mode="POSE")
    log = draw("EWBIK_PT_pins")
    assert ("list", "EWBIK_UL_pins") in log
    assert {("operator", "ewbik.pin"), ("operator", "ewbik.unpin")} <= set(log)
    assert not any(name == "falloff" for _kind, name in log), "no pin details without an active pin"

    empty = bpy.data.objects.new("target", None)
    bpy.context.collection.objects.link(empty)
    metarig.pose.bones["hand.L"].ewbik.target = empty
    metarig.ewbik.active_pin_index = metarig.pose.bones.find("hand.L")
    log = draw("EWBIK_PT_pins")
    details = {("prop", name) for name in ("target", "weight", "orientation_weights", "falloff")}
    assert details <= set(log)
    assert ("operator", "ewbik.select_pin_target") in log

    select_pose_bones(metarig, ["forearm.R"])
    assert not details & set(draw("EWBIK_PT_pins"))
    select_pose_bones(metarig, ["hand.L"])
    assert details <= set(draw("EWBIK_PT_pins")), "a freshly pinned active bone shows its pin"


class OwnerLayout(RecordingLayout):
    """Records which pose bone's settings each property is drawn from."""

    def prop(self, data, name, **kwargs):
        super().prop(data, name, **kwargs)
        self.log.append(("owner", name, data))


def owners_of(panel_name):
    """{property name: the data the panel draws it from}."""
    log = []
    fake = type("FakePanel", (), {"layout": OwnerLayout(log)})()
    getattr(bpy.types, panel_name).draw(fake, bpy.context)
    return {entry[1]: entry[2] for entry in log if entry[0] == "owner"}


def test_pin_details_follow_the_bone_selected_in_the_viewport_and_in_the_list(metarig):
    pin(metarig, "hand.R", "foot.L")
    bones = metarig.pose.bones
    metarig.ewbik.active_pin_index = bones.find("hand.R")  # a click on hand.R's row
    assert metarig.data.bones.active.name == "hand.R"
    assert owners_of("EWBIK_PT_pins")["planted"] == bones["hand.R"].ewbik

    select_pose_bones(metarig, ["foot.L"])  # then a click on foot.L in the viewport
    assert metarig.ewbik.active_pin_index == bones.find("foot.L"), "its row is highlighted"
    owners = owners_of("EWBIK_PT_pins")
    assert owners["planted"] == bones["foot.L"].ewbik
    assert ("label", "foot.L") in draw("EWBIK_PT_limits")
    owners["planted"].planted = True  # ticking Planted for the foot
    assert bones["foot.L"].ewbik.planted and not bones["hand.R"].ewbik.planted

    select_pose_bones(metarig, ["spine"])
    assert metarig.ewbik.active_pin_index not in {bones.find("hand.R"), bones.find("foot.L")}
    assert "planted" not in owners_of("EWBIK_PT_pins"), "no pin's details for an unpinned bone"


def test_a_click_on_a_pin_row_selects_that_bone_only(metarig):
    pin(metarig, "hand.R", "foot.L")
    metarig.ewbik.active_pin_index = metarig.pose.bones.find("foot.L")
    assert addon_module("ewbik_addon.com.active").selected_pose_bones(metarig) == [
        metarig.pose.bones["foot.L"]
    ]
    metarig.ewbik.active_pin_index = metarig.pose.bones.find("spine")  # not a row of the list
    assert metarig.data.bones.active.name == "foot.L"


def test_with_a_target_selected_a_click_on_a_pin_row_selects_that_pins_target(metarig):
    targets = pin(metarig, "hand.R", "foot.L")
    assert bpy.ops.ewbik.select_pin_target(bone="hand.R") == {"FINISHED"}
    assert metarig.ewbik.active_pin_index == metarig.pose.bones.find("hand.R")
    metarig.ewbik.active_pin_index = metarig.pose.bones.find("foot.L")
    assert bpy.context.view_layer.objects.active == targets["foot.L"] and targets["foot.L"].select_get()
    assert not targets["hand.R"].select_get()
    assert owners_of("EWBIK_PT_pins")["planted"] == metarig.pose.bones["foot.L"].ewbik


def test_pin_list_shows_only_pinned_bones(metarig):
    empty = bpy.data.objects.new("target", None)
    bpy.context.collection.objects.link(empty)
    for name in ("hand.L", "foot.R"):
        metarig.pose.bones[name].ewbik.target = empty
    pin_list = bpy.types.EWBIK_UL_pins
    fake = type(
        "FakeList", (), {"filter_name": "", "bitflag_filter_item": 1 << 30, "use_filter_sort_alpha": False}
    )()
    flags, order = pin_list.filter_items(fake, bpy.context, metarig.pose, "bones")
    shown = [bone.name for bone, flag in zip(metarig.pose.bones, flags) if flag]
    assert shown == ["hand.L", "foot.R"] or sorted(shown) == ["foot.R", "hand.L"]
    assert order == []

    fake.filter_name = "hand*"
    flags, _order = pin_list.filter_items(fake, bpy.context, metarig.pose, "bones")
    assert [bone.name for bone, flag in zip(metarig.pose.bones, flags) if flag] == ["hand.L"]

    log = []
    hand = metarig.pose.bones["hand.L"]
    pin_list.draw_item(fake, bpy.context, RecordingLayout(log), metarig.pose, hand, 0, None, "", 0)
    assert ("label", "hand.L") in log and ("prop", "target") in log


def test_limits_panel_draws_the_cone_list_and_the_active_cone(metarig):
    make_active(metarig)
    bpy.ops.object.mode_set(mode="POSE")
    select_pose_bones(metarig, ["forearm.L"])
    log = draw("EWBIK_PT_limits")
    assert ("list", "EWBIK_UL_cones") in log and ("menu", "EWBIK_MT_limit_presets") in log
    operators = {
        ("operator", f"ewbik.{name}") for name in ("cone_add", "cone_remove", "cone_move", "reset_limits")
    }
    assert operators <= set(log)
    assert ("prop", "direction") not in log
    assert {("prop", "stiffness"), ("prop", "comfort")} <= set(log)

    bpy.ops.ewbik.cone_add()
    log = draw("EWBIK_PT_limits")
    assert {("prop", "direction"), ("prop", "radius")} <= set(log)
    assert draw("EWBIK_PT_limits_twist", "draw_header") == [("prop", "use_twist_limit")]
    assert {("prop", "twist_min"), ("prop", "twist_max")} <= set(draw("EWBIK_PT_limits_twist"))


def test_preset_menu_offers_every_preset_for_all_and_for_selected_bones():
    log = []
    fake = type("FakeMenu", (), {"layout": RecordingLayout(log)})()
    bpy.types.EWBIK_MT_limit_presets.draw(fake, bpy.context)
    presets = addon_module("solver.presets").available_presets()
    entries = [entry for entry in log if entry[0] == "operator"]
    assert entries == [("operator", "ewbik.apply_limit_preset")] * (2 * len(presets))


def test_select_target_leaves_pose_mode_and_selects_the_empty(metarig):
    empty = bpy.data.objects.new("target", None)
    bpy.context.collection.objects.link(empty)
    metarig.pose.bones["hand.L"].ewbik.target = empty
    make_active(metarig)
    bpy.ops.object.mode_set(mode="POSE")
    assert bpy.ops.ewbik.select_pin_target(bone="hand.L") == {"FINISHED"}
    assert metarig.mode == "OBJECT"
    assert metarig.ewbik.active_pin_index == metarig.pose.bones.find("hand.L")
    assert bpy.context.view_layer.objects.active == empty and empty.select_get()
    assert not metarig.select_get()


def test_select_target_of_an_unpinned_bone_changes_nothing(metarig):
    make_active(metarig)
    bpy.ops.object.mode_set(mode="POSE")
    assert bpy.ops.ewbik.select_pin_target(bone="hand.L") == {"CANCELLED"}
    assert metarig.mode == "POSE" and bpy.context.view_layer.objects.active == metarig


def test_panels_unregister_with_the_extension():
    disable_extension()
    try:
        assert not any(hasattr(bpy.types, name) for name in PANELS)
    finally:
        enable_extension()
    assert all(hasattr(bpy.types, name) for name in PANELS)


def select_first_target(metarig, armature_mode):
    """Pin two bones, then select hand.L's target as Select Target does, leaving the armature in
    the given mode (Object Mode, or Pose Mode as with 'Lock Object Modes' off)."""
    empty = bpy.data.objects.new("metarig hand.L target", None)
    bpy.context.collection.objects.link(empty)
    other = bpy.data.objects.new("foot target", None)
    bpy.context.collection.objects.link(other)
    metarig.pose.bones["hand.L"].ewbik.target = empty
    metarig.pose.bones["foot.L"].ewbik.target = other
    make_active(metarig)
    bpy.ops.object.mode_set(mode=armature_mode)
    metarig.ewbik.active_pin_index = metarig.pose.bones.find("foot.L")
    bpy.context.view_layer.objects.active = empty
    return empty


def test_selecting_a_target_keeps_its_armatures_panels_and_its_pin(metarig):
    for armature_mode in ("OBJECT", "POSE"):
        empty = select_first_target(metarig, armature_mode)
        assert all(visible(name) for name in PANELS), armature_mode
        assert ("prop", "live") in draw("EWBIK_PT_solver", "draw_header_preset")
        shown_pin = addon_module("ewbik_addon.com.active").shown_pin
        assert shown_pin(bpy.context, metarig) == metarig.pose.bones["hand.L"]
        assert ("label", "hand.L") in draw("EWBIK_PT_limits")
        log = []
        pin_list = bpy.types.EWBIK_UL_pins
        for bone in ("hand.L", "foot.L"):
            pin_list.draw_item(
                None,
                bpy.context,
                RecordingLayout(log),
                metarig.pose,
                metarig.pose.bones[bone],
                0,
                None,
                "",
                0,
            )
        assert [entry for entry in log if entry[0] == "label"] == [("label", "hand.L"), ("label", "foot.L")]
        assert {("prop", "target_follow"), ("prop", "weight")} <= set(draw("EWBIK_PT_pins"))
        assert addon_module("ewbik_addon.com.active").active_armature(bpy.context) == metarig
        assert bpy.ops.ewbik.solve.poll(), "Solve works on the selected target's armature"
        for obj in (empty, bpy.data.objects["foot target"]):
            bpy.data.objects.remove(obj)
        make_active(metarig)


def test_the_pin_of_the_selected_target_is_highlighted(metarig):
    select_first_target(metarig, "OBJECT")
    icons = {}

    class IconLayout(RecordingLayout):
        def label(self, text="", icon="NONE", **kwargs):
            icons[text] = icon

    for bone in ("hand.L", "foot.L"):
        bpy.types.EWBIK_UL_pins.draw_item(
            None, bpy.context, IconLayout([]), metarig.pose, metarig.pose.bones[bone], 0, None, "", 0
        )
    assert icons == {"hand.L": "PINNED", "foot.L": "BONE_DATA"}


def test_an_unrelated_empty_shows_no_panels(metarig):
    empty = bpy.data.objects.new("just an empty", None)
    bpy.context.collection.objects.link(empty)
    make_active(empty)
    assert not any(visible(name) for name in PANELS)


def test_errors_in_the_status_show_an_error_icon(metarig):
    make_active(metarig)
    icons = {}

    class IconLayout(RecordingLayout):
        def label(self, text="", icon="NONE", **kwargs):
            icons[text] = icon

    metarig.ewbik.status = "bone 'x': stiffness is NaN"
    metarig.ewbik.status_is_error = True
    bpy.types.EWBIK_PT_solver.draw(type("FakePanel", (), {"layout": IconLayout([])})(), bpy.context)
    assert icons["bone 'x': stiffness is NaN"] == "ERROR"
    metarig.ewbik.status = "1 pin reached, largest distance 0 m"
    metarig.ewbik.status_is_error = False
    bpy.types.EWBIK_PT_solver.draw(type("FakePanel", (), {"layout": IconLayout([])})(), bpy.context)
    assert icons["1 pin reached, largest distance 0 m"] == "INFO"
