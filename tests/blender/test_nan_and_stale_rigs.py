"""Values no property range stops (NaN typed into a field or keyed on an F-curve), rigs whose rebuild
fails, and odd scales: the pose stays finite, the status names the problem, the distance is true."""

import math

import bpy
import numpy as np
import pytest
from mathutils import Vector

from tests.support.blender_helpers import (
    addon_module,
    make_active,
    pin,
    pose_values,
    select_pose_bones,
    solve_fully_on_update,
    update,
)
from tests.support.ui_layout import draw


def pinned_hand(metarig):
    solve_fully_on_update(metarig, 100)
    target = pin(metarig, "hand.L")["hand.L"]
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    return target


def test_nan_influence_is_refused_and_the_pose_stays(metarig):
    target = pinned_hand(metarig)
    before = pose_values(metarig)
    metarig.ewbik.influence = math.nan
    target.location += Vector((0.05, -0.05, 0.1))
    update()
    assert metarig.ewbik.status_is_error and "influence" in metarig.ewbik.status
    assert np.array_equal(pose_values(metarig), before)


def test_a_nan_key_on_influence_is_refused(metarig):
    target = pinned_hand(metarig)
    metarig.keyframe_insert("ewbik.influence", frame=1)
    fcurves = addon_module("ewbik_addon.bake.fcurve_keys").action_fcurves(metarig.animation_data)
    fcurve = next(fcurve for fcurve in fcurves if fcurve.data_path == "ewbik.influence")
    fcurve.keyframe_points[0].co.y = math.nan
    before = pose_values(metarig)
    target.location.z += 0.1
    bpy.context.scene.frame_set(2)
    assert math.isnan(metarig.ewbik.influence)
    assert metarig.ewbik.status_is_error and "influence" in metarig.ewbik.status
    assert np.array_equal(pose_values(metarig), before)


def test_a_bake_at_nan_influence_keys_nothing(metarig):
    target = pinned_hand(metarig)
    target.keyframe_insert("location", frame=1)
    target.location.z += 0.2
    target.keyframe_insert("location", frame=10)
    metarig.ewbik.live = False
    metarig.ewbik.influence = math.nan
    make_active(metarig)
    with pytest.raises(RuntimeError, match="influence"):
        bpy.ops.ewbik.bake(frame_start=1, frame_end=10)
    assert metarig.animation_data is None or metarig.animation_data.action is None


@pytest.mark.parametrize("broken", ["zero length", "NaN roll"])
def test_a_rig_that_fails_to_rebuild_is_not_solved_from_its_old_bones(metarig, broken):
    target = pinned_hand(metarig)
    make_active(metarig)
    bpy.ops.object.mode_set(mode="EDIT")
    forearm = metarig.data.edit_bones["forearm.L"]
    if broken == "zero length":
        forearm.tail = forearm.head + Vector((0.0, 0.0, 1e-7))
    else:
        forearm.roll = math.nan
    bpy.ops.object.mode_set(mode="OBJECT")
    if "forearm.L" not in metarig.data.bones:
        pytest.skip("this Blender deletes zero-length bones on leaving Edit Mode")
    update()
    assert metarig.ewbik.status_is_error and "forearm.L" in metarig.ewbik.status
    before = pose_values(metarig)

    target.location.z += 0.05
    update()

    assert metarig.ewbik.status_is_error and "forearm.L" in metarig.ewbik.status
    assert np.array_equal(pose_values(metarig), before)


def test_deleted_armatures_leave_no_cached_rig(metarig):
    rig_cache = addon_module("ewbik_addon.bridge.rig_cache")
    solve_armature = addon_module("ewbik_addon.solve.armature_solve").solve_armature
    target = pinned_hand(metarig)
    metarig.ewbik.live = False
    for cycle in range(20):
        copy = bpy.data.objects.new(f"copy {cycle}", metarig.data)
        bpy.context.scene.collection.objects.link(copy)
        update()
        copy.pose.bones["hand.L"].ewbik.target = target
        solve_armature(copy)
        bpy.data.objects.remove(copy)
    assert len(rig_cache._rigs) <= 2


def test_the_limits_panel_draws_a_nan_pose(metarig):
    pin(metarig, "hand.L")  # sets the humanoid limits
    select_pose_bones(metarig, ["forearm.L"])
    metarig.pose.bones["forearm.L"].rotation_quaternion = (math.nan, 0.0, 0.0, 0.0)
    update()
    assert ("prop", "limits_scope") in set(draw("EWBIK_PT_limits"))


def test_the_status_distance_is_the_world_distance_under_a_non_uniform_scale(metarig):
    metarig.scale = (1.0, 3.0, 0.2)
    target = pinned_hand(metarig)
    target.location += Vector((0.4, 2.0, -1.5))  # out of reach
    update()
    reached = metarig.matrix_world @ metarig.pose.bones["hand.L"].head
    world = (target.matrix_world.translation - reached).length
    shown = float(metarig.ewbik.status.split("hand.L ")[1].split(" ")[0])
    assert shown == pytest.approx(world, rel=0.01), metarig.ewbik.status
