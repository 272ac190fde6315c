"""ewbik_addon/limits/body_angles.py: cone directions as flex and abduct in the body's terms, on
the Rigify metarig (facing -Y, its left at +X)."""

import math

import pytest
from mathutils import Vector

from tests.support.blender_helpers import addon_module
from tests.support.limit_rigs import set_cones


@pytest.fixture
def body_angles():
    return addon_module("ewbik_addon.limits.body_angles")


def world_direction(bone, direction):
    return (bone.matrix_local.to_3x3().normalized() @ Vector(direction)).normalized()


@pytest.mark.parametrize("name", ["upper_arm.L", "upper_arm.R", "thigh.L", "shin.R", "spine.003"])
def test_angles_and_directions_are_each_others_inverse(metarig, body_angles, name):
    bone = metarig.data.bones[name]
    assert body_angles.flex_abduct(bone, (0.0, 1.0, 0.0)) == pytest.approx((0.0, 0.0), abs=1e-6)
    for flex, abduct in ((0.4, 0.0), (-0.7, 0.3), (1.2, -0.5)):
        direction = body_angles.direction_from(bone, flex, abduct)
        assert direction.length == pytest.approx(1.0)
        assert body_angles.flex_abduct(bone, direction) == pytest.approx((flex, abduct), abs=1e-5)


@pytest.mark.parametrize("name, side", [("thigh.L", 1.0), ("thigh.R", -1.0)])
def test_flex_brings_a_leg_forward_and_abduct_out_from_the_midline(metarig, body_angles, name, side):
    bone = metarig.data.bones[name]
    rest = world_direction(bone, (0.0, 1.0, 0.0))
    forward = world_direction(bone, body_angles.direction_from(bone, math.radians(30.0), 0.0))
    out = world_direction(bone, body_angles.direction_from(bone, 0.0, math.radians(30.0)))
    assert forward.y < rest.y - 0.3  # toward the armature's -Y, the character's front
    assert side * out.x > side * rest.x + 0.3  # away from x = 0


def test_a_cone_is_found_on_the_bone_that_owns_it(metarig, body_angles):
    set_cones(metarig.pose.bones["forearm.R"], ((0.0, 1.0, 0.0), 0.4), ((1.0, 0.0, 0.0), 0.2))
    cone = metarig.data.bones["forearm.R"].ewbik.cones[1]
    assert body_angles.cone_bone(cone) == metarig.data.bones["forearm.R"]
