"""Soft reach: a limb straightens only asymptotically as its target nears full reach.

The bend of a two-bone limb as a function of the distance d from its root joint to its target
is acos-like: its rate grows without bound as d nears the limb's length L, so a target moving
steadily through full reach snaps the limb straight in a frame or two (the "pop"). As in game
"soft IK", within the last `soft` share of L the target is pulled back along the line from the
limb's root joint toward it, to L - s + s (1 - exp(-(d - L + s) / s)) (s = soft x L): the same
distance and rate where the zone begins, L only at infinity, so the bend changes at a bounded
rate. The pins report their miss from their own targets.

The body is solved toward the pins' own targets (staging, giving way, poles and aim as in any
solve), which places each limb's root joint where the rest of the body takes it (a spine that
bends toward a hand, hips that drop). Then, as soft IK runs after the animation it softens,
each limb whose target lies in its soft zone from that root joint is bent again in its own
plane (`poles.bend_direction`: the plane the solve, a pole or the limb's own bend gave it) so
its pinned bone's head meets the softened target, the pinned bone keeping its armature-space
frame: only the limb's three bones turn, and nothing else moves. A limb is left as solved where
another pin hangs from it (the new bend would move that pin) or the solve did not move all three
of its bones (stiffness 1). Joint limits are not consulted for this last bend: it bends the
limb further from straight, by at most the arc that takes its end a soft zone's depth inward.
The answer is a function of the targets, the settings and the start pose, with one solve.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from . import floats
from .poles import bend_direction, own_bend

if TYPE_CHECKING:
    from .pins import Pin
    from .settings import SolverSettings
    from .skeleton import Skeleton
    from .solve import SolveResult

_STRAIGHT_AT_REST = 1e-4  # share of its length below which a limb's rest pose is straight
_LIMBS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # skeleton -> {pins' bones: soft limbs}


def solve_softened(
    solve_pins: Callable[[Sequence[Pin], np.ndarray, np.ndarray], SolveResult],
    skeleton: Skeleton,
    pins: Sequence[Pin],
    rotations: np.ndarray,
    locations: np.ndarray,
    settings: SolverSettings,
) -> SolveResult:
    """The SolveResult of `solve_pins(pins, rotations, locations)` with each limb whose target
    lies in its soft zone bent to meet its softened target, each pin's position error measured
    from its own target."""
    result = solve_pins(pins, rotations, locations)
    if settings.soft_reach > 0.0:
        limbs = _soft_limbs(skeleton, tuple((pin.bone, pin.aim is None) for pin in pins))
        if limbs:
            _soften(skeleton, pins, limbs, result, settings.soft_reach)
    return result


def _soft_limbs(
    skeleton: Skeleton, bones: tuple[tuple[str, bool], ...]
) -> dict[int, tuple[int, int, int, float, np.ndarray]]:
    """The soft limbs of pins on `bones` ((bone name, holds a position) per pin), cached per
    skeleton: {pin index: (upper, lower, end, limb length, own bend)} for each
    position-holding pin whose bone has a parent and a grandparent that are not straight at rest
    (a straight limb has no bend to soften, and its rest pose sits at full reach), and from whose
    upper bone no other pin hangs."""
    known = _LIMBS.setdefault(skeleton, {})
    if bones in known:
        return known[bones]
    ends = [skeleton.index[bone] for bone, _ in bones]
    chains = [skeleton.ancestors(end) for end in ends]
    head = skeleton.rest_head
    limbs = {}
    for k, (end, (_, holds)) in enumerate(zip(ends, bones)):
        limb = skeleton.limb_above(end)
        if not holds or limb is None:
            continue
        upper, lower = limb
        if any(upper in chain for j, chain in enumerate(chains) if j != k):
            continue
        length = np.linalg.norm(head[lower] - head[upper]) + np.linalg.norm(head[end] - head[lower])
        if np.linalg.norm(head[end] - head[upper]) < length * (1.0 - _STRAIGHT_AT_REST):
            own = own_bend(head[upper], head[lower], head[end], skeleton.rest[lower, :3, :3])
            limbs[k] = (upper, lower, end, float(length), own)
    known[bones] = limbs
    return known[bones]


def _soften(
    skeleton: Skeleton,
    pins: Sequence[Pin],
    limbs: Mapping[int, tuple[int, int, int, float, np.ndarray]],
    result: SolveResult,
    soft: float,
) -> None:
    """Bend each limb of `limbs` (`_soft_limbs`) whose target lies in its soft zone from its
    root joint in `result`'s pose so its pinned bone meets the softened target (in place)."""
    moved = result.moved
    rows = [k for k, limb in limbs.items() if moved[limb[0]] and moved[limb[1]] and moved[limb[2]]]
    if not rows:
        return
    world, heads = skeleton.frames(result.rotations, result.locations)
    rotations = None
    for k in rows:
        upper, lower, end, length, own = limbs[k]
        target = pins[k].target_position.tolist()
        root = heads[upper].tolist()
        way = floats.minus(target, root)
        distance = math.sqrt(floats.dot(way, way))
        softened = soft_distance(distance, length, soft)
        if not softened < distance:
            continue
        if rotations is None:
            rotations = result.rotations.copy()
            result.position_errors = result.position_errors.copy()
        point = [r + w * softened / distance for r, w in zip(root, way)]
        reached = _bend_limb(skeleton, world, heads, rotations, (upper, lower, end), own, point)
        if reached is not None:
            miss = floats.minus(reached, target)
            result.position_errors[k] = math.sqrt(floats.dot(miss, miss))
    if rotations is not None:
        result.rotations = rotations


def _bend_limb(
    skeleton: Skeleton,
    world: np.ndarray,
    heads: np.ndarray,
    rotations: np.ndarray,
    limb: tuple[int, int, int],
    own: np.ndarray,
    point: Sequence[float],
) -> list[float] | None:
    """Turn a two-bone limb (upper, lower, end) so its end's head goes to `point` (or as near as
    the limb reaches along the way there), in its own bend plane (`poles.bend_direction` with
    `own`, the limb's own bend in its lower bone's frame), the end keeping its armature-space
    frame; `world`, `heads` the pose's frames (`Skeleton.frames`, not updated), `rotations`
    (N, 4) changed in place. Returns where the end's head went, or None where the limb has no
    bend plane (folded onto its root, or the way along its bend). The few 3-vectors and
    quaternions are worked on floats: numpy costs more per call than their arithmetic."""
    upper, lower, end = limb
    root, middle, tip = heads[upper].tolist(), heads[lower].tolist(), heads[end].tolist()
    way = floats.minus(list(point), root)
    distance = math.sqrt(floats.dot(way, way))
    direction = bend_direction(root, middle, tip, world[lower] @ own)
    if direction is None or not distance > 0.0:
        return None
    along = [w / distance for w in way]
    bend = direction.tolist()
    bend = floats.minus(bend, [floats.dot(bend, along) * a for a in along])
    bend_length = math.sqrt(floats.dot(bend, bend))
    if not bend_length > 1e-9:
        return None
    first, second = floats.minus(middle, root), floats.minus(tip, middle)
    upper_length, lower_length = math.sqrt(floats.dot(first, first)), math.sqrt(floats.dot(second, second))
    reach = min(max(distance, abs(upper_length - lower_length)), upper_length + lower_length)
    cosine = (upper_length**2 + reach**2 - lower_length**2) / (2.0 * upper_length * reach)
    cosine = min(1.0, max(-1.0, cosine))
    sine = math.sqrt(1.0 - cosine * cosine)
    joint = [r + upper_length * (cosine * a + sine * b / bend_length) for r, a, b in zip(root, along, bend)]
    reached = [r + reach * a for r, a in zip(root, along)]
    turn_upper = floats.arc(first, floats.minus(joint, root))  # armature space
    turn_lower = floats.arc(second, floats.minus(reached, joint))  # the lower bone's, in all
    frames = skeleton.parent_frames(np.array(limb), world)
    w, x, y, z = turn_upper
    between = floats.product(w, -x, -y, -z, *turn_lower)  # the lower bone's turn under its parent's
    turns = np.array([turn_upper[1:], between[1:], [-v for v in turn_lower[1:]]])
    locally = np.einsum("li,lij->lj", turns, frames).tolist()
    local = rotations[[upper, lower, end]].tolist()
    for bone, w, axis, rotation in zip(limb, (turn_upper[0], between[0], turn_lower[0]), locally, local):
        rotations[bone] = floats.product(w, *axis, *rotation)
    return reached


def soft_distance(distance: float, length: float, soft: float) -> float:
    """The distance from a limb's root joint at which a target `distance` away is reached, for a
    limb of `length` with soft zone `soft` (share of the length): the same below the zone, then
    approaching `length` asymptotically with a continuous rate."""
    zone = soft * length
    start = length - zone
    if distance <= start:
        return distance
    return start + zone * (1.0 - math.exp(-(distance - start) / zone))
