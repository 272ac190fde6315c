"""Cone directions as flex/abduct angles relative to the parent bone, for the sidebar.

A cone's direction is stored in the bone's rest frame; animators think of "bend forward 40,
out 15" from the parent. The direction is turned into the parent's rest frame (the bone's rest
relative to its parent's rest; a root bone uses its own) and read as: flex = turn about the
parent's X axis, abduct = turn about its Z axis, i.e. direction = Rx(flex) Rz(abduct) +Y =
(-sin abduct, cos abduct cos flex, cos abduct sin flex). These are views of the stored direction,
not stored themselves.
"""

import math

from mathutils import Matrix, Vector


def to_parent(bone):
    """3x3 rotation from the bone's rest frame to its parent's rest frame (identity for a root)."""
    if bone.parent is None:
        return Matrix.Identity(3)
    return (bone.parent.matrix_local.inverted() @ bone.matrix_local).to_3x3().normalized()


def flex_abduct(bone, direction):
    """(flex, abduct) radians of a rest-frame direction, relative to the bone's parent."""
    x, y, z = (to_parent(bone) @ Vector(direction)).normalized()
    return math.atan2(z, y), math.atan2(-x, math.hypot(y, z))


def direction_from(bone, flex, abduct):
    """The rest-frame unit direction whose flex/abduct relative to the parent are these."""
    in_parent = Vector(
        (-math.sin(abduct), math.cos(abduct) * math.cos(flex), math.cos(abduct) * math.sin(flex))
    )
    return to_parent(bone).transposed() @ in_parent


def cone_bone(cone):
    """The Bone owning a `PoseBone.ewbik.cones` item (RNA gives such nested items no path back)."""
    address = cone.as_pointer()
    for pose_bone in cone.id_data.pose.bones:
        if any(item.as_pointer() == address for item in pose_bone.ewbik.cones):
            return pose_bone.bone
    raise ValueError("cone belongs to no bone of its armature")
