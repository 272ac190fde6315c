"""Rigs and helpers shared by the limit-editing tests: a Mixamo-named armature, cones, poses."""

import math

import bpy
from mathutils import Matrix, Quaternion, Vector

from tests.support.blender_helpers import build_armature

Y = Vector((0.0, 1.0, 0.0))
MIXAMO_BONES = (
    ("mixamorig:Hips", None, (0.0, 0.0, 1.0), (0.0, 0.0, 1.1)),
    ("mixamorig:Spine", "mixamorig:Hips", (0.0, 0.0, 1.1), (0.0, 0.0, 1.4)),
    ("mixamorig:LeftArm", "mixamorig:Spine", (0.2, 0.0, 1.4), (0.45, 0.05, 1.35)),
    ("mixamorig:LeftForeArm", "mixamorig:LeftArm", (0.45, 0.05, 1.35), (0.7, 0.0, 1.3)),
    ("mixamorig:RightArm", "mixamorig:Spine", (-0.2, 0.0, 1.4), (-0.45, 0.05, 1.35)),
    ("mixamorig:RightForeArm", "mixamorig:RightArm", (-0.45, 0.05, 1.35), (-0.7, 0.0, 1.3)),
)


def build_mixamo_rig():
    """A small armature named as Mixamo names bones, left and right mirror images (rolls too)."""
    bones = [
        (name, parent, head, tail, 0.3 if "Left" in name else -0.3)
        for name, parent, head, tail in MIXAMO_BONES
    ]
    obj = build_armature("mixamo", bones)
    bpy.ops.object.mode_set(mode="POSE")
    return obj


def is_limited(pose_bone):
    """Whether the bone has any stored limit: a cone or a twist range."""
    return len(pose_bone.bone.ewbik.cones) > 0 or pose_bone.bone.ewbik.use_twist_limit


def set_cones(pose_bone, *cones, twist=None):
    settings = pose_bone.bone.ewbik
    settings.cones.clear()
    for direction, radius in cones:
        cone = settings.cones.add()
        cone.direction = Vector(direction).normalized()
        cone.radius = radius
    settings.use_twist_limit = twist is not None
    if twist is not None:
        settings.twist_min, settings.twist_max = twist


def pose_rotation(pose_bone, rotation):
    pose_bone.rotation_mode = "QUATERNION"
    pose_bone.rotation_quaternion = rotation
    bpy.context.view_layer.update()


def rest_under_parent(obj, pose_bone):
    """Blender's own world matrix of the bone with no rotation of its own: the limits' frame."""
    saved = pose_bone.rotation_quaternion.copy(), pose_bone.rotation_mode
    pose_rotation(pose_bone, Quaternion())
    frame = obj.matrix_world @ pose_bone.matrix
    pose_bone.rotation_mode = saved[1]
    pose_bone.rotation_quaternion = saved[0]
    bpy.context.view_layer.update()
    return frame


def look_at(eye, target):
    """View matrix of a camera at `eye` looking at `target`."""
    forward = (Vector(target) - Vector(eye)).normalized()
    right = forward.cross(forward.orthogonal()).normalized()
    up = right.cross(forward)
    rotation = Matrix((right, up, -forward)).to_4x4()
    return rotation @ Matrix.Translation(-Vector(eye))


def perspective(fov, aspect, near, far):
    f = 1.0 / math.tan(fov / 2.0)
    return Matrix(
        (
            (f / aspect, 0.0, 0.0, 0.0),
            (0.0, f, 0.0, 0.0),
            (0.0, 0.0, (far + near) / (near - far), 2.0 * far * near / (near - far)),
            (0.0, 0.0, -1.0, 0.0),
        )
    )
