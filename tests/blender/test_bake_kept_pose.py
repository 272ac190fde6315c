"""A bake keeps each armature's pose as arrays between frames when no animation sets its channels,
and keys what the solves wrote without reading it back; an armature whose channels an action sets
is read back every frame. After the first frame an armature whose pose nothing the bake reads
depends on is not even written through Blender until the bake ends."""

import bpy
import numpy as np
import pytest
from mathutils import Quaternion, Vector

from tests.support.blender_helpers import HANDS_FEET_HEAD, addon_module, build_metarig, make_active, pin

FOLLOWED_BONE = "hand.L"  # a bone of the first armature that its pins move

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
    fcurve_keys = addon_module("ewbik_addon.bake.fcurve_keys")
    return {
        (fcurve.data_path, fcurve.array_index): fcurve_keys.read_keys(fcurve.keyframe_points)["co"]
        for fcurve in fcurve_keys.action_fcurves(obj.animation_data)
    }


def read_back_every_frame(monkeypatch):
    """The oracle: every frame's pose read from Blender before the solve and after it."""
    bake_engine = addon_module("ewbik_addon.bake.bake_engine")
    pose_channels = addon_module("ewbik_addon.com.pose_channels")
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


def partly_locked_euler_arm(rig):
    """No animation on the armature (its pose is held), but a partly locked upper arm (a second
    solve reads the pose the first wrote) and a forearm in Euler mode."""
    rig.pose.bones["upper_arm.L"].lock_rotation = (False, True, False)
    rig.pose.bones["forearm.L"].rotation_mode = "XZY"


def bake_crowd(count, prepare=None):
    rigs = animated_crowd(count)
    if prepare is not None:
        prepare(rigs[-1])
    assert bpy.ops.ewbik.bake() == {"FINISHED"}
    return [baked_keys(rig) for rig in rigs]


@pytest.mark.parametrize(
    ("count", "prepare"),
    [
        (1, None),
        (3, None),
        (3, turning_locked_chest),
        (1, partly_locked_euler_arm),
        (3, partly_locked_euler_arm),
    ],
)
def test_a_bake_keys_exactly_what_reading_every_frame_back_keys(monkeypatch, count, prepare):
    kept = bake_crowd(count, prepare)
    bpy.ops.wm.read_homefile(use_empty=True)
    read_back_every_frame(monkeypatch)
    for rig_kept, fresh in zip(kept, bake_crowd(count, prepare)):
        assert rig_kept.keys() == fresh.keys() and len(fresh) > 0
        for channel, keys in fresh.items():
            np.testing.assert_array_equal(rig_kept[channel], keys, err_msg=str(channel))


def test_a_crowd_bake_reads_the_poses_from_blender_on_its_first_frame_only(monkeypatch):
    rigs = animated_crowd(3)
    pose_io = addon_module("ewbik_addon.bridge.pose_io")
    fetched = []
    real = pose_io._fetch_channels
    monkeypatch.setattr(pose_io, "_fetch_channels", lambda *args: fetched.append(1) or real(*args))
    assert bpy.ops.ewbik.bake() == {"FINISHED"}
    assert len(fetched) == len(rigs)


def baked_heads(rigs):
    """{frame: every rig's bone heads (world) as their baked keys play back}."""
    heads = {}
    for frame in range(1, FRAMES + 1):
        bpy.context.scene.frame_set(frame)
        bpy.context.view_layer.update()
        heads[frame] = np.concatenate(
            [[rig.matrix_world @ bone.head for bone in rig.pose.bones] for rig in rigs]
        )
    return heads


def test_a_crowd_bake_keys_what_baking_the_armatures_one_by_one_keys():
    """The crowd's one solve and the single solves give each armature the same pose: to a
    millimetre on every bone head (a crowd's solve stops when every armature's pins are reached, a
    single one when its own are, so not to the last bit)."""
    together = animated_crowd(3)
    assert bpy.ops.ewbik.bake() == {"FINISHED"}
    crowd = baked_heads(together)
    bpy.ops.wm.read_homefile(use_empty=True)
    rigs = animated_crowd(3)
    for rig in rigs:
        make_active(rig)
        assert bpy.ops.ewbik.bake() == {"FINISHED"}
    alone = baked_heads(rigs)
    for frame, heads in alone.items():
        assert np.linalg.norm(crowd[frame] - heads, axis=1).max() < 1e-3, frame


def crowd_with_a_target_on_a_solved_bone():
    """Two metarigs: the second's right hand pinned to an empty on the first's left hand, which
    the first's pins move; the first armature active and both selected."""
    first, second = animated_crowd(2)
    bpy.context.view_layer.update()
    follower = bpy.data.objects.new("on the first's hand", None)
    bpy.context.scene.collection.objects.link(follower)
    follower.parent, follower.parent_type, follower.parent_bone = first, "BONE", FOLLOWED_BONE
    follower.matrix_world = second.pose.bones["hand.R"].ewbik.target.matrix_world.copy()
    second.pose.bones["hand.R"].ewbik.target = follower
    bpy.context.scene.frame_set(1)
    return first, second


def bake_with_reads(monkeypatch, armatures_read):
    """Bake the crowd with `armatures_read` deciding which armatures are written every frame
    (None: the bake's own rule); returns (keys per armature, pose channels per armature after the
    bake, the armatures held by name, the armatures' names)."""
    bpy.ops.wm.read_homefile(use_empty=True)
    rigs = crowd_with_a_target_on_a_solved_bone()
    bake_engine = addon_module("ewbik_addon.bake.bake_engine")
    if armatures_read is not None:
        monkeypatch.setattr(bake_engine.bake_dependencies, "armatures_read", armatures_read)
    held = []
    hold = bake_engine.PoseBake.hold_writes
    monkeypatch.setattr(
        bake_engine.PoseBake, "hold_writes", lambda bake: held.append(bake.obj.name) or hold(bake)
    )
    assert bpy.ops.ewbik.bake() == {"FINISHED"}
    monkeypatch.undo()
    poses = [addon_module("ewbik_addon.com.pose_channels").read_pose_channels(rig.pose.bones) for rig in rigs]
    return [baked_keys(rig) for rig in rigs], poses, held, [rig.name for rig in rigs]


def test_an_armature_a_target_follows_is_written_every_frame(monkeypatch):
    keys, poses, held, names = bake_with_reads(monkeypatch, None)
    every_written, written_poses, _, _ = bake_with_reads(
        monkeypatch, lambda armatures, targets: set(armatures)
    )
    none_written, _, _, _ = bake_with_reads(monkeypatch, lambda armatures, targets: set())

    assert held == [names[1]]
    for rig_keys, oracle in zip(keys, every_written):
        assert rig_keys.keys() == oracle.keys()
        for channel, values in oracle.items():
            np.testing.assert_array_equal(rig_keys[channel], values, err_msg=str(channel))
    for pose, written_pose in zip(poses, written_poses):  # the pose the bake leaves
        for channel, values in written_pose.items():
            np.testing.assert_array_equal(pose[channel], values, err_msg=channel)
    # the follower matters: holding the first armature's pose too moves the second's keys
    gap = max(np.abs(none_written[1][channel] - values).max() for channel, values in every_written[1].items())
    assert gap > 1e-3


def test_a_held_pose_is_shown_between_modal_steps_and_written_when_the_bake_ends():
    rigs = animated_crowd(2)
    bake_engine = addon_module("ewbik_addon.bake.bake_engine")
    pose_channels = addon_module("ewbik_addon.com.pose_channels")
    bake = bake_engine.CrowdBake(bpy.context, rigs, bake_engine.BakeOptions(1, FRAMES))
    for _ in range(3):
        bake.solve_next()
    last = {
        rig: {name: values[bake.solved - 1] for name, values in one.poses.items()}
        for rig, one in zip(rigs, bake.bakes)
    }

    shown_before = [pose_channels.read_pose_channels(rig.pose.bones) for rig in rigs]
    bake.show_solved()
    shown = [pose_channels.read_pose_channels(rig.pose.bones) for rig in rigs]

    for rig, before, after in zip(rigs, shown_before, shown):
        assert not np.array_equal(before["rotation_quaternion"], last[rig]["rotation_quaternion"])  # held
        np.testing.assert_array_equal(after["rotation_quaternion"], last[rig]["rotation_quaternion"])
    bake.solve_next()  # later frames still solve from the held buffers
    assert all(one.held_buffers is not None and one.held_buffers.held for one in bake.bakes)
    bake.cancel()
    assert all(one.held_buffers is None for one in bake.bakes)
    assert not any(addon_module("ewbik_addon.bridge.rig_cache").cached_rig(rig).buffers.held for rig in rigs)


def test_a_failure_while_showing_held_poses_cancels_the_bake_and_holds_nothing(monkeypatch):
    """Held buffers left held would keep every later live solve out of Blender: a failure while
    the modal bake shows its last frame puts every armature back and releases its buffers."""
    rigs = animated_crowd(2)
    bake_engine = addon_module("ewbik_addon.bake.bake_engine")
    rig_cache = addon_module("ewbik_addon.bridge.rig_cache")
    pose_channels = addon_module("ewbik_addon.com.pose_channels")
    start = [pose_channels.read_pose_channels(rig.pose.bones)["rotation_quaternion"] for rig in rigs]
    bake = bake_engine.CrowdBake(bpy.context, rigs, bake_engine.BakeOptions(1, FRAMES))
    for _ in range(3):
        bake.solve_next()
    assert all(rig_cache.cached_rig(rig).buffers.held for rig in rigs)

    def broken(self, buffers=None):
        raise RuntimeError("drawing failed")

    monkeypatch.setattr(bake_engine.PoseBake, "show_solved", broken)
    with pytest.raises(RuntimeError, match="drawing failed"):
        bake.show_solved()

    for rig, rotations in zip(rigs, start):
        assert not rig_cache.cached_rig(rig).buffers.held
        np.testing.assert_allclose(
            pose_channels.read_pose_channels(rig.pose.bones)["rotation_quaternion"], rotations, atol=1e-6
        )
