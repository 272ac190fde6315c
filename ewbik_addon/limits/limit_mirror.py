"""Joint limits carried to the bone on the other side of the body (L <-> R by name).

A bone's partner is named as Blender's own mirror tools name it (`.L`/`.R`, `_L`/`_R`,
`Left`/`Right`, ...), also behind a namespace such as Mixamo's `mixamorig:LeftArm`. Limits are
carried through the armature's X mirror: a rest-frame direction d of the source becomes
R_target^T S R_source d (S flips armature X, R the bones' rest orientations), and since a mirror
reverses turning, the twist range [min, max] becomes [-max, -min] (`mirror_maths`, without Blender).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import bpy
from mathutils import Matrix, Vector

from . import mirror_maths

_FLIP_X = Matrix.Diagonal((-1.0, 1.0, 1.0))


def mirror_name(name: str) -> str:
    """The other side's bone name, or the same name for a bone in the middle."""
    return mirror_maths.mirror_name(name, bpy.utils.flip_name)


def mirror_bone(obj: bpy.types.Object, pose_bone: bpy.types.PoseBone) -> bpy.types.PoseBone | None:
    """The pose bone on the other side, or None (a middle bone, or no bone of that name)."""
    name = mirror_name(pose_bone.name)
    return obj.pose.bones.get(name) if name != pose_bone.name else None


def mirrored_limits(source: bpy.types.Bone, target: bpy.types.Bone, limits: dict[str, Any]) -> dict[str, Any]:
    """A limits dict of Bone `source` as it reads on Bone `target`, its mirror image."""
    carry = (
        target.matrix_local.to_3x3().normalized().transposed()
        @ _FLIP_X
        @ source.matrix_local.to_3x3().normalized()
    )
    return mirror_maths.mirrored_limits(
        limits, lambda direction: tuple((carry @ Vector(direction)).normalized())
    )


def mirror_pairs(
    obj: bpy.types.Object, pose_bones: Iterable[bpy.types.PoseBone]
) -> tuple[list[tuple[bpy.types.PoseBone, bpy.types.PoseBone]], list[str]]:
    """[(source, target)] for the bones that have a partner; [names] of those that have none."""
    pairs, alone = [], []
    for pose_bone in pose_bones:
        partner = mirror_bone(obj, pose_bone)
        if partner is None:
            alone.append(pose_bone.name)
        else:
            pairs.append((pose_bone, partner))
    return pairs, alone
