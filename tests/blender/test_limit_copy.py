"""Mirror and copy limits through their operators, on the Rigify metarig and a Mixamo-named rig.

The oracle of a mirror: a rotation of the source bone is allowed exactly when its mirror image
(conjugated by the armature's X flip, carried into the partner's rest frame) is allowed on the
partner, measured by the solver's own `JointLimits.violation`.
"""

import math

import bpy
import numpy as np
import pytest
from mathutils import Matrix, Quaternion

from tests.support.blender_helpers import addon_module, make_active, select_pose_bones
from tests.support.kusudamas import violations
from tests.support.limit_rigs import build_mixamo_rig, set_cones

LIMITS = (((0.3, 0.9, 0.2), math.radians(35.0)), ((0.9, 0.1, -0.4), math.radians(20.0)))
TWIST = (math.radians(-25.0), math.radians(60.0))


def solver_limits(pose_bone):
    """The JointLimits of the bone's stored limits alone, as the solver reads them."""
    kusudama = addon_module("ewbik_addon.com.limit_settings").kusudama_of(pose_bone.bone.ewbik)
    return addon_module("solver.kusudama").JointLimits({0: kusudama}, 1)


def random_rotations(count, seed):
    rng = np.random.default_rng(seed)
    return [Quaternion(q / np.linalg.norm(q)) for q in rng.normal(size=(count, 4))]


def mirrored(source, target, rotation):
    """The partner's local rotation that is the mirror image of the source's."""
    flip = Matrix.Diagonal((-1.0, 1.0, 1.0))
    carry = (
        target.matrix_local.to_3x3().normalized().inverted()
        @ flip
        @ source.matrix_local.to_3x3().normalized()
    )
    return (carry @ rotation.to_matrix() @ carry.inverted()).to_quaternion()


@pytest.mark.parametrize(
    "rig_kind, left, right",
    [
        ("metarig", "upper_arm.L", "upper_arm.R"),
        ("metarig", "thigh.L", "thigh.R"),
        ("mixamo", "mixamorig:LeftArm", "mixamorig:RightArm"),
    ],
)
def test_mirrored_limits_allow_exactly_the_mirrored_rotations(metarig_factory, rig_kind, left, right):
    rig = metarig_factory(rig_kind)
    source, target = rig.pose.bones[left], rig.pose.bones[right]
    set_cones(source, *LIMITS, twist=TWIST)
    select_pose_bones(rig, [left])
    assert bpy.ops.ewbik.mirror_limits() == {"FINISHED"}
    assert len(target.bone.ewbik.cones) == 2 and target.bone.ewbik.use_twist_limit
    rotations = random_rotations(400, seed=11)
    before = violations(solver_limits(source), [tuple(q) for q in rotations])
    after = violations(
        solver_limits(target), [tuple(mirrored(source.bone, target.bone, q)) for q in rotations]
    )
    assert np.abs(before - after).max() < 1e-4
    assert 0.02 < np.mean(before == 0.0) < 0.98, "the samples fall on both sides"


def test_mirror_reports_bones_without_another_side(metarig):
    make_active(metarig)
    bpy.ops.object.mode_set(mode="POSE")
    set_cones(metarig.pose.bones["spine"], ((0, 1, 0), 0.3))
    set_cones(metarig.pose.bones["forearm.R"], ((0, 1, 0), 0.5))
    select_pose_bones(metarig, ["spine", "forearm.R"])
    assert bpy.ops.ewbik.mirror_limits() == {"FINISHED"}
    assert metarig.pose.bones["forearm.L"].bone.ewbik.cones[0].radius == pytest.approx(0.5)
    assert len(metarig.pose.bones["spine"].bone.ewbik.cones) == 1
    select_pose_bones(metarig, ["spine"])
    assert bpy.ops.ewbik.mirror_limits() == {"CANCELLED"}


@pytest.mark.parametrize(
    "name, other",
    [
        ("upper_arm.L", "upper_arm.R"),
        ("hand_R", "hand_L"),
        ("LeftFoot", "RightFoot"),
        ("mixamorig:LeftArm", "mixamorig:RightArm"),
        ("mixamorig:RightHandIndex1", "mixamorig:LeftHandIndex1"),
        ("thigh.l", "thigh.r"),
        ("spine", "spine"),
        ("mixamorig:Hips", "mixamorig:Hips"),
    ],
)
def test_mirror_names(name, other):
    assert addon_module("ewbik_addon.limits.limit_mirror").mirror_name(name) == other


@pytest.mark.parametrize(
    "rig_kind, source, targets",
    [
        ("metarig", "forearm.L", ["shin.L", "shin.R", "forearm.R"]),
        ("mixamo", "mixamorig:LeftForeArm", ["mixamorig:RightForeArm", "mixamorig:Spine"]),
    ],
)
def test_copy_gives_the_selected_bones_the_active_bones_limits(metarig_factory, rig_kind, source, targets):
    rig = metarig_factory(rig_kind)
    set_cones(rig.pose.bones[source], *LIMITS, twist=TWIST)
    rig.pose.bones[source].bone.ewbik.comfort = 0.3
    select_pose_bones(rig, targets + [source])
    assert bpy.ops.ewbik.copy_limits() == {"FINISHED"}
    limits_dict = addon_module("ewbik_addon.com.limit_settings").limits_dict
    expected = limits_dict(rig.pose.bones[source].bone.ewbik)
    for name in targets:
        assert limits_dict(rig.pose.bones[name].bone.ewbik) == expected
    select_pose_bones(rig, [source])
    assert bpy.ops.ewbik.copy_limits() == {"CANCELLED"}


@pytest.fixture
def metarig_factory(request):
    def make(kind):
        if kind == "mixamo":
            return build_mixamo_rig()
        rig = request.getfixturevalue("metarig")
        make_active(rig)
        bpy.ops.object.mode_set(mode="POSE")
        return rig

    return make
