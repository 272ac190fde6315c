"""Stretch on the metarig: arm bones allowed to lengthen take the hand to a target beyond the
arm's reach, written as their Y scale and keyed by Bake.

Lengths are measured on the pose Blender evaluated (the heads of upper_arm.L, forearm.L and
hand.L), against the rest lengths."""

import json

import bpy
import pytest
from mathutils import Vector

from tests.support.blender_helpers import HANDS_FEET_HEAD, addon_module, bone_world, pin, settle, update

ARM = ("upper_arm.L", "forearm.L")


def joints(obj):
    bones = obj.pose.bones
    return [obj.matrix_world @ bones[b].head for b in (*ARM, "hand.L")]


def stretchy_arm(obj):
    """Hands, feet and head pinned, the bones above the left arm stiff (the arm alone reaches),
    its two bones allowed 20 % more length; returns hand.L's target and the arm's rest length."""
    for bone in obj.pose.bones["upper_arm.L"].parent_recursive:
        bone.ewbik.stiffness = 1.0
    for bone in ARM:
        obj.pose.bones[bone].ewbik.stretch = 1.2
    targets = pin(obj, *HANDS_FEET_HEAD)
    bpy.ops.object.mode_set(mode="OBJECT")
    shoulder, elbow, wrist = joints(obj)
    return targets["hand.L"], (elbow - shoulder).length + (wrist - elbow).length


def out_to(target, share, length, obj):
    """hand.L's target `share` of the arm's length out from the shoulder, straight along the arm
    as it hangs at rest."""
    shoulder, _, wrist = joints(obj)
    target.location = shoulder + share * length * (wrist - shoulder).normalized()


def miss(obj, target):
    return (bone_world(obj, "hand.L").translation - target.matrix_world.translation).length


def test_stretchy_arm_bones_take_the_hand_beyond_reach_and_their_y_scale_is_written(metarig):
    target, length = stretchy_arm(metarig)
    out_to(target, 1.1, length, metarig)
    update()
    settle()
    assert miss(metarig, target) < 1e-4
    shoulder, elbow, wrist = joints(metarig)
    assert (elbow - shoulder).length + (wrist - elbow).length > 1.09 * length
    upper, fore = (metarig.pose.bones[b].scale for b in ARM)
    assert abs(upper[1] - 1.1) < 1e-3 and abs(fore[1] - 1.0) < 1e-3  # the forearm inherits the stretch
    out_to(target, 0.9, length, metarig)
    update()
    settle()
    assert miss(metarig, target) < 1e-4
    unstretched = [abs(metarig.pose.bones[b].scale[1] - 1.0) < 1e-6 for b in ARM]
    assert all(unstretched)  # back within reach


def test_past_the_maximum_the_hand_stops_short_by_the_rest(metarig):
    target, length = stretchy_arm(metarig)
    out_to(target, 1.3, length, metarig)
    update()
    settle()
    assert abs(metarig.pose.bones[ARM[0]].scale[1] - 1.2) < 1e-3
    assert abs(miss(metarig, target) - 0.1 * length) < 2e-3 * length


def test_bake_keys_the_stretch(metarig):
    target, length = stretchy_arm(metarig)
    out_to(target, 0.9, length, metarig)
    target.keyframe_insert("location", frame=1)
    out_to(target, 1.15, length, metarig)
    target.keyframe_insert("location", frame=5)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 5
    assert bpy.ops.ewbik.bake() == {"FINISHED"}
    curves = addon_module("ewbik_addon.bake.fcurve_keys").action_fcurves(metarig.animation_data)
    path = metarig.pose.bones[ARM[0]].path_from_id("scale")
    keyed = {curve.array_index: curve for curve in curves if curve.data_path == path}
    assert set(keyed) == {1}
    assert abs(keyed[1].evaluate(1) - 1.0) < 1e-6 and abs(keyed[1].evaluate(5) - 1.15) < 1e-3
    metarig.ewbik.live = False
    scene.frame_set(5)
    assert miss(metarig, target) < 1e-4  # the keys play the stretched arm back
    assert Vector(metarig.pose.bones[ARM[0]].scale)[1] > 1.1


def test_the_stretch_travels_through_export_and_import(metarig, tmp_path):
    stretchy_arm(metarig)
    path = tmp_path / "stretchy.json"
    bpy.context.view_layer.objects.active = metarig
    assert bpy.ops.ewbik.export_scene(filepath=str(path)) == {"FINISHED"}
    document = json.loads(path.read_text(encoding="utf-8"))
    stretch = {bone["name"]: bone.get("stretch") for bone in document["bones"]}
    assert stretch["upper_arm.L"] == stretch["forearm.L"] == pytest.approx(1.2) and stretch["hand.L"] is None
    for bone in ARM:
        metarig.pose.bones[bone].ewbik.stretch = 1.0
    assert bpy.ops.ewbik.import_scene(filepath=str(path)) == {"FINISHED"}
    assert [metarig.pose.bones[b].ewbik.stretch for b in ARM] == pytest.approx([1.2, 1.2])
