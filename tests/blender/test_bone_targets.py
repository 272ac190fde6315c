"""Bones as pin targets on the Rigify metarig: another rig's bone, or a control bone of the same rig."""

import math

import bpy
import pytest
from mathutils import Quaternion

from tests.support.blender_helpers import (
    build_metarig,
    make_active,
    select_pose_bones,
    solve_fully_on_update,
    update,
)
from tests.support.ui_layout import RecordingLayout

CONTROL = "hand_control.L"


def world(obj, bone):
    return obj.matrix_world @ obj.pose.bones[bone].matrix


def misfit(a, b):
    """(distance, angle in degrees) between two world matrices."""
    distance = (a.translation - b.translation).length
    return distance, math.degrees(a.to_quaternion().rotation_difference(b.to_quaternion()).angle)


def add_control_bone(obj):
    """A parentless bone with hand.L's rest (head, tail, roll): a control the animator poses."""
    make_active(obj)
    bpy.ops.object.mode_set(mode="EDIT")
    hand = obj.data.edit_bones["hand.L"]
    control = obj.data.edit_bones.new(CONTROL)
    control.head, control.tail, control.roll = hand.head, hand.tail, hand.roll
    bpy.ops.object.mode_set(mode="POSE")
    return obj.pose.bones[CONTROL]


def test_a_bone_follows_another_rigs_bone(metarig):
    solve_fully_on_update(metarig)
    driver = build_metarig()
    driver.ewbik.live = False
    make_active(metarig)
    bpy.ops.object.mode_set(mode="POSE")
    for name in ("hand.L", "foot.L", "foot.R"):
        settings = metarig.pose.bones[name].ewbik
        settings.target, settings.target_bone = driver, name
    update()
    driver.pose.bones["upper_arm.L"].rotation_quaternion = Quaternion((0.0, 1.0, 0.0), 0.6)
    driver.pose.bones["forearm.L"].rotation_quaternion = Quaternion((1.0, 0.0, 0.0), 0.5)
    before = world(metarig, "hand.L")
    update()
    distance, angle = misfit(world(metarig, "hand.L"), world(driver, "hand.L"))
    assert distance < 1e-3 and angle < 0.5
    assert (world(metarig, "hand.L").translation - before.translation).length > 0.05
    assert "reached" in metarig.ewbik.status


def test_pin_to_active_bone_follows_a_control_bone_in_pose_mode(metarig):
    solve_fully_on_update(metarig)
    control = add_control_bone(metarig)
    select_pose_bones(metarig, ["hand.L", CONTROL])
    assert bpy.ops.ewbik.pin_to_active_bone() == {"FINISHED"}
    settings = metarig.pose.bones["hand.L"].ewbik
    assert (settings.target, settings.target_bone) == (metarig, CONTROL)
    control.location = (0.05, 0.1, -0.08)
    control.rotation_quaternion = Quaternion((0.0, 0.0, 1.0), 0.4)
    update()
    assert metarig.mode == "POSE"
    distance, angle = misfit(world(metarig, "hand.L"), world(metarig, CONTROL))
    assert distance < 1e-3 and angle < 0.5


def test_pinning_a_bone_to_its_own_child_is_refused(metarig):
    make_active(metarig)
    bpy.ops.object.mode_set(mode="POSE")
    select_pose_bones(metarig, ["hand.L", "f_index.01.L"])
    with pytest.raises(RuntimeError, match="target bone 'f_index.01.L' follows the pinned bone"):
        bpy.ops.ewbik.pin_to_active_bone()
    assert metarig.pose.bones["hand.L"].ewbik.target is None


@pytest.mark.parametrize(
    ("target_bone", "message"),
    [
        ("hand.L", "target bone 'hand.L' is the pinned bone itself"),
        ("f_index.02.L", "target bone 'f_index.02.L' follows the pinned bone"),
        ("forearm.L", "target bone 'forearm.L' is moved by the solver (feedback loop)"),
        ("", "target 'metarig' is an armature: choose its Target Bone"),
        ("no such bone", "it has no bone 'no such bone'"),
    ],
)
def test_cycles_and_missing_bones_are_reported_and_the_pose_kept(metarig, target_bone, message):
    make_active(metarig)
    bpy.ops.object.mode_set(mode="POSE")
    update()
    settings = metarig.pose.bones["hand.L"].ewbik
    settings.target, settings.target_bone = metarig, target_bone
    before = world(metarig, "hand.L")
    update()
    assert message in metarig.ewbik.status
    assert misfit(world(metarig, "hand.L"), before) == (0.0, 0.0)


def test_unpinning_keeps_the_target_armature(metarig):
    driver = build_metarig(location=(2.0, 0.0, 0.0))
    make_active(metarig)
    bpy.ops.object.mode_set(mode="POSE")
    settings = metarig.pose.bones["hand.L"].ewbik
    settings.target, settings.target_bone = driver, "hand.L"
    select_pose_bones(metarig, ["hand.L"])
    assert bpy.ops.ewbik.unpin() == {"FINISHED"}
    assert settings.target is None
    assert bpy.data.objects.get(driver.name) == driver


def test_importing_a_scene_never_moves_the_rig_a_pin_follows(metarig, tmp_path):
    driver = build_metarig(location=(2.0, 0.0, 0.0))
    make_active(metarig)
    bpy.ops.object.mode_set(mode="POSE")
    settings = metarig.pose.bones["hand.L"].ewbik
    settings.target, settings.target_bone = driver, "hand.L"
    update()
    path = str(tmp_path / "scene.json")
    assert bpy.ops.ewbik.export_scene(filepath=path) == {"FINISHED"}
    placed = driver.matrix_world.copy()
    assert bpy.ops.ewbik.import_scene(filepath=path) == {"FINISHED"}
    assert driver.matrix_world == placed
    assert settings.target.type == "EMPTY"
    distance, _ = misfit(settings.target.matrix_world, world(driver, "hand.L"))
    assert distance < 1e-5  # the new empty sits where the followed bone was


def test_the_pins_panel_shows_kind_planted_and_the_target_bone(metarig):
    driver = build_metarig(location=(2.0, 0.0, 0.0))
    make_active(metarig)
    bpy.ops.object.mode_set(mode="POSE")
    settings = metarig.pose.bones["hand.L"].ewbik
    settings.target = bpy.data.objects.new("plain empty", None)
    select_pose_bones(metarig, ["hand.L"])
    log = []
    bpy.types.EWBIK_PT_pins.draw(type("FakePanel", (), {"layout": RecordingLayout(log)})(), bpy.context)
    assert {("prop", "pin_kind"), ("prop", "planted"), ("operator", "ewbik.jump_to_target")} <= set(log)
    assert ("search", "target_bone") not in log
    settings.target, settings.target_bone = driver, "hand.L"
    log.clear()
    bpy.types.EWBIK_PT_pins.draw(type("FakePanel", (), {"layout": RecordingLayout(log)})(), bpy.context)
    assert ("search", "target_bone") in log
