"""Bones that constraints or drivers pose: found, never pinned silently, held, and seen by the
solver where Blender puts them (the Rigify metarig with constraints and drivers added)."""

import math

import bpy
import pytest
from mathutils import Euler, Vector

from tests.support.blender_helpers import (
    addon_module,
    make_active,
    pin,
    select_pose_bones,
    solve_fully_on_update,
    update,
)
from tests.support.ui_layout import draw


def empty(name, rotation=(0.0, 0.0, 0.0)):
    obj = bpy.data.objects.new(name, None)
    obj.rotation_euler = rotation
    bpy.context.scene.collection.objects.link(obj)
    return obj


def add_constraint(obj, bone, kind, target, **settings):
    constraint = obj.pose.bones[bone].constraints.new(kind)
    if target is not None:
        constraint.target = target
    for name, value in settings.items():
        setattr(constraint, name, value)
    return constraint


def add_rotation_driver(obj, bone, expression="0.2"):
    fcurve = obj.pose.bones[bone].driver_add("rotation_quaternion", 1)
    fcurve.driver.type = "SCRIPTED"
    fcurve.driver.expression = expression
    return fcurve


def test_fixed_bones_are_the_posing_constraints_ik_chains_and_rotation_drivers(metarig):
    target = empty("target")
    add_constraint(metarig, "forearm.L", "COPY_ROTATION", target)
    add_constraint(metarig, "shin.L", "IK", target, chain_count=2)
    add_rotation_driver(metarig, "hand.R")
    add_constraint(metarig, "upper_arm.R", "LIMIT_ROTATION", None, use_limit_x=True)
    add_constraint(metarig, "thigh.R", "COPY_LOCATION", target, enabled=False)
    add_constraint(metarig, "spine.001", "COPY_ROTATION", target, influence=0.0)
    add_constraint(metarig, "spine.002", "COPY_SCALE", target)
    add_constraint(metarig, "neck" if "neck" in metarig.pose.bones else "spine.004", "DAMPED_TRACK", None)
    fixed = addon_module("ewbik_addon.rigs.production_checks").fixed_bones(metarig)
    assert set(fixed) == {"forearm.L", "shin.L", "thigh.L", "hand.R"}
    assert "'Copy Rotation'" in fixed["forearm.L"]
    assert "IK constraint of 'shin.L'" in fixed["thigh.L"]
    assert "driver" in fixed["hand.R"] and "rotation_quaternion" in fixed["hand.R"]


def test_pinning_a_posed_bone_is_refused_with_the_reason(metarig):
    add_constraint(metarig, "forearm.L", "COPY_ROTATION", empty("target"))
    make_active(metarig)
    bpy.ops.object.mode_set(mode="POSE")
    select_pose_bones(metarig, ["forearm.L"])
    with pytest.raises(RuntimeError, match="'forearm.L' not pinned: its constraint 'Copy Rotation' poses it"):
        bpy.ops.ewbik.pin()
    assert metarig.pose.bones["forearm.L"].ewbik.target is None


def test_a_pin_set_on_a_posed_bone_stops_the_solve_and_says_so(metarig):
    add_rotation_driver(metarig, "hand.L")
    targets = pin(metarig, "hand.R")
    metarig.pose.bones["hand.L"].ewbik.target = targets["hand.R"]
    before = tuple(metarig.pose.bones["hand.R"].rotation_quaternion)
    with pytest.raises(
        RuntimeError,
        match="pin 'hand.L': a driver sets its rotation_quaternion, so the solver "
        "cannot move it; pin the control bone that moves it",
    ):
        bpy.ops.ewbik.solve()
    assert tuple(metarig.pose.bones["hand.R"].rotation_quaternion) == before
    assert "hand.L" in metarig.ewbik.status


def test_the_solver_sees_a_constrained_chest_where_blender_puts_it(metarig):
    """The chest copies an empty's 25 degree bow: the hands' chains start from the turned chest,
    and the bones from the chest down stay as they were."""
    add_constraint(
        metarig, "spine.003", "COPY_ROTATION", empty("turn", Euler((math.radians(25.0), 0.0, 0.0)))
    )
    update()
    solve_fully_on_update(metarig, 60)
    metarig.ewbik.auto_limits = False
    targets = pin(metarig, "hand.L", "hand.R")
    held = ("spine.003", "spine.002", "spine.001", "spine")
    before = {name: tuple(metarig.pose.bones[name].rotation_quaternion) for name in held}
    bpy.ops.object.mode_set(mode="OBJECT")
    targets["hand.L"].location += Vector((-0.1, -0.1, 0.05))
    update()
    make_active(metarig)
    assert bpy.ops.ewbik.solve() == {"FINISHED"}, metarig.ewbik.status
    update()
    for bone, target in targets.items():
        reached = (metarig.matrix_world @ metarig.pose.bones[bone].matrix).translation
        assert (reached - target.matrix_world.translation).length < 1e-3, (bone, metarig.ewbik.status)
    assert {name: tuple(metarig.pose.bones[name].rotation_quaternion) for name in held} == before
    assert metarig.pose.bones["forearm.L"].rotation_quaternion.angle > math.radians(2.0)
    assert "converged" in metarig.ewbik.status


def test_rig_section_counts_posed_bones_and_explains_the_active_one(metarig):
    add_constraint(metarig, "forearm.L", "COPY_ROTATION", empty("target"))
    make_active(metarig)
    bpy.ops.object.mode_set(mode="POSE")
    select_pose_bones(metarig, ["forearm.L"])
    assert bpy.types.EWBIK_PT_rig.poll(bpy.context)
    log = draw("EWBIK_PT_rig")
    assert ("label", "1 bones posed by constraints or drivers") in log
    assert ("label", "forearm.L: its constraint 'Copy Rotation' poses it") in log
    assert ("list", "EWBIK_UL_role_mapping") in log and ("operator", "ewbik.role_mapping_add") in log
    assert ("operator", "ewbik.switch_to_fk") not in log
