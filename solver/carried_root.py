"""The start's translating roots carried with their pins: the body first moves as one.

A translating root (the hips) is solved last in every sweep, after the limbs have bent toward
the targets, so it only takes what the limbs leave over: the hips drift wherever the sweeps'
road leaves them. Hands and head dragged 40 cm down fold the spine over straight legs with the
hips pushed 37 cm back; both hands dragged to the floor tip the body over its feet; on motion
capture with the hips free they end 126 mm from the actor's on average.

So before anything bends, each translating root that some pin moves takes the rigid motion
(a turn about the pins' weighted centre, then a shift) that best carries its pins from where
the start pose puts them to their targets: the weighted fit of the root's own bone step (the
seven points per pin, positions in rig units), in one step and without dampening. Feet that
stay and hands and head that drop carry the hips down between them, and the legs bend; the
feet's and hands' axes, where they keep their turn, keep the body from tipping over. The
carried pose is a smooth function of the pose underneath and the targets (QCP's bias toward
the smallest turn settles the rotation of one or two position-only pins), so the solve stays
one pose per set of targets. A root's stiffness keeps that share of it in place.

Near targets, or one pin dragged alone, are another matter: a hand nudged, or a walk followed frame
by frame, moves the limbs more than the trunk, and a hand dragged with the feet, the head and the
other hand held moves that arm, not the body (carried a fifth of the hand's way, the straight legs
crawled back to the feet: 139 iterations, 16 ms against 9). So a root takes the share
(miss - NO_CARRY) / (FULL_CARRY - NO_CARRY) (within [0, 1]) of the motion, `miss` being how far
most of its pins are from their targets (the smallest distance within which pins of more than
half the weight lie), in rig units: when most pins went far the body moves as one, when one
went alone or all went a little, barely (on CMU capture solved frame after frame the whole carry
put the hips 124 mm from the actor's, against 82 without it and 86 with the share).
"""

import weakref

import numpy as np

from . import quat
from .qcp import rotation_from_covariance

FULL_CARRY = 0.3  # how far most of a root's pins miss, in rig units, from which it takes their whole motion
NO_CARRY = 1e-4  # ... and below which it takes none (targets made at the bones, in float32, miss by 1e-7)
# skeleton -> (levels, start pose, world, heads) of the last start measured (`_start_frames`)
_kept_frames: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def carry_roots(skeleton, pins, rotations, locations, roots, levels, stiffness):
    """(rotations, locations) of the start with each root of `roots` carried with its pins.

    roots: (root bone, indices of the pins it sees (P,), their falloff factors (P,)) per
    translating root, as `solve.plan_solve` finds them; levels: the forward-kinematics levels
    of the pinned bones and their ancestors. The inputs are not modified.
    """
    if not roots:
        return rotations, locations
    world, heads = _start_frames(skeleton, rotations, locations, levels)
    rotations, locations = rotations.copy(), locations.copy()
    for root, seen, factor in roots:
        chosen = [pins[p] for p in seen]
        bones = [skeleton.index[pin.bone] for pin in chosen]
        weights = np.array([pin.weight for pin in chosen]) * factor
        miss = _miss(chosen, weights, heads[bones]) / skeleton.unit
        share = (1.0 - stiffness[root]) * np.clip((miss - NO_CARRY) / (FULL_CARRY - NO_CARRY), 0.0, 1.0)
        if not share > 0.0:
            continue
        turn, pivot, shift = _rigid_fit(chosen, weights, world[bones], heads[bones], skeleton.unit)
        turn = quat.from_axis_angle(turn[1:] if turn[0] >= 0.0 else -turn[1:], share * quat.angle(turn))
        moved_head = pivot + quat.rotate(turn, heads[root] - pivot) + share * shift
        rest = skeleton.rest_rotation[root]
        local_turn = quat.multiply(quat.conjugate(rest), quat.multiply(turn, rest))
        rotations[root] = quat.normalize(quat.multiply(local_turn, rotations[root]))
        locations[root] += quat.rotate(quat.conjugate(rest), moved_head - heads[root])
    return rotations, locations


def _start_frames(skeleton, rotations, locations, levels):
    """World frames (N, 3, 3) and heads (N, 3) of the start's pinned chains (`levels`), not to be
    modified. The last ones are kept per skeleton: a live drag solves every update from the same
    pose underneath, and measuring it again cost more than the rest of the carry."""
    pose = (rotations.tobytes(), locations.tobytes())
    kept = _kept_frames.get(skeleton)
    if kept is not None and kept[0] is levels and kept[1] == pose:
        return kept[2], kept[3]
    n = len(skeleton)
    world, heads = np.empty((n, 3, 3)), np.empty((n, 3))
    skeleton.forward_into(rotations, locations, world, heads, levels)
    _kept_frames[skeleton] = (levels, pose, world, heads)
    return world, heads


def _miss(pins, weights, effectors):
    """How far most of the pins are from their targets (armature units): the smallest distance
    within which pins of more than half the weight lie (an order statistic of the distances, so
    continuous in them)."""
    targets = np.array([pin.target_position for pin in pins])
    distances = np.linalg.norm(targets - effectors, axis=-1)
    order = np.argsort(distances, kind="stable")
    held = np.cumsum(weights[order]) > 0.5 * weights.sum()
    return float(distances[order][np.argmax(held)]) if held.any() else 0.0


def _rigid_fit(pins, weights, effector_axes, effectors, unit):
    """(turn quaternion, pivot, shift): the weighted rigid motion taking the pinned bones' heads
    `effectors` (P, 3) and axes (P, 3, 3, columns) to their targets, a turn about the effectors'
    weighted centre `pivot` and then a shift (armature units). Weights as a bone step's, with
    positions in rig units (`unit`): the origin weighs w (1 + 2 sum w_axis), each axis 2 w w_axis."""
    axis_weights = 2.0 * weights[:, None] * np.array([pin.orientation_weights for pin in pins])
    origin_weights = weights + axis_weights.sum(-1)
    targets = np.array([pin.target_position for pin in pins])
    total = max(origin_weights.sum(), 1e-300)
    pivot = origin_weights @ effectors / total
    centre = origin_weights @ targets / total
    covariance = (origin_weights[:, None] * (effectors - pivot)).T @ (targets - centre) / unit**2
    target_axes = quat.to_matrix(np.array([pin.target_rotation for pin in pins]))
    covariance += np.einsum("pa,pia,pja->ij", axis_weights, effector_axes, target_axes)
    return rotation_from_covariance(covariance), pivot, centre - pivot
