"""A bake keeps each armature's pose as arrays between frames when no animation sets its channels,
and keys what the solves wrote without reading it back; an armature whose channels an action sets
is read back every frame."""

import bpy
import numpy as np
import pytest
from mathutils import Quaternion, Vector

from tests.support.blender_helpers import HANDS_FEET_HEAD, addon_module, build_metarig, make_active, pin

FRAMES = 12


def animated_crowd(count):
    """`count` metarigs, hands, feet and head pinned, every target moving over frames 1-FRAMES;
    the first armature active and all of them selected."""
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, FRAMES
    rigs = []
    for k in range(count):
        rig = build_metarig(location=(2.0 * k, 0.0, 0.0))
        rig.ewbik.time_budget_ms = 0.0
        for i, target in enumerate(pin(rig, *HANDS_FEET_HEAD).values()):
            start = target.location.copy()
            target.keyframe_insert("location", frame=1)
            target.location = start + Vector((0.03 * (i - 2), -0.04 * (k + 1), 0.05))
            target.keyframe_insert("location", frame=FRAMES)
        bpy.ops.object.mode_set(mode="OBJECT")
        rigs.append(rig)
    make_active(rigs[0])
    for rig in rigs:
        rig.select_set(True)
    bpy.context.scene.frame_set(1)
    return rigs


def baked_keys(obj):
    fcurve_keys = addon_module("ewbik_addon.fcurve_keys")
    return {
        (fcurve.data_path, fcurve.array_index): fcurve_keys.read_keys(fcurve.keyframe_points)["co"]
        for fcurve in fcurve_keys.action_fcurves(obj.animation_data)
    }


def read_back_every_frame(monkeypatch):
    """The oracle: every frame's pose read from Blender before the solve and after it."""
    bake_engine = addon_module("ewbik_addon.bake_engine")
    pose_channels = addon_module("ewbik_addon.pose_channels")
    monkeypatch.setattr(bake_engine, "pose_set_on_frame_change", lambda obj: True)
    monkeypatch.setattr(
        bake_engine.PoseBake,
        "channels_written",
        lambda bake: pose_channels.read_pose_channels(bake.obj.pose.bones),
    )


def turning_locked_chest(rig):
    """An action on the armature: its chest, locked (the solver holds it), keyed turning, so the
    pins are reached through it only if each frame's solve starts from the channels it set."""
    chest = rig.pose.bones["spine.003"]
    chest.lock_rotation = (True, True, True)
    chest.rotation_quaternion = Quaternion()
    chest.keyframe_insert("rotation_quaternion", frame=1)
    chest.rotation_quaternion = Quaternion((0.0, 0.0, 1.0), 0.6)
    chest.keyframe_insert("rotation_quaternion", frame=FRAMES)
    bpy.context.scene.frame_set(1)


def bake_crowd(count, animated):
    rigs = animated_crowd(count)
    if animated:
        turning_locked_chest(rigs[-1])
    assert bpy.ops.ewbik.bake() == {"FINISHED"}
    return [baked_keys(rig) for rig in rigs]


@pytest.mark.parametrize(("count", "animated"), [(1, False), (3, False), (3, True)])
def test_a_bake_keys_exactly_what_reading_every_frame_back_keys(monkeypatch, count, animated):
    kept = bake_crowd(count, animated)
    bpy.ops.wm.read_homefile(use_empty=True)
    read_back_every_frame(monkeypatch)
    for rig_kept, fresh in zip(kept, bake_crowd(count, animated)):
        assert rig_kept.keys() == fresh.keys() and len(fresh) > 0
        for channel, keys in fresh.items():
            np.testing.assert_array_equal(rig_kept[channel], keys, err_msg=str(channel))


def test_a_crowd_bake_reads_the_poses_from_blender_on_its_first_frame_only(monkeypatch):
    rigs = animated_crowd(3)
    pose_io = addon_module("ewbik_addon.pose_io")
    fetched = []
    real = pose_io._fetch_channels
    monkeypatch.setattr(pose_io, "_fetch_channels", lambda *args: fetched.append(1) or real(*args))
    assert bpy.ops.ewbik.bake() == {"FINISHED"}
    assert len(fetched) == len(rigs)
