"""A bone-setting edit while live: the next update sees exactly what changed, and the joint limits
are rebuilt only when some bone's limits did."""

import pytest

from tests.support.blender_helpers import addon_module, pin, update


@pytest.fixture
def live_metarig(metarig):
    """The metarig with humanoid limits (set on pin), hands pinned, solved once."""
    targets = pin(metarig, "hand.L", "hand.R")
    targets["hand.L"].location.z += 0.02
    update()
    rig = addon_module("ewbik_addon.rig_cache").cached_rig(metarig)
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
