"""Pin kinds on the Rigify metarig: position only, rotation only, both, and planted pins that win."""

import math

import bpy
import pytest
from mathutils import Euler, Vector

from tests.support.blender_helpers import (
    addon_module,
    bone_world,
    build_metarig,
    pin,
    solve_fully_on_update,
    update,
)

HANDS_FEET = ("hand.L", "hand.R", "foot.L", "foot.R")


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
    scene_export = addon_module("ewbik_addon.documents.scene_export")
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


def test_a_hand_out_of_reach_slides_no_foot_planted_or_not(metarig):
    """The hand gives way to the feet, planted or not, and the status says so."""
    ordinary = foot_slip_when_hand_is_dragged_far(metarig, planted=False)
    assert "hand.L" in metarig.ewbik.status and "out of reach" in metarig.ewbik.status
    bpy.ops.wm.read_homefile(use_empty=True)
    planted = foot_slip_when_hand_is_dragged_far(build_metarig(), planted=True)
    assert ordinary < 1e-3 and planted < 1e-3


@pytest.mark.parametrize("raise_left", ["priority", "planted"])
def test_the_higher_priority_holds_where_two_hands_pull_apart(metarig, raise_left):
    """Each hand alone can be reached by leaning the spine its way, not both: of two equal pins the
    one farther off gives way; a higher Priority (or Planted, which counts one higher) holds."""
    solve_fully_on_update(metarig)
    metarig.ewbik.auto_limits = False
    targets = pin(metarig, "hand.L", "hand.R")
    bpy.ops.object.mode_set(mode="OBJECT")
    targets["hand.L"].location += Vector((0.45, 0.0, 0.0))
    targets["hand.R"].location += Vector((-0.4, 0.0, 0.0))
    update()
    assert position_error(metarig, "hand.R") < 1e-3 < position_error(metarig, "hand.L")
    left = metarig.pose.bones["hand.L"].ewbik
    if raise_left == "priority":
        left.priority = 2.0
    else:
        left.planted = True
    update()
    assert position_error(metarig, "hand.L") < 1e-3 < position_error(metarig, "hand.R")


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
