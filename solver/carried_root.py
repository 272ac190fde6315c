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

The rigid fit leaves the hips where the whole body would put them, and a body that folds does
not move as one: a squat drops the head and the hips but not the feet. Where the root sees a
head pin with a turn and one or more foot pins (bones named so, `presets.bone_roles`) and no pin
on the trunk between them, the torso itself places the root (`_torso_place`): the hips hang from
the head's target a trunk's length away (the start's root-to-head distance), in the direction
the head's turn carries the start's trunk, swung toward the feet by half the turn that takes
the line from head to feet, as the head's turn carries it, to where the targets put it (the
neck, the hips and the knees take the rest of that swing). The root then takes that place and
the turn that lines its trunk up with it, in the same share, and the solve's stages keep it
there (`places_roots`), so the legs and the spine fold about it before the root moves again;
every frame of CMU capture solved from the clip's first frame put the hips 41 mm from the
actor's, against 66 with the rigid fit alone.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from . import floats, quat
from .presets import bone_roles
from .qcp import rotation_from_covariance

if TYPE_CHECKING:
    from .pins import Pin
    from .skeleton import Levels, Skeleton

FULL_CARRY = 0.3  # how far most of a root's pins miss, in rig units, from which it takes their whole motion
NO_CARRY = 1e-4  # ... and below which it takes none (targets made at the bones, in float32, miss by 1e-7)
# skeleton -> {(root, pinned bones): head and feet among them (`_torso_layout`)}
_kept_torso: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
FOOT_ROLES = ("foot.L", "foot.R", "toes.L", "toes.R")


def carry_roots(
    skeleton: Skeleton,
    pins: Sequence[Pin],
    rotations: np.ndarray,
    locations: np.ndarray,
    roots: Sequence[tuple[int, np.ndarray, np.ndarray]],
    levels: Levels,
    stiffness: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(rotations, locations) of the start with each root of `roots` carried with its pins.

    roots: (root bone, indices of the pins it sees (P,), their falloff factors (P,)) per
    translating root, as `plan.plan_solve` finds them; levels: the forward-kinematics levels
    of the pinned bones and their ancestors. The inputs are not modified.
    """
    if not roots:
        return rotations, locations
    pinned = tuple(sorted(skeleton.index[pin.bone] for pin in pins))
    world, heads = _start_frames(skeleton, pinned, rotations, locations, levels)
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
        torso = _torso_pins(skeleton, root, chosen)
        if torso is not None:
            turn, place = _torso_place(chosen, weights, torso, turn, world, heads, bones, root)
        turn = quat.part_way(quat.IDENTITY, turn, share)
        if torso is None:
            moved_head = pivot + quat.rotate(turn, heads[root] - pivot) + share * shift
        else:
            moved_head = heads[root] + share * (place - heads[root])
        rest = skeleton.rest_rotation[root]
        local_turn = quat.multiply(quat.conjugate(rest), quat.multiply(turn, rest))
        rotations[root] = quat.normalize(quat.multiply(local_turn, rotations[root]))
        locations[root] += quat.rotate(quat.conjugate(rest), moved_head - heads[root])
    return rotations, locations


def places_roots(
    skeleton: Skeleton, pins: Sequence[Pin], roots: Sequence[tuple[int, np.ndarray, np.ndarray]]
) -> bool:
    """Whether the torso places some root of `roots` (`carry_roots`'s) rather than the rigid fit:
    the solve's stages then keep that root's head where the carry put it."""
    return any(_torso_pins(skeleton, root, [pins[p] for p in seen]) is not None for root, seen, _ in roots)


def _torso_pins(skeleton: Skeleton, root: int, pins: Sequence[Pin]) -> tuple[int, list[int]] | None:
    """(head pin's place in `pins`, foot pins' places) when `pins` (those `root` sees) hold a
    head with a turn and at least one foot, and none lies on the root or the trunk between it
    and the head; else None."""
    at_head, feet = _torso_layout(skeleton, root, tuple(skeleton.index[pin.bone] for pin in pins))
    if at_head < 0:
        return None
    head = pins[at_head]
    feet = [p for p in feet if pins[p].weight > 0.0]
    if not (feet and head.weight > 0.0 and max(head.orientation_weights) > 0.0):
        return None
    return at_head, feet


def _torso_layout(skeleton: Skeleton, root: int, bones: tuple[int, ...]) -> tuple[int, list[int]]:
    """(place of the head among `bones` or -1, places of the feet) for `_torso_pins`, kept per
    skeleton, root and pinned bones (a live drag asks every update). The head is the one of the
    root's own body (a crowd's skeleton holds one per armature)."""
    kept = _kept_torso.setdefault(skeleton, {})
    key = (root, bones)
    if key not in kept:
        if "" not in kept:
            roles = bone_roles(skeleton.names)
            heads = [skeleton.index[name] for name, role in roles.items() if role == "head"]
            feet = {skeleton.index[name] for name, role in roles.items() if role in FOOT_ROLES}
            kept[""] = (heads, feet)
        heads, feet = kept[""]
        own = [h for h in heads if skeleton.root_of[h] == skeleton.root_of[root]]
        head = own[0] if len(own) == 1 else -1
        trunk = skeleton.ancestors(head)[1:] if head >= 0 else []
        layout: tuple[int, list[int]] = (-1, [])
        if head in bones and root in trunk and not set(trunk).intersection(bones):
            layout = (bones.index(head), [p for p, bone in enumerate(bones) if bone in feet])
        kept[key] = layout
    return kept[key]


def _torso_place(
    pins: Sequence[Pin],
    weights: np.ndarray,
    torso: tuple[int, list[int]],
    turn: np.ndarray,
    world: np.ndarray,
    heads: np.ndarray,
    bones: Sequence[int],
    root: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(turn, root head) of the root placed by the torso: its head a trunk's length from the head
    pin's target, in the direction the head's turn carries the start's trunk swung toward the
    feet by half the turn that takes the line from head to feet, so carried, to where the
    targets put it; its turn the rigid fit's `turn`, then the shortest turn lining the trunk
    (root to head) up with that place."""
    at_head, feet = torso
    head = bones[at_head]
    target = pins[at_head].target_position
    head_turn = quat.to_matrix(pins[at_head].target_rotation) @ world[head].T
    foot_weights = weights[feet] / weights[feet].sum()
    feet_start = foot_weights @ heads[[bones[p] for p in feet]]
    feet_target = foot_weights @ np.array([pins[p].target_position for p in feet])
    carried_feet = _unit(head_turn @ (feet_start - heads[head]))
    bisector = _unit(carried_feet + _unit(feet_target - target))
    place = target + _arc_turned(carried_feet, bisector, head_turn @ (heads[root] - heads[head]))
    carried_trunk = _unit(quat.rotate(turn, heads[head] - heads[root]))
    trunk = _unit(target - place)
    if float(carried_trunk @ trunk) > -0.999:
        arc = floats.arc(carried_trunk.tolist(), trunk.tolist())
        turn = quat.normalize(quat.multiply(np.array(arc), turn))
    return turn, place


def _unit(v: np.ndarray) -> np.ndarray:
    length = np.sqrt(v @ v)
    return v / length if length > 1e-300 else v


def _arc_turned(a: np.ndarray, b: np.ndarray, v: np.ndarray) -> np.ndarray:
    """v turned by the shortest turn taking unit a to unit b (none when they are opposite)."""
    dot = float(a @ b)
    if dot <= -0.999:
        return v
    axis = _cross(a, b)
    return v * dot + _cross(axis, v) + axis * (axis @ v) / (1.0 + dot)


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a x b of two 3-vector arrays (np.cross costs ten times as much on one pair)."""
    return np.array(floats.cross(a.tolist(), b.tolist()))


def _start_frames(
    skeleton: Skeleton, bones: tuple[int, ...], rotations: np.ndarray, locations: np.ndarray, levels: Levels
) -> tuple[np.ndarray, np.ndarray]:
    """World frames (N, 3, 3) and heads (N, 3) of the start's pinned chains (`levels`, those of
    the pinned `bones`), not to be modified; kept (`Skeleton.kept`): measuring the pose
    underneath again cost more than the rest of the carry."""

    def frames() -> tuple[np.ndarray, np.ndarray]:
        n = len(skeleton)
        world, heads = np.empty((n, 3, 3)), np.empty((n, 3))
        skeleton.forward_into(rotations, locations, world, heads, levels)
        return world, heads

    return skeleton.kept(("chain frames", bones, rotations.tobytes(), locations.tobytes()), frames)


def _miss(pins: Sequence[Pin], weights: np.ndarray, effectors: np.ndarray) -> float:
    """How far most of the pins are from their targets (armature units): the smallest distance
    within which pins of more than half the weight lie (an order statistic of the distances, so
    continuous in them)."""
    targets = np.array([pin.target_position for pin in pins])
    distances = np.linalg.norm(targets - effectors, axis=-1)
    order = np.argsort(distances, kind="stable")
    held = np.cumsum(weights[order]) > 0.5 * weights.sum()
    return float(distances[order][np.argmax(held)]) if held.any() else 0.0


def _rigid_fit(
    pins: Sequence[Pin], weights: np.ndarray, effector_axes: np.ndarray, effectors: np.ndarray, unit: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
