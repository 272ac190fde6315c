"""A bake keys the armatures it bakes and nothing else, or (refused, failed, its armature deleted
midway) leaves every armature, action and frame as it was."""

import bpy
import pytest
from mathutils import Quaternion, Vector

from tests.support.blender_helpers import addon_module, make_active, pin


def fcurve_keys():
    return addon_module("ewbik_addon.fcurve_keys")


def keys_of(obj):
    """Every key of every F-curve the armature's slot (or action) holds."""
    fcurves = fcurve_keys().action_fcurves(obj.animation_data) or ()
    return {(f.data_path, f.array_index): [tuple(k.co) for k in f.keyframe_points] for f in fcurves}


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

