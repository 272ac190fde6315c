"""A bake keys the armatures it bakes and nothing else, or (refused, failed, its armature deleted
midway) leaves every armature, action and frame as it was."""

import bpy
import numpy as np
import pytest
from mathutils import Quaternion, Vector

from tests.support.blender_helpers import addon_module, build_metarig, fcurve_keys, make_active, pin
from tests.support.modal_bake import RunningBake


def keys_of(obj):
    """Every key of every F-curve the armature's slot (or action) holds."""
    fcurves = fcurve_keys().action_fcurves(obj.animation_data) or ()
    return {(f.data_path, f.array_index): [tuple(k.co) for k in f.keyframe_points] for f in fcurves}


def pose_of(obj):
    bpy.context.view_layer.update()
    channels = addon_module("ewbik_addon.com.pose_channels").read_pose_channels(obj.pose.bones)
    return {name: values.copy() for name, values in channels.items()}


def assert_same_pose(obj, before):
    for name, values in pose_of(obj).items():
        np.testing.assert_allclose(values, before[name], atol=1e-6, err_msg=name)


def with_keyed_hand_target(obj, offset):
    """obj with hand.L pinned to a target keyed on frames 1 and 10."""
    target = pin(obj, "hand.L")["hand.L"]
    target.keyframe_insert("location", frame=1)
    target.location += Vector(offset)
    target.keyframe_insert("location", frame=10)
    bpy.ops.object.mode_set(mode="OBJECT")
    return obj


@pytest.fixture
def rig(metarig):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 10
    with_keyed_hand_target(metarig, (0.1, -0.15, 0.2))
    scene.frame_set(1)
    return metarig


@pytest.mark.skipif(not hasattr(bpy.types, "ActionSlot"), reason="actions have slots from Blender 4.4")
def test_a_copy_playing_the_same_slot_is_named_and_keeps_its_keys(rig):
    hand = rig.pose.bones["hand.L"]
    for frame, angle in ((1, 0.3), (5, 0.6), (10, 0.9)):
        hand.rotation_quaternion = Quaternion((1.0, 0.0, 0.0), angle)
        hand.keyframe_insert("rotation_quaternion", frame=frame)
    other = bpy.data.objects.new("Other rig", rig.data)  # as Alt+D leaves it: same action, same slot
    bpy.context.scene.collection.objects.link(other)
    other.animation_data_create().action = rig.animation_data.action
    other.animation_data.action_slot = rig.animation_data.action_slot
    theirs = keys_of(other)
    make_active(rig)

    with pytest.raises(RuntimeError, match="also animates 'Other rig'"):
        bpy.ops.ewbik.bake(frame_start=1, frame_end=10)

    assert keys_of(other) == theirs


def frozen_second_rig():
    """A metarig beside the first, hand.R pinned, every rotation locked: the solver moves nothing."""
    second = build_metarig(location=(2.0, 0.0, 0.0))
    pin(second, "hand.R")
    for pose_bone in second.pose.bones:
        pose_bone.lock_rotation = (True, True, True)
        pose_bone.lock_rotation_w = True
        pose_bone.lock_rotations_4d = True
    bpy.ops.object.mode_set(mode="OBJECT")
    return second


def test_a_crowd_bake_that_fails_keys_no_armature(rig):
    second = frozen_second_rig()
    bpy.context.scene.frame_set(1)
    before = {obj: pose_of(obj) for obj in (rig, second)}
    make_active(rig)
    second.select_set(True)

    with pytest.raises(RuntimeError, match="moved none of the bones"):
        bpy.ops.ewbik.bake(frame_start=1, frame_end=10)

    for obj in (rig, second):
        assert keys_of(obj) == {} and obj.ewbik.live is True, obj.name
        assert_same_pose(obj, before[obj])


def test_a_write_failing_on_a_later_armature_takes_back_the_keys_of_the_earlier(rig, monkeypatch):
    second = with_keyed_hand_target(build_metarig(location=(2.0, 0.0, 0.0)), (-0.1, -0.2, 0.2))
    bpy.context.scene.frame_set(1)
    write = fcurve_keys().KeyWriter.write

    def fail_on_second(writer, *args, **kwargs):
        if writer.obj == second:
            raise RuntimeError("disk full")
        return write(writer, *args, **kwargs)

    monkeypatch.setattr(fcurve_keys().KeyWriter, "write", fail_on_second)
    engine = addon_module("ewbik_addon.bake.bake_engine")
    bake = engine.CrowdBake(bpy.context, [rig, second], engine.BakeOptions(frame_start=1, frame_end=10))
    while not bake.done:
        bake.solve_next()

    with pytest.raises(RuntimeError, match="disk full"):
        bake.finish()

    for obj in (rig, second):
        assert keys_of(obj) == {} and obj.ewbik.live is True, obj.name


@pytest.mark.parametrize("deleted", ["object", "armature data"])
def test_an_armature_deleted_during_the_modal_bake_cancels_it(rig, deleted):
    second = with_keyed_hand_target(build_metarig(location=(2.0, 0.0, 0.0)), (-0.1, -0.2, 0.2))
    bpy.context.scene.frame_set(1)
    before = pose_of(rig)
    engine = addon_module("ewbik_addon.bake.bake_engine")
    options = engine.BakeOptions(frame_start=1, frame_end=10)
    running = RunningBake(engine.CrowdBake(bpy.context, [rig, second], options))

    running._bake.solve_next()
    if deleted == "object":
        bpy.data.objects.remove(second)
    else:
        bpy.data.armatures.remove(second.data)

    assert running.send("TIMER") == {"CANCELLED"}

    [(kinds, message)] = running.reports
    assert kinds == {"ERROR"} and "deleted" in message
    assert bpy.context.scene.frame_current == 1
    assert keys_of(rig) == {} and rig.ewbik.live is True
    assert_same_pose(rig, before)
