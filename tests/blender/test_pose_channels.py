"""ewbik_addon/com/pose_channels.py: a pose's channels read and put back in bulk, and the frame
ranges Bake and Limits from Action step through."""

import types

import bpy
import numpy as np
import pytest
from mathutils import Euler, Quaternion

from tests.support.blender_helpers import addon_module


@pytest.fixture
def pose_channels():
    return addon_module("ewbik_addon.com.pose_channels")


def test_channels_read_before_an_edit_put_every_channel_back(metarig, pose_channels):
    bones = metarig.pose.bones
    bones["forearm.L"].rotation_quaternion = Quaternion((0.0, 0.0, 1.0), 0.4)
    bones["hand.L"].rotation_mode = "XZY"
    bones["hand.L"].rotation_euler = Euler((0.1, 0.2, 0.3), "XZY")
    bones["shin.R"].rotation_axis_angle = (0.5, 1.0, 0.0, 0.0)
    bones["spine"].location = (0.01, 0.02, 0.03)
    bones["toe.L"].scale = (1.0, 1.2, 1.0)
    kept = pose_channels.read_pose_channels(bones)
    assert {name: values.shape for name, values in kept.items()} == {
        name: (len(bones), size) for name, size in pose_channels.POSE_CHANNELS.items()
    }
    for pose_bone in bones:
        pose_bone.rotation_quaternion = Quaternion((1.0, 0.0, 0.0), 1.0)
        pose_bone.rotation_euler = (0.7, 0.7, 0.7)
        pose_bone.rotation_axis_angle = (0.3, 0.0, 0.0, 1.0)
        pose_bone.location = (1.0, 1.0, 1.0)
        pose_bone.scale = (2.0, 2.0, 2.0)
    pose_channels.write_pose_channels(bones, kept)
    again = pose_channels.read_pose_channels(bones)
    for name, values in kept.items():
        np.testing.assert_array_equal(again[name], values, err_msg=name)
    assert tuple(bones["toe.L"].scale) == pytest.approx((1.0, 1.2, 1.0))


def test_the_scene_range_is_the_preview_range_when_it_is_on(pose_channels):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 3, 40
    assert pose_channels.scene_range(scene) == (3, 40)
    scene.use_preview_range = True
    scene.frame_preview_start, scene.frame_preview_end = 10, 20
    assert pose_channels.scene_range(scene) == (10, 20)


def test_the_action_range_is_the_actions_own_unless_the_preview_narrows_it(metarig, pose_channels):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 250
    assert pose_channels.action_range(scene, metarig) == (1, 250)  # no action: the timeline's
    bone = metarig.pose.bones["hand.L"]
    bone.keyframe_insert("location", frame=5)
    bone.keyframe_insert("location", frame=31)
    assert pose_channels.action_range(scene, metarig) == (5, 31)
    action = metarig.animation_data.action
    action.use_frame_range = True
    action.frame_start, action.frame_end = 7.5, 20.25
    assert pose_channels.action_range(scene, metarig) == (7, 21)  # whole frames around it
    scene.use_preview_range = True
    scene.frame_preview_start, scene.frame_preview_end = 12, 14
    assert pose_channels.action_range(scene, metarig) == (12, 14)


@pytest.mark.parametrize("set_by_user", [(), ("frame_start",), ("frame_end",), ("frame_start", "frame_end")])
def test_an_unset_end_of_the_frame_range_is_filled_in(pose_channels, set_by_user):
    operator = pose_channels.frame_range("the timeline")()
    operator.properties = types.SimpleNamespace(is_property_set=lambda name: name in set_by_user)
    operator.frame_start, operator.frame_end = -1, -2
    operator.fill_frame_range(5, 60)
    assert operator.frame_start == (-1 if "frame_start" in set_by_user else 5)
    assert operator.frame_end == (-2 if "frame_end" in set_by_user else 60)
