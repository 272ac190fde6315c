"""The start's translating roots carried with their pins: the body first moves as one.

A translating root (the hips) is solved last in every sweep, after the limbs have bent toward
the targets, so it only takes what the limbs leave over: the hips drift wherever the sweeps'
road leaves them. Hands and head dragged 40 cm down fold the spine over straight legs with the
hips pushed 37 cm back; both hands dragged to the floor tip the body over its feet; on motion
capture with the hips free they end 128 mm from the actor's on average.

So before anything bends, each translating root that some pin moves takes the rigid motion
(a turn about the pins' weighted centre, then a shift) that best carries its pins from where
the start pose puts them to their targets: the weighted fit of the root's own bone step (the
seven points per pin, positions in rig units), in one step and without dampening. Feet that
stay and hands and head that drop carry the hips down between them, and the legs bend; the
feet's and hands' axes, where they keep their turn, keep the body from tipping over. The
carried pose is a smooth function of the pose underneath and the targets (QCP's bias toward
the smallest turn settles the rotation of one or two position-only pins), so the solve stays
one pose per set of targets. A root's stiffness keeps that share of it in place.

Near targets are another matter: a hand nudged or a walk followed frame by frame moves the
limbs more than the trunk, and the pins' mean displacement is mostly the limbs'. So a root takes
the share `miss / FULL_CARRY` (at most all) of the motion, `miss` being the pins' weighted RMS
distance from their targets in rig units: targets far from where the start puts the pins move
the body as one, near ones barely (on CMU capture solved frame after frame the whole carry put
the hips 124 mm from the actor's, against 82 without it and 84 with the share).
"""

import numpy as np

from . import quat
from .qcp import rotation_from_covariance

FULL_CARRY = 0.3  # weighted RMS miss of a root's pins, in rig units, from which it takes their whole motion


def carry_roots(skeleton, pins, rotations, locations, roots, levels, stiffness):
    """(rotations, locations) of the start with each root of `roots` carried with its pins.

    roots: (root bone, indices of the pins it sees (P,), their falloff factors (P,)) per
    translating root, as `solve.plan_solve` finds them; levels: the forward-kinematics levels
    of the pinned bones and their ancestors. The inputs are not modified.
    """
    if not roots:
        return rotations, locations
    n = len(skeleton)
    world, heads = np.empty((n, 3, 3)), np.empty((n, 3))
    skeleton.forward_into(rotations, locations, world, heads, levels)
    rotations, locations = rotations.copy(), locations.copy()
    for root, seen, factor in roots:
        chosen = [pins[p] for p in seen]
        bones = [skeleton.index[pin.bone] for pin in chosen]
        weights = np.array([pin.weight for pin in chosen]) * factor
        turn, pivot, shift = _rigid_fit(chosen, weights, world[bones], heads[bones], skeleton.unit)
        share = (1.0 - stiffness[root]) * min(
            1.0, _miss(chosen, weights, heads[bones]) / skeleton.unit / FULL_CARRY
        )
        turn = quat.from_axis_angle(turn[1:] if turn[0] >= 0.0 else -turn[1:], share * quat.angle(turn))
        moved_head = pivot + quat.rotate(turn, heads[root] - pivot) + share * shift
        rest = skeleton.rest_rotation[root]
        local_turn = quat.multiply(quat.conjugate(rest), quat.multiply(turn, rest))
        rotations[root] = quat.normalize(quat.multiply(local_turn, rotations[root]))
        locations[root] += quat.rotate(quat.conjugate(rest), moved_head - heads[root])
    return rotations, locations


def _miss(pins, weights, effectors):
    """The pins' weighted RMS distance from their targets (armature units)."""
    targets = np.array([pin.target_position for pin in pins])
    return np.sqrt(weights @ np.sum((targets - effectors) ** 2, -1) / max(weights.sum(), 1e-300))


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
