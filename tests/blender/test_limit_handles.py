"""The limit handles driven through their own functions: where they sit, what a drag writes
(centre, radius, twist; Ctrl snapping), the header, cancel, the undo step, and adding/removing
cones at a clicked direction; flex/abduct in the sidebar as views of a cone's direction, from the
rest in the body's terms."""

import math

import bpy
import pytest
from mathutils import Quaternion, Vector

from tests.support.blender_helpers import (
    addon_module,
    disable_extension,
    enable_extension,
    make_active,
    select_pose_bones,
)
from tests.support.keymaps import default_pose_mode_bindings
from tests.support.limit_rigs import Y, pose_rotation, rest_under_parent, set_cones
from tests.support.ui_layout import draw

BONE = "forearm.L"


@pytest.fixture
def gizmos():
    return addon_module("ewbik_addon.viewport.limit_gizmos")


@pytest.fixture
def rig(metarig):
    """The metarig moved and turned, in pose mode, with the upper arm posed and two cones on the forearm."""
    metarig.location = (0.5, 1.0, -0.2)
    metarig.rotation_euler = (0.1, 0.3, -0.4)
    make_active(metarig)
    bpy.ops.object.mode_set(mode="POSE")
    pose_rotation(metarig.pose.bones["upper_arm.L"], Quaternion((0.3, 0.0, 1.0), math.radians(40.0)))
    set_cones(
        metarig.pose.bones[BONE],
        ((0.0, 1.0, 0.0), math.radians(30.0)),
        ((0.0, 0.5, 1.0), math.radians(20.0)),
        twist=(math.radians(-20.0), math.radians(40.0)),
    )
    select_pose_bones(metarig, [BONE])
    return metarig


def ray_at(frame, local_point, back=3.0, sideways=(0.2, 0.1, 0.0)):
    """A view ray from a camera somewhere outside, through a point given in the limit frame."""
    target = frame @ Vector(local_point)
    origin = target + (frame.to_3x3() @ (Vector(local_point).normalized() + Vector(sideways))) * back
    return origin, target - origin


def test_handles_sit_on_the_cone_centres_rims_and_the_twist_dial(gizmos, rig):
    pose_bone = rig.pose.bones[BONE]
    frame = rest_under_parent(rig, pose_bone)
    length = pose_bone.length
    handles = gizmos.handle_points(rig, pose_bone)
    assert [(kind, index) for kind, index, _point in handles] == [
        ("centre", 0),
        ("radius", 0),
        ("centre", 1),
        ("radius", 1),
        ("twist_min", -1),
        ("twist_max", -1),
    ]
    local = {(kind, index): frame.inverted() @ point for kind, index, point in handles}
    for index, cone in enumerate(pose_bone.bone.ewbik.cones):
        axis = Vector(cone.direction).normalized()
        assert (local["centre", index] - axis * length).length < 1e-5
        assert local["radius", index].length == pytest.approx(length, rel=1e-5)
        assert local["radius", index].angle(axis) == pytest.approx(cone.radius, abs=1e-5)
    for kind, twist in (("twist_min", -20.0), ("twist_max", 40.0)):
        pose_rotation(pose_bone, Quaternion(Y, math.radians(twist)))
        x_axis = (rig.matrix_world @ pose_bone.matrix).to_3x3().col[0]
        centre = addon_module("ewbik_addon.com.limit_settings").kusudama_of(pose_bone.bone.ewbik).centre
        swung = (
            frame.to_3x3() @ Y.rotation_difference(Vector(centre)).to_matrix() @ frame.to_3x3().inverted()
        ) @ x_axis
        assert (frame.to_3x3() @ local[kind, -1]).angle(swung) < 1e-4


def test_dragging_a_centre_follows_the_ray_and_cancel_restores(gizmos, rig):
    pose_bone = rig.pose.bones[BONE]
    before = [(tuple(c.direction), c.radius) for c in pose_bone.bone.ewbik.cones]
    frame = rest_under_parent(rig, pose_bone)
    edit = gizmos.LimitEdit(rig, BONE, "centre", 1)
    assert pose_bone.bone.ewbik.active_cone_index == 1
    wanted = Vector((0.6, 0.7, -0.2)).normalized()
    edit.drag_ray(*ray_at(frame, wanted * pose_bone.length))
    assert tuple(pose_bone.bone.ewbik.cones[1].direction) == pytest.approx(tuple(wanted), abs=1e-5)
    assert "Cone 2 centre" in edit.header() and "flex" in edit.header()
    edit.drag_ray(*ray_at(frame, wanted * pose_bone.length * 0.5))
    assert tuple(pose_bone.bone.ewbik.cones[1].direction) != pytest.approx(tuple(wanted), abs=1e-3)
    pose_bone.bone.ewbik.active_cone_index = 0
    edit.cancel()
    assert [(tuple(c.direction), c.radius) for c in pose_bone.bone.ewbik.cones] == before
    assert pose_bone.bone.ewbik.active_cone_index == 0
    assert pose_bone.bone.ewbik.use_twist_limit and pose_bone.bone.ewbik.twist_max == pytest.approx(
        math.radians(40.0)
    )


def test_ctrl_snaps_the_centre_to_5_degree_flex_and_abduct(gizmos, rig):
    body_angles = addon_module("ewbik_addon.limits.body_angles")
    pose_bone = rig.pose.bones[BONE]
    edit = gizmos.LimitEdit(rig, BONE, "centre", 0)
    edit.set_direction(Vector((0.31, 0.8, 0.17)), snap=True)
    flex, abduct = body_angles.flex_abduct(pose_bone.bone, pose_bone.bone.ewbik.cones[0].direction)
    for angle in (flex, abduct):
        steps = math.degrees(angle) / 5.0
        assert steps == pytest.approx(round(steps), abs=1e-3)
    assert Vector(pose_bone.bone.ewbik.cones[0].direction).angle(Vector((0.31, 0.8, 0.17))) < math.radians(
        5.0
    )


def test_dragging_the_rim_sets_the_radius(gizmos, rig):
    pose_bone = rig.pose.bones[BONE]
    frame = rest_under_parent(rig, pose_bone)
    axis = Vector(pose_bone.bone.ewbik.cones[0].direction)
    rim = Quaternion(axis.orthogonal(), math.radians(52.3)) @ axis
    edit = gizmos.LimitEdit(rig, BONE, "radius", 0)
    edit.drag_ray(*ray_at(frame, rim * pose_bone.length))
    assert math.degrees(pose_bone.bone.ewbik.cones[0].radius) == pytest.approx(52.3, abs=1e-3)
    edit.drag_ray(*ray_at(frame, rim * pose_bone.length), snap=True)
    assert math.degrees(pose_bone.bone.ewbik.cones[0].radius) == pytest.approx(50.0, abs=1e-4)
    assert edit.header().startswith("Cone 1 radius: 50.0")


def test_dragging_the_twist_dial_sets_the_range_end_where_the_x_axis_would_point(gizmos, rig):
    pose_bone = rig.pose.bones[BONE]
    centre = addon_module("ewbik_addon.com.limit_settings").kusudama_of(pose_bone.bone.ewbik).centre
    frame = rest_under_parent(rig, pose_bone)
    swing = Y.rotation_difference(Vector(centre))
    edit = gizmos.LimitEdit(rig, BONE, "twist_max", -1)
    for degrees in (63.0, 120.0, -10.0):
        pose_rotation(pose_bone, swing @ Quaternion(Y, math.radians(degrees)))
        x_axis = frame.inverted().to_3x3() @ (rig.matrix_world @ pose_bone.matrix).to_3x3().col[0]
        on_dial = x_axis * 0.3 * pose_bone.length
        origin = frame @ (on_dial + Vector(centre) * 2.0)
        edit.drag_ray(origin, frame @ on_dial - origin)
        assert math.degrees(pose_bone.bone.ewbik.twist_max) == pytest.approx(max(degrees, -20.0), abs=1e-3)
    edit.set_twist(math.radians(33.0), snap=True)
    assert math.degrees(pose_bone.bone.ewbik.twist_max) == pytest.approx(35.0, abs=1e-4)
    assert edit.header().startswith("Twist max: 35.0")
    low = gizmos.LimitEdit(rig, BONE, "twist_min", -1)
    low.set_twist(math.radians(80.0))
    assert pose_bone.bone.ewbik.twist_min == pytest.approx(pose_bone.bone.ewbik.twist_max)


def test_a_finished_drag_is_one_undo_step(gizmos, rig):
    name = rig.name
    bpy.ops.ed.undo_push(message="before")
    edit = gizmos.LimitEdit(rig, BONE, "radius", 0)
    for degrees in (35.0, 40.0, 45.0):
        edit.set_direction(Quaternion(Vector((1.0, 0.0, 0.0)), math.radians(degrees)) @ Y)
    edit.commit()
    assert math.degrees(rig.pose.bones[BONE].bone.ewbik.cones[0].radius) == pytest.approx(45.0, abs=1e-3)
    bpy.ops.ed.undo()
    assert math.degrees(bpy.data.objects[name].pose.bones[BONE].bone.ewbik.cones[0].radius) == pytest.approx(
        30.0, abs=1e-3
    )
    bpy.ops.ed.redo()
    assert math.degrees(bpy.data.objects[name].pose.bones[BONE].bone.ewbik.cones[0].radius) == pytest.approx(
        45.0, abs=1e-3
    )


def test_cone_at_cursor_adds_where_the_chain_is_shortest_and_removes_the_nearest(rig):
    settings = rig.pose.bones[BONE].bone.ewbik
    between = (Vector((0.0, 1.0, 0.0)) + Vector((0.0, 0.5, 1.0)).normalized()).normalized()
    assert bpy.ops.ewbik.cone_at_cursor(direction=between) == {"FINISHED"}
    assert len(settings.cones) == 3 and settings.active_cone_index == 1
    assert tuple(settings.cones[1].direction) == pytest.approx(tuple(between), abs=1e-6)
    assert bpy.ops.ewbik.cone_at_cursor(direction=(0.0, -0.2, 1.0)) == {"FINISHED"}
    assert settings.active_cone_index == 3
    assert bpy.ops.ewbik.cone_at_cursor(direction=(0.05, 1.0, 0.0), remove=True) == {"FINISHED"}
    assert len(settings.cones) == 3
    assert tuple(settings.cones[0].direction) == pytest.approx(tuple(between), abs=1e-6)


def new_cone_at_rest(obj, bone):
    """Pose Mode, the bone selected and at rest, + in the cone list: a cone along the rest direction."""
    make_active(obj)
    bpy.ops.object.mode_set(mode="POSE")
    select_pose_bones(obj, [bone])
    assert bpy.ops.ewbik.cone_add() == {"FINISHED"}
    return obj.pose.bones[bone].bone.ewbik.cones[-1]


def in_armature(obj, bone, direction):
    return (obj.data.bones[bone].matrix_local.to_3x3() @ Vector(direction)).normalized()


@pytest.mark.parametrize("bone", ["upper_arm.L", "thigh.R", "forearm.L", "spine.003", "foot.L"])
def test_a_cone_at_rest_reads_0_0_and_typed_flex_swings_it_that_far(metarig, bone):
    cone = new_cone_at_rest(metarig, bone)
    assert (cone.flex, cone.abduct) == (0.0, 0.0)
    cone.flex = math.radians(30.0)  # typed in the Flex field
    assert math.degrees(Vector(cone.direction).angle(Y)) == pytest.approx(30.0, abs=1e-3)
    assert math.degrees(cone.flex) == pytest.approx(30.0, abs=1e-3)
    assert math.degrees(cone.abduct) == pytest.approx(0.0, abs=1e-3)
    cone.abduct = math.radians(-15.0)
    assert math.degrees(cone.flex) == pytest.approx(30.0, abs=1e-3)
    assert math.degrees(cone.abduct) == pytest.approx(-15.0, abs=1e-3)


FORWARD, UP = Vector((0.0, -1.0, 0.0)), Vector((0.0, 0.0, 1.0))  # Blender's front view looks along +Y


@pytest.mark.parametrize(
    "bone, out",
    [
        ("thigh.L", Vector((1.0, 0.0, 0.0))),
        ("thigh.R", Vector((-1.0, 0.0, 0.0))),
        ("shin.L", Vector((1.0, 0.0, 0.0))),
        ("upper_arm.L", UP),  # the arm already points out: abducting it raises it
        ("upper_arm.R", UP),
    ],
)
def test_flex_brings_the_bone_forward_and_abduct_brings_it_out(metarig, bone, out):
    metarig.rotation_euler = (0.0, 0.0, 0.7)  # the object turned: the body's terms turn with it
    cone = new_cone_at_rest(metarig, bone)
    rest = in_armature(metarig, bone, Y)
    cone.flex = math.radians(30.0)
    moved = in_armature(metarig, bone, cone.direction) - rest
    assert moved.dot(FORWARD) > 0.45 and abs(moved.dot(out)) < 0.05
    cone.flex, cone.abduct = 0.0, math.radians(30.0)
    moved = in_armature(metarig, bone, cone.direction) - rest
    assert moved.dot(out) > 0.25 and abs(moved.dot(FORWARD)) < 0.05


class FakeArea:
    def __init__(self):
        self.header = "unset"

    def header_text_set(self, text):
        self.header = text


@pytest.mark.parametrize("cancel", [True, False])
def test_gizmo_handlers_drag_show_the_value_and_cancel_or_keep(gizmos, rig, monkeypatch, cancel):
    pose_bone = rig.pose.bones[BONE]
    frame = rest_under_parent(rig, pose_bone)
    axis = Vector(pose_bone.bone.ewbik.cones[0].direction)
    rim = Quaternion(axis.orthogonal(), math.radians(47.0)) @ axis
    monkeypatch.setattr(gizmos, "view_ray", lambda context, event: ray_at(frame, rim * pose_bone.length))
    area = FakeArea()
    context = type("Context", (), {"area": area, "active_object": rig, "active_pose_bone": pose_bone})()
    handle = type("Handle", (), {"kind": "radius", "cone_index": 0, "edit": None})()
    cls = gizmos.EWBIK_GT_limit_handle

    assert cls.invoke(handle, context, None) == {"RUNNING_MODAL"}
    assert area.header.startswith("Cone 1 radius: 30.0")
    assert cls.modal(handle, context, type("Event", (), {"ctrl": True})(), set()) == {"RUNNING_MODAL"}
    assert area.header.startswith("Cone 1 radius: 45.0")
    cls.modal(handle, context, type("Event", (), {"ctrl": False})(), set())
    assert math.degrees(pose_bone.bone.ewbik.cones[0].radius) == pytest.approx(47.0, abs=1e-3)
    cls.exit(handle, context, cancel)
    assert area.header is None and handle.edit is None
    assert math.degrees(pose_bone.bone.ewbik.cones[0].radius) == pytest.approx(
        30.0 if cancel else 47.0, abs=1e-3
    )


def test_limits_panel_shows_body_angles_sharing_viewport_options_and_bones_at_limits(rig):
    log = set(draw("EWBIK_PT_limits"))
    assert {
        ("prop", "flex"),
        ("prop", "abduct"),
        ("prop", "limits_scope"),
        ("prop", "limits_see_through"),
    } <= log
    assert {("operator", "ewbik.mirror_limits"), ("operator", "ewbik.copy_limits")} <= log
    assert not any(kind == "label" and "at limits" in text for kind, text in log)
    pose_rotation(rig.pose.bones[BONE], Quaternion((0.0, 0.0, 1.0), math.radians(30.0)))
    pose_rotation(rig.pose.bones["shin.L"], Quaternion())
    set_cones(rig.pose.bones["shin.L"], ((0.0, 0.0, 1.0), math.radians(10.0)))
    bpy.context.view_layer.update()
    assert ("label", "1 bone at limits, 1 beyond") in set(draw("EWBIK_PT_limits"))


def test_a_click_beside_the_sphere_is_no_direction_but_a_drag_keeps_to_the_rim(gizmos, rig):
    pose_bone = rig.pose.bones[BONE]
    frame = rest_under_parent(rig, pose_bone)
    length = pose_bone.length
    origin = frame @ Vector((1.5 * length, 0.0, 3.0 * length))
    vector = frame.to_3x3() @ Vector((0.0, 0.0, -1.0))
    assert gizmos.sphere_direction(frame, length, origin, vector, beside=False) is None
    assert tuple(gizmos.sphere_direction(frame, length, origin, vector)) == pytest.approx(
        (1.0, 0.0, 0.0), abs=1e-6
    )
    inside = frame @ Vector((0.6 * length, 0.0, 3.0 * length))
    hit = gizmos.sphere_direction(frame, length, inside, vector, beside=False)
    assert tuple(hit) == pytest.approx((0.6, 0.0, 0.8), abs=1e-6)


class FakeGizmos(list):
    """Stands in for GizmoGroup.gizmos (headless Blender never sets up a gizmo group)."""

    def new(self, idname):
        assert idname == "EWBIK_GT_limit_handle"
        self.append(type("Gizmo", (), {})())
        return self[-1]


def test_gizmo_group_keeps_one_gizmo_per_handle_on_its_point(gizmos, rig):
    pose_bone = rig.pose.bones[BONE]
    group = type("Group", (), {"gizmos": FakeGizmos()})()
    group._sync = gizmos.EWBIK_GGT_limit_handles._sync.__get__(group)
    context = type("Context", (), {"active_object": rig, "active_pose_bone": pose_bone})()
    gizmos.EWBIK_GGT_limit_handles.draw_prepare(group, context)
    first = list(group.gizmos)
    handles = gizmos.handle_points(rig, pose_bone)
    assert [(g.kind, g.cone_index) for g in group.gizmos] == [(kind, index) for kind, index, _p in handles]
    for gizmo, (_kind, _index, point) in zip(group.gizmos, handles):
        assert (gizmo.matrix_basis.to_translation() - point).length < 1e-6
    bpy.ops.ewbik.cone_at_cursor(direction=(1.0, 0.2, 0.0))
    gizmos.EWBIK_GGT_limit_handles.draw_prepare(group, context)
    assert len(group.gizmos) == len(handles) + 2 and group.gizmos[: len(first)] == first
    pose_bone.bone.ewbik.use_twist_limit = False
    gizmos.EWBIK_GGT_limit_handles.draw_prepare(group, context)
    assert [g.kind for g in group.gizmos].count("centre") == 3 and len(group.gizmos) == 6
    pose_bone.bone.ewbik.cones.clear()
    assert not gizmos.EWBIK_GGT_limit_handles.poll(context)


def test_ctrl_click_keys_are_free_in_pose_mode_and_go_away_on_disable():
    keymaps = addon_module("ewbik_addon.ui.keymaps")
    bindings = default_pose_mode_bindings()
    keymap = bpy.context.window_manager.keyconfigs.addon.keymaps[keymaps.VIEW_3D[0]]
    ours = [item for item in keymap.keymap_items if item.idname == "ewbik.cone_at_cursor"]
    assert sorted(
        (item.type, item.value, item.ctrl, item.shift, item.properties.remove) for item in ours
    ) == [("LEFTMOUSE", "CLICK", True, False, False), ("LEFTMOUSE", "CLICK", True, True, True)]
    assert not {("LEFTMOUSE", item.shift, item.ctrl, item.alt) for item in ours} & bindings
    disable_extension()
    try:
        assert not [item for item in keymap.keymap_items if item.idname == "ewbik.cone_at_cursor"]
    finally:
        enable_extension()
