"""Cone directions as flex/abduct angles from the bone's rest direction, in the body's terms, for
the sidebar.

A cone's direction is stored in the bone's rest frame (+Y is the rest direction). Animators read a
swing from the rest pose in the body's words: flex brings the bone forward (the armature's -Y, as
Blender's Front view sees a character), abduct brings it out, away from the body's midline, or up
when the bone already points out (an arm in a T-pose). Flex 0, abduct 0 is the rest direction:
direction = cos(abduct) (cos(flex) rest + sin(flex) forward) + sin(abduct) out, where forward is
the body's front as seen across the bone and out is square to both. These are views of the stored
direction, not stored themselves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mathutils import Matrix, Vector

from ..com.stored_settings import stored_bone_limits

if TYPE_CHECKING:
    import bpy

FRONT = Vector((0.0, -1.0, 0.0))
UP = Vector((0.0, 0.0, 1.0))
LEFT = Vector((1.0, 0.0, 0.0))  # a character facing Blender's front view has its left side at +X
MIDLINE = 1e-4  # bones whose centre lies this close to x = 0 (x their length) are on the midline


def body_axes(bone: bpy.types.Bone) -> Matrix:
    """Rows: the bone's out, rest and forward directions, in its rest frame."""
    to_bone = bone.matrix_local.to_3x3().normalized().transposed()
    rest = Vector((0.0, 1.0, 0.0))
    front = to_bone @ FRONT
    forward = front - rest * front.y
    if forward.length < 1e-6:  # the bone points straight forward or back: flex tilts it up
        up = to_bone @ UP
        forward = up - rest * up.y
    forward.normalize()
    out = rest.cross(forward)
    centre_x = (bone.head_local.x + bone.tail_local.x) / 2.0
    side = -LEFT if centre_x < -MIDLINE * bone.length else LEFT
    if out.dot(to_bone @ (side + UP)) < 0.0:
        out.negate()
    return Matrix((out, rest, forward))


def flex_abduct(bone: bpy.types.Bone, direction: Sequence[float]) -> tuple[float, float]:
    """(flex, abduct) radians of a rest-frame direction, from the bone's rest direction."""
    out, along, forward = (body_axes(bone) @ Vector(direction)).normalized()
    return math.atan2(forward, along), math.atan2(out, math.hypot(along, forward))


def direction_from(bone: bpy.types.Bone, flex: float, abduct: float) -> Vector:
    """The rest-frame unit direction with this flex and abduct."""
    in_body = Vector((math.sin(abduct), math.cos(abduct) * math.cos(flex), math.cos(abduct) * math.sin(flex)))
    return body_axes(bone).transposed() @ in_body


def cone_bone(cone: bpy.types.PropertyGroup) -> bpy.types.Bone:
    """The Bone owning a `Bone.ewbik.cones` item (RNA gives such nested items no path back)."""
    address = cone.as_pointer()
    for bone in cone.id_data.bones:
        limits = stored_bone_limits(bone)
        if limits is not None and any(item.as_pointer() == address for item in limits.cones):
            return bone
    raise ValueError("cone belongs to no bone of its armature")
