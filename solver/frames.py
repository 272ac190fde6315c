"""Forward kinematics for the controls above the loops: world frames and heads of a pose.

`Skeleton.forward_into` walks the bones level by level, a few numpy calls per level; the
controls (`poles`, `reach`, `aim`, `balance`) read a pose once or twice per solve, where those
calls cost more than the arithmetic. Here a chain's frames are prefix products, and a whole
pose's are composed by pointer jumping: each bone keeps the transform from an ancestor's frame
to its own, and each step composes it with that ancestor's and jumps to the ancestor's
ancestor, so a skeleton of depth D takes log2(D) batched steps. Blender's rule, as
`Skeleton.forward`: pose = parent_pose @ (parent_rest^-1 @ rest) @ T(location) @ R(rotation).
"""

import weakref

import numpy as np

from . import quat

_JUMPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # skeleton -> pointer-jumping steps


def pose_frames(skeleton, rotations, locations):
    """World rotation matrices (N, 3, 3) and heads (N, 3) of every bone in a local pose."""
    rest = skeleton.local_rest_matrix
    world = rest @ quat.to_matrix(rotations)
    heads = skeleton.local_offset + (rest @ np.asarray(locations, dtype=float)[..., None])[..., 0]
    for bones, ancestors in _jumps(skeleton):
        above = world[ancestors]
        heads[bones] = heads[ancestors] + (above @ heads[bones][..., None])[..., 0]
        world[bones] = above @ world[bones]
    return world, heads


def _jumps(skeleton):
    """The pointer-jumping steps of `skeleton`, kept per skeleton: per step, the bones whose
    transform is not yet from the armature and the ancestor each composes with."""
    if skeleton not in _JUMPS:
        steps, ancestor = [], np.asarray(skeleton.parents).copy()
        while (ancestor >= 0).any():
            bones = np.flatnonzero(ancestor >= 0)
            steps.append((bones, ancestor[bones]))
            ancestor = ancestor.copy()
            ancestor[bones] = ancestor[ancestor[bones]]
        _JUMPS[skeleton] = steps
    return _JUMPS[skeleton]


def chain_frames(skeleton, rotations, locations, chain):
    """World rotation matrices (C, 3, 3) and heads (C, 3) of the bones of `chain` (a root bone
    and its descendants down to a bone, root first) in a local pose."""
    rest = skeleton.local_rest_matrix[chain]
    world = rest @ quat.to_matrix(rotations[chain])
    offset = skeleton.local_offset[chain] + (rest @ locations[chain][..., None])[..., 0]
    step = 1
    while step < len(chain):  # prefix products in log2(C) batched steps
        world[step:] = world[:-step] @ world[step:]
        step *= 2
    steps = np.empty_like(offset)
    steps[0], steps[1:] = offset[0], (world[:-1] @ offset[1:, :, None])[..., 0]
    return world, np.cumsum(steps, axis=0)
