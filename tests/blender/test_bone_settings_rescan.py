"""A bone-setting edit while live: the next update sees exactly what changed, and the joint limits
are rebuilt only when some bone's limits did."""

import math

import bpy
import pytest
from mathutils import Vector

from tests.support.blender_helpers import addon_module, pin, select_pose_bones, settle, update


@pytest.fixture
def live_metarig(metarig):
    """The metarig with humanoid limits (set on pin), hands pinned, solved once."""
    targets = pin(metarig, "hand.L", "hand.R")
    targets["hand.L"].location.z += 0.02
    update()
    rig = addon_module("ewbik_addon.bridge.rig_cache").cached_rig(metarig)
    assert rig is not None and rig.limits is not None
    return metarig, targets, rig


def kusudama(rig, bone):
    return rig.limits.kusudamas[rig.skeleton.index[bone]]


def edit_and_update(targets, edit):
    edit()
    targets["hand.L"].location.z += 0.01
    update()


def test_a_stiffness_edit_keeps_the_joint_limits(live_metarig):
    metarig, targets, rig = live_metarig
    limits = rig.limits
    edit_and_update(targets, lambda: setattr(metarig.pose.bones["spine.001"].ewbik, "stiffness", 0.5))
    assert rig.stiffness[rig.skeleton.index["spine.001"]] == pytest.approx(0.5)
    assert rig.limits is limits


def test_a_comfort_edit_reaches_the_solver(live_metarig):
    metarig, targets, rig = live_metarig
    edit_and_update(targets, lambda: setattr(metarig.pose.bones["forearm.L"].bone.ewbik, "comfort", 0.5))
    assert kusudama(rig, "forearm.L").comfort == pytest.approx(0.5)
    assert rig.limit_dicts["forearm.L"]["comfort"] == pytest.approx(0.5)
    assert kusudama(rig, "forearm.R").comfort == 0.0


def test_a_cone_edit_rebuilds_only_the_edited_bone(live_metarig):
    metarig, targets, rig = live_metarig
    before = dict(rig.limits.kusudamas)
    cone = metarig.pose.bones["upper_arm.L"].bone.ewbik.cones[0]
    edit_and_update(targets, lambda: setattr(cone, "radius", 0.3))
    assert kusudama(rig, "upper_arm.L").cones[0].radius == pytest.approx(0.3)
    assert rig.limit_dicts["upper_arm.L"]["cones"][0]["radius"] == pytest.approx(0.3)
    unchanged = [i for i, k in rig.limits.kusudamas.items() if k is before[i]]
    assert len(unchanged) == len(before) - 1
    assert rig.skeleton.index["upper_arm.L"] not in unchanged


def swing(pose_bone):
    """How far the bone points from its rest direction (radians)."""
    return (pose_bone.matrix_basis.to_quaternion() @ Vector((0.0, 1.0, 0.0))).angle(Vector((0.0, 1.0, 0.0)))


def test_a_cone_narrowed_while_live_holds_in_the_next_solve(live_metarig):
    """The limits live on the armature data's bones: editing one tags the data, and the next
    live update rescans and solves with the new cone."""
    metarig, targets, _rig = live_metarig
    metarig.ewbik.strict_limits = True
    upper_arm = metarig.pose.bones["upper_arm.L"]
    targets["hand.L"].location += Vector((0.0, -0.25, 0.3))
    update()
    settle()
    assert swing(upper_arm) > math.radians(12.0)

    def narrow():
        cones = upper_arm.bone.ewbik.cones
        cones.clear()
        cone = cones.add()
        cone.direction, cone.radius = (0.0, 1.0, 0.0), math.radians(5.0)

    edit_and_update(targets, narrow)
    settle()
    assert swing(upper_arm) <= math.radians(5.0) + 1e-3


def test_limit_operators_while_live_reach_the_next_solve(live_metarig):
    """Reset, preset and mirror write the bones' limits; the next live update solves with them."""
    metarig, targets, rig = live_metarig
    select_pose_bones(metarig, ["forearm.L"])
    metarig.data.bones.active = metarig.data.bones["forearm.L"]
    edit_and_update(targets, bpy.ops.ewbik.reset_limits)
    assert "forearm.L" not in rig.limit_dicts
    edit_and_update(targets, lambda: bpy.ops.ewbik.apply_limit_preset(preset="humanoid", only_selected=True))
    assert "forearm.L" in rig.limit_dicts
    metarig.data.bones["forearm.L"].ewbik.cones[0].radius = 0.2
    edit_and_update(targets, bpy.ops.ewbik.mirror_limits)
    assert rig.limit_dicts["forearm.R"]["cones"][0]["radius"] == pytest.approx(0.2)
