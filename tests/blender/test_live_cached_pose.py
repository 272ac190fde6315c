"""What a live drag keeps between updates (the pose channels it wrote, the settings, the Euler
conversions) must never hide a change made by anyone else: the user, the animation, a setting."""

import bpy
import numpy as np
import pytest
from mathutils import Quaternion, Vector

from tests.support.blender_helpers import (
    HANDS_FEET_HEAD,
    addon_module,
    bone_world,
    build_metarig,
    pin,
    update,
)
from tests.support.live_drags import (
    DRAG,
    channels,
    drag,
    keyed_finger_after_drags_across_a_frame_change,
)


def pinned_metarig():
    """The metarig with hands, feet and head pinned, no time budget (the same solves on a busy
    machine)."""
    rig = build_metarig()
    rig.ewbik.time_budget_ms = 0.0
    targets = pin(rig, *HANDS_FEET_HEAD)
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    return rig, targets


def test_a_drag_poses_exactly_as_if_every_update_read_the_pose_from_blender(monkeypatch):
    """The oracle: the same drag with the handler told that the armature changed on every update
    (so every solve reads the channels back and rescans): the channels must come out the same."""
    rig, targets = pinned_metarig()
    drag(targets, DRAG)
    kept = channels(rig)
    bpy.ops.wm.read_homefile(use_empty=True)
    monkeypatch.setattr(
        addon_module("ewbik_addon.solve.live"), "_armature_changed", lambda obj, changed: True
    )
    rig, targets = pinned_metarig()
    drag(targets, DRAG)
    for ours, fresh in zip(kept, channels(rig)):
        np.testing.assert_array_equal(ours, fresh)


@pytest.mark.parametrize("bone", ["f_index.01.L", "breast.L"])  # a quaternion and a YXZ Euler bone
def test_a_bone_the_user_turns_during_a_drag_keeps_its_rotation(metarig, bone):
    """The solver does not move these bones; the write-back of the bones it moves must not put
    back what they held before the user's edit (the edit comes with a target move)."""
    targets = pin(metarig, *HANDS_FEET_HEAD)
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    drag(targets, DRAG[:3])
    pose_bone = metarig.pose.bones[bone]
    turn = Quaternion((1.0, 0.0, 0.0), 0.4)
    if pose_bone.rotation_mode == "QUATERNION":
        pose_bone.rotation_quaternion = turn
    else:
        pose_bone.rotation_euler = turn.to_euler(pose_bone.rotation_mode)
    targets["hand.L"].location.z += 0.02
    update()
    drag(targets, DRAG[3:])
    held = pose_bone.matrix_basis.to_quaternion()
    assert held.rotation_difference(turn).angle < 1e-5


def test_a_frame_change_between_drags_is_read_back(metarig):
    """Keys set the channels on a frame change; the next drag starts from them, not from the
    pose the last solve wrote: an unsolved, keyed bone shows its key after the drag."""
    targets = pin(metarig, *HANDS_FEET_HEAD)
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    assert keyed_finger_after_drags_across_a_frame_change(metarig, targets) < 1e-5


def test_a_rotation_mode_switched_between_drags_is_written_in_the_new_mode(metarig):
    metarig.ewbik.time_budget_ms = 0.0  # reach the targets however busy the machine is
    targets = pin(metarig, *HANDS_FEET_HEAD)
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    drag(targets, DRAG[:2])
    upper_arm = metarig.pose.bones["upper_arm.L"]
    upper_arm.rotation_mode = "XZY"
    update()
    before = upper_arm.rotation_euler.copy()
    drag(targets, DRAG[2:5])
    assert (Vector(upper_arm.rotation_euler) - Vector(before)).length > 1e-3
    hand = bone_world(metarig, "hand.L").translation
    assert (hand - targets["hand.L"].matrix_world.translation).length < 1e-3


def test_a_setting_changed_between_drags_applies_to_the_next_solves(metarig, monkeypatch):
    armature_solve = addon_module("ewbik_addon.solve.armature_solve")
    iterations = []
    real = armature_solve.solve

    def recording(skeleton, pins, rotations, locations, settings, *args):
        iterations.append(settings.iterations)
        return real(skeleton, pins, rotations, locations, settings, *args)

    monkeypatch.setattr(armature_solve, "solve", recording)
    metarig.ewbik.auto_limits = False  # no restart from the limits' centres: one attempt per solve
    metarig.ewbik.time_budget_ms = 0.0
    targets = pin(metarig, *HANDS_FEET_HEAD)
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    drag(targets, DRAG[:2])
    assert max(iterations) > 1
    iterations.clear()
    metarig.ewbik.iterations = 1
    targets["hand.L"].location.z += 0.05
    update()
    drag(targets, DRAG[2:5])
    assert iterations and max(iterations) == 1


def test_a_target_outside_the_view_layer_is_not_taken_for_deleted(metarig):
    """The quick check finds targets in the updated view layer; one in a collection the view
    layer excludes is still in the scene, so its pin stays."""
    target = pin(metarig, "hand.L")["hand.L"]
    bpy.ops.object.mode_set(mode="OBJECT")
    hidden = bpy.data.collections.new("hidden targets")
    bpy.context.scene.collection.children.link(hidden)
    for collection in target.users_collection:
        collection.objects.unlink(target)
    hidden.objects.link(target)
    bpy.context.view_layer.layer_collection.children[hidden.name].exclude = True
    target.location.z += 0.02
    update()
    assert metarig.pose.bones["hand.L"].ewbik.target == target
    for collection in target.users_collection:
        collection.objects.unlink(target)
    update()
    assert metarig.pose.bones["hand.L"].ewbik.target is None


def test_a_nan_channel_typed_between_drags_is_refused_naming_its_bone(metarig):
    """The channels a drag keeps are not checked for NaN again; one the user sets is, because the
    edit makes the next solve read the channels back: the solve names the bone and writes nothing."""
    targets = pin(metarig, *HANDS_FEET_HEAD)
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    drag(targets, DRAG[:3])
    metarig.pose.bones["forearm.L"].rotation_quaternion = (float("nan"), 0.0, 0.0, 0.0)
    before = channels(metarig)
    targets["hand.L"].location.z += 0.02
    update()
    assert metarig.ewbik.status_is_error
    assert "'forearm.L'" in metarig.ewbik.status and "NaN" in metarig.ewbik.status
    for held, now in zip(before, channels(metarig)):
        np.testing.assert_array_equal(held, now)


def test_a_target_dragged_to_infinity_names_its_pin_and_keeps_the_pose(metarig):
    """Targets are checked on every update, each as it is read: the pin is named, nothing written."""
    targets = pin(metarig, *HANDS_FEET_HEAD)
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    drag(targets, DRAG[:3])
    before = channels(metarig)
    targets["foot.R"].location.x = float("inf")
    update()
    assert metarig.ewbik.status_is_error
    assert "pin 'foot.R'" in metarig.ewbik.status and "infinity" in metarig.ewbik.status
    for held, now in zip(before, channels(metarig)):
        np.testing.assert_array_equal(held, now)
