"""Soft reach: a limb straightens only asymptotically as its target nears full reach.

The bend of a two-bone limb as a function of the distance d from its root joint to its target
is acos-like: its rate grows without bound as d nears the limb's length L, so a target moving
steadily through full reach snaps the limb straight in a frame or two (the "pop"). As in game
"soft IK", within the last `soft` share of L the target is pulled back along the line from the
limb's root joint toward it, to L - s + s (1 - exp(-(d - L + s) / s)) (s = soft x L): the same
distance and rate where the zone begins, L only at infinity, so the bend changes at a bounded
rate. The targets are moved before the solve (staging, giving way, poles all see the softened
ones) and the pins report their miss from their own targets.

The root joint is where the pose the solve starts from puts it; where the solve moves it (a spine
that bends toward a hand) the targets are softened again from the solved root joints and the
pins solved again from the start pose, until the softened targets move by at most the
tolerance (at most `REACH_ROUNDS`). Each round is a solve of the inputs, so the answer stays a
function of the targets, the settings and the start pose.
"""

import numpy as np

REACH_ROUNDS = 4  # at most this many solves toward softened targets
_STRAIGHT_AT_REST = 1e-4  # share of its length below which a limb's rest pose is straight


def solve_softened(solve_pins, skeleton, pins, rotations, locations, settings):
    """The SolveResult of `solve_pins(pins, rotations, locations)` toward the pins' softened
    targets, with each pin's position error measured from its own target."""
    limbs = _soft_limbs(skeleton, pins) if settings.soft_reach > 0.0 else None
    if not limbs:
        return solve_pins(pins, rotations, locations)
    pose, moved = (rotations, locations), np.zeros(len(skeleton), dtype=bool)
    softened, iterations = None, 0
    for _ in range(REACH_ROUNDS):
        heads = skeleton.forward(*pose)[1]
        targets = _softened_targets(pins, limbs, heads, settings.soft_reach)
        if softened is not None and not np.abs(targets - softened).max(initial=0.0) > settings.tolerance:
            break
        softened = targets
        result = solve_pins(_moved_pins(pins, limbs, targets), rotations, locations)
        pose, iterations, moved = (
            (result.rotations, result.locations),
            iterations + result.iterations,
            moved | result.moved,
        )
    heads = skeleton.forward(*pose)[1]
    for k, pin in enumerate(pins):
        if k in limbs:
            result.position_errors[k] = np.linalg.norm(heads[skeleton.index[pin.bone]] - pin.target_position)
    result.iterations, result.moved = iterations, moved
    return result


def _soft_limbs(skeleton, pins):
    """{pin index: (root joint's bone, limb length)} for each position-holding pin whose bone
    has a parent and a grandparent that are not straight at rest (a straight limb has no bend
    to soften, and its rest pose sits at full reach)."""
    limbs = {}
    for k, pin in enumerate(pins):
        end = skeleton.index[pin.bone]
        limb = skeleton.limb_above(end)
        if pin.aim is not None or limb is None:
            continue
        upper, lower = limb
        head = skeleton.rest_head
        length = np.linalg.norm(head[lower] - head[upper]) + np.linalg.norm(head[end] - head[lower])
        if np.linalg.norm(head[end] - head[upper]) < length * (1.0 - _STRAIGHT_AT_REST):
            limbs[k] = (upper, length)
    return limbs


def _softened_targets(pins, limbs, heads, soft):
    """(L, 3) the softened target of each pin in `limbs` (in their order) from root joints at
    `heads` (N, 3)."""
    targets = np.empty((len(limbs), 3))
    for row, (k, (root, length)) in enumerate(limbs.items()):
        way = pins[k].target_position - heads[root]
        targets[row] = heads[root] + way * soft_distance(np.linalg.norm(way), length, soft) / max(
            np.linalg.norm(way), 1e-300
        )
    return targets


def soft_distance(distance, length, soft):
    """The distance from a limb's root joint at which a target `distance` away is reached, for a
    limb of `length` with soft zone `soft` (share of the length): the same below the zone, then
    approaching `length` asymptotically with a continuous rate."""
    zone = soft * length
    start = length - zone
    if distance <= start:
        return distance
    return start + zone * (1.0 - np.exp(-(distance - start) / zone))


def _moved_pins(pins, limbs, targets):
    """The pins with the softened targets of those in `limbs`."""
    moved = list(pins)
    for row, k in enumerate(limbs):
        target = pins[k].target.copy()
        target[:3, 3] = targets[row]
        moved[k] = pins[k].moved_to(target, pins[k].target_rotation, targets[row])
    return moved
