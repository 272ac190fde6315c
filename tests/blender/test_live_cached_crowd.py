"""A crowd's live drag keeps each armature's pose channels between updates, as a single armature's
does (test_live_cached_pose): Blender is not asked for them again, and that must never hide a change
made by anyone else."""

import bpy
import numpy as np
from mathutils import Quaternion

from tests.support.blender_helpers import HANDS_FEET_HEAD, addon_module, build_metarig, pin, update
from tests.support.live_drags import (
    DRAG,
    channels,
    drag,
    keyed_finger_after_drags_across_a_frame_change,
)

RIGS = 3


def pinned_crowd():
    """Three metarigs side by side, hands, feet and head pinned, live, no time budget; their
    targets as one {(rig, bone): empty} so a drag moves all of them."""
    rigs, targets = [], {}
    for k in range(RIGS):
        rig = build_metarig(location=(2.0 * k, 0.0, 0.0))
        rig.ewbik.time_budget_ms = 0.0
        targets.update({(k, bone): target for bone, target in pin(rig, *HANDS_FEET_HEAD).items()})
        rigs.append(rig)
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    return rigs, targets


def test_a_crowd_drag_poses_exactly_as_if_every_update_read_the_poses_from_blender(monkeypatch):
    """The oracle: the same drag with every solve reading the channels from Blender. (Not with
    every update taken for an armature change, as for one armature: the rescan that brings
    rebuilds the crowd's problem, which moves some channels by a float32 rounding.)"""
    rigs, targets = pinned_crowd()
    drag(targets, DRAG)
    kept = [channels(rig) for rig in rigs]
    bpy.ops.wm.read_homefile(use_empty=True)
    armature_solve = addon_module("ewbik_addon.solve.armature_solve")
    real = armature_solve.read_pose
    monkeypatch.setattr(armature_solve, "read_pose", lambda obj, rig, channels_kept=False: real(obj, rig))
    rigs, targets = pinned_crowd()
    drag(targets, DRAG)
    for rig_kept, rig in zip(kept, rigs):
        for ours, fresh in zip(rig_kept, channels(rig)):
            np.testing.assert_array_equal(ours, fresh)


def test_a_crowd_drag_reads_no_pose_channels_from_blender(monkeypatch):
    """After the first update every armature's channels are the ones its last solve wrote."""
    rigs, targets = pinned_crowd()
    drag(targets, DRAG[:1])
    pose_io = addon_module("ewbik_addon.bridge.pose_io")
    fetched = []
    real = pose_io._fetch_channels
    monkeypatch.setattr(pose_io, "_fetch_channels", lambda *args: fetched.append(1) or real(*args))
    solves = []
    crowd_solve = addon_module("ewbik_addon.solve.crowd_solve")
    real_solve = crowd_solve.solve
    monkeypatch.setattr(crowd_solve, "solve", lambda *args: solves.append(1) or real_solve(*args))
    drag(targets, DRAG[1:4])
    assert len(solves) == 3
    assert fetched == []


def test_a_bone_the_user_turns_in_one_armature_of_a_crowd_keeps_its_rotation():
    rigs, targets = pinned_crowd()
    drag(targets, DRAG[:3])
    finger = rigs[1].pose.bones["f_index.01.L"]
    turn = Quaternion((1.0, 0.0, 0.0), 0.4)
    finger.rotation_quaternion = turn
    targets[(1, "hand.L")].location.z += 0.02
    update()
    drag(targets, DRAG[3:])
    assert finger.rotation_quaternion.rotation_difference(turn).angle < 1e-5


def test_a_frame_change_between_crowd_drags_is_read_back():
    """Keys set one armature's channels on a frame change; the next crowd drag starts from them."""
    rigs, targets = pinned_crowd()
    assert keyed_finger_after_drags_across_a_frame_change(rigs[2], targets) < 1e-5
