"""A rig in centimetres under an object scale of 0.01 and a quarter turn (the FBX layout) poses
exactly like the same rig in metres."""

import math

import bpy
import pytest
from mathutils import Vector

from tests.support.blender_helpers import (
    HANDS_FEET_HEAD,
    bone_world,
    build_metarig,
    pin,
    solve_fully_on_update,
    update,
)

LIFTED = "foot.L"


def fbx_layout(obj):
    """Bake a quarter turn about -X and a scale of 100 into the armature, then undo both on the
    object: the bones are in centimetres, Y up, and the world pose is unchanged."""
    bpy.ops.object.mode_set(mode="OBJECT")
    obj.rotation_euler = (-math.pi / 2, 0.0, 0.0)
    obj.scale = (100.0, 100.0, 100.0)
    bpy.ops.object.transform_apply(location=False, rotation=True, scale=True)
    obj.rotation_euler = (math.pi / 2, 0.0, 0.0)
    obj.scale = (0.01, 0.01, 0.01)
    update()


def lift_left_foot(obj):
    """Pin hands, feet and head; lift the left foot 35 cm and bring it 20 cm forward in the scene."""
    solve_fully_on_update(obj, 60)
    targets = pin(obj, *HANDS_FEET_HEAD)
    bpy.ops.object.mode_set(mode="OBJECT")
    targets[LIFTED].location += Vector((0.0, -0.2, 0.35))
    update()
    return targets


@pytest.mark.parametrize("layout", ["metres", "fbx"])
def test_a_centimetre_rig_poses_like_the_same_rig_in_metres(layout):
    reference = build_metarig()
    targets = lift_left_foot(reference)
    poses = {name: bone_world(reference, name) for name in reference.pose.bones.keys()}
    errors = {
        bone: (bone_world(reference, bone).translation - targets[bone].matrix_world.translation).length
        for bone in HANDS_FEET_HEAD
    }
    bpy.ops.wm.read_homefile(use_empty=True)
    other = build_metarig()
    if layout == "fbx":
        fbx_layout(other)
        assert max(abs(d) for d in other.data.bones["thigh.L"].head_local) > 5.0  # centimetres
    other_targets = lift_left_foot(other)
    for bone in HANDS_FEET_HEAD:
        error = (bone_world(other, bone).translation - other_targets[bone].matrix_world.translation).length
        assert error == pytest.approx(errors[bone], abs=1e-5), bone
    for name, matrix in poses.items():
        moved = bone_world(other, name)
        assert (moved.translation - matrix.translation).length < 1e-4, name
        assert rotation_angle(moved, matrix) < 1e-3, name
    assert max(errors.values()) < 1e-3


def rotation_angle(a, b):
    """Angle between the rotations of two matrices, whatever their scale (q and -q alike)."""
    angle = (
        a.to_3x3()
        .normalized()
        .to_quaternion()
        .rotation_difference(b.to_3x3().normalized().to_quaternion())
        .angle
    )
    return min(angle, 2.0 * math.pi - angle)
