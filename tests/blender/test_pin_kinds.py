"""Pin kinds on the Rigify metarig: position only, rotation only, both, and planted pins that win."""

import math

import bpy
from mathutils import Euler, Vector

from tests.support.blender_helpers import addon_module, bone_world, build_metarig, pin, update

HANDS_FEET = ("hand.L", "hand.R", "foot.L", "foot.R")


def solve_fully_on_update(obj):
    obj.ewbik.time_budget_ms = 0.0
    obj.ewbik.iterations = 200


def position_error(obj, bone):
    target = obj.pose.bones[bone].ewbik.target
    return (bone_world(obj, bone).translation - target.matrix_world.translation).length


def orientation_error_deg(obj, bone):
    target = obj.pose.bones[bone].ewbik.target
    have = bone_world(obj, bone).to_quaternion()
    want = target.matrix_world.to_quaternion()
    return math.degrees(have.rotation_difference(want).angle)


def turned_and_moved_hand(metarig, kind):
    """Pin hand.L of that kind and both feet; move the hand's target 15 cm and turn it 60 degrees."""
    solve_fully_on_update(metarig)
    targets = pin(metarig, "hand.L", "foot.L", "foot.R")
    metarig.pose.bones["hand.L"].ewbik.pin_kind = kind
    bpy.ops.object.mode_set(mode="OBJECT")
    start = bone_world(metarig, "hand.L").translation.copy()
    targets["hand.L"].location += Vector((0.05, -0.1, 0.1))
    targets["hand.L"].rotation_euler.rotate(Euler((math.radians(60.0), 0.0, 0.0)))
    update()
    return start


def test_both_reaches_place_and_turn(metarig):
    turned_and_moved_hand(metarig, "BOTH")
    assert position_error(metarig, "hand.L") < 1e-3
    assert orientation_error_deg(metarig, "hand.L") < 0.5


def test_position_only_reaches_the_place_and_leaves_the_turn(metarig):
    turned_and_moved_hand(metarig, "POSITION")
    assert position_error(metarig, "hand.L") < 1e-3
    assert orientation_error_deg(metarig, "hand.L") > 30.0


def test_rotation_only_turns_the_hand_where_the_body_holds_it(metarig):
    start = turned_and_moved_hand(metarig, "ROTATION")
    assert orientation_error_deg(metarig, "hand.L") < 0.5
    assert (bone_world(metarig, "hand.L").translation - start).length < 1e-3
    assert position_error(metarig, "hand.L") > 0.14  # the target moved 15 cm away


def test_pin_kind_is_animatable(metarig):
    turned_and_moved_hand(metarig, "BOTH")
    settings = metarig.pose.bones["hand.L"].ewbik
    path = 'pose.bones["hand.L"].ewbik.pin_kind'
    settings.pin_kind = "POSITION"
    metarig.keyframe_insert(path, frame=1)
    settings.pin_kind = "BOTH"
    metarig.keyframe_insert(path, frame=10)
    scene_export = addon_module("ewbik_addon.scene_export")
    for frame, kind, axis_weights in ((1, "POSITION", [0.0] * 3), (10, "BOTH", [1.0] * 3)):
        bpy.context.scene.frame_set(frame)
        assert settings.pin_kind == kind
        pins = {pin["bone"]: pin for pin in scene_export.scene_document(metarig)["pins"]}
        assert pins["hand.L"]["orientation_weights"] == axis_weights
    assert orientation_error_deg(metarig, "hand.L") < 0.5


def foot_slip_when_hand_is_dragged_far(metarig, planted):
    """Hands and feet pinned, the hips free to move; hand.L dragged 2 m behind. Returns foot.L's slip."""
    solve_fully_on_update(metarig)
    metarig.ewbik.translate_root = True
    targets = pin(metarig, *HANDS_FEET)
    for foot in ("foot.L", "foot.R"):
        metarig.pose.bones[foot].ewbik.planted = planted
    bpy.ops.object.mode_set(mode="OBJECT")
    targets["hand.L"].location += Vector((0.0, -2.0, 0.5))
    update()
    return max(position_error(metarig, foot) for foot in ("foot.L", "foot.R"))


def test_planted_feet_hold_while_ordinary_feet_give(metarig):
    ordinary = foot_slip_when_hand_is_dragged_far(metarig, planted=False)
    bpy.ops.wm.read_homefile(use_empty=True)
    planted = foot_slip_when_hand_is_dragged_far(build_metarig(), planted=True)
    print(f"foot slip: ordinary {ordinary * 1e3:.1f} mm, planted {planted * 1e3:.2f} mm")
    assert ordinary > 0.05
    assert planted < 5e-3


def test_planted_feet_still_let_a_reachable_hand_arrive(metarig):
    solve_fully_on_update(metarig)
    metarig.ewbik.translate_root = True
    targets = pin(metarig, *HANDS_FEET)
    for foot in ("foot.L", "foot.R"):
        metarig.pose.bones[foot].ewbik.planted = True
    bpy.ops.object.mode_set(mode="OBJECT")
    targets["hand.L"].location += Vector((0.05, -0.1, 0.1))
    update()
    assert max(position_error(metarig, bone) for bone in HANDS_FEET) < 1e-3
