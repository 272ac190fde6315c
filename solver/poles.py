"""Poles: which way a limb bends, as an animator sets it with a pole target.

A pin's reach fixes where a two-bone limb starts and ends, not the plane it bends in: turning
the limb about the line from its root joint to the pinned bone's head keeps both ends and every
pin where they are. The solve finds some bend; `turn_to_poles` swivels each limb about that line
until its middle joint (the elbow, the knee) lies in the plane through the root joint, the pinned
bone's head and the pole, on the pole's side. The pinned bone keeps its armature-space frame, so
the pin stays exact and nothing below it moves.

A straight limb has no bend to read, so the limb's own bend direction takes over as it
straightens: the bend its rest pose has (the middle joint's side of the line from root joint to
end), or the lower bone's Z axis when the rest pose is straight, carried with the lower bone.
Limbs bent by `FULL_BEND` or more use their real bend only; below, the two are blended, so a
straightening limb keeps facing the pole and the swivel changes smoothly with the pose.

Joint limits win over the pole: a swivel that would take the upper bone or the pinned bone
further outside its limits than it was is cut back to the largest share that does not.
"""

import math

import numpy as np

from . import quat

FULL_BEND = math.radians(10.0)  # bend from which only the limb's real bend says where it points
_LIMIT_HALVINGS = 12  # halvings of the swivel when it would break a limit
_TINY = 1e-9  # share of the limb's length below which a direction is undefined


def turn_to_poles(skeleton, pins, rotations, locations, limits, frozen, unit=1.0):
    """`rotations` (N, 4) with each limb of a pin that has a pole swivelled toward it (a new
    array; the same one when no pin has a pole). `locations` (N, 3) and the poles are in the
    units of `skeleton` times `unit` (a solve's normalized skeleton passes its unit). `frozen`
    (N,) bool: bones the solve may not turn; a limb that needs one of them is left as it is."""
    poled = [k for k, pin in enumerate(pins) if pin.pole is not None]
    if not poled:
        return rotations
    rotations = rotations.copy()
    pinned = [skeleton.index[pin.bone] for pin in pins]
    for k in poled:
        limb = _limb(skeleton, pinned, k, frozen)
        if limb is not None:
            _swivel(skeleton, rotations, locations, limb, pins[k].pole / unit, limits)
    return rotations


def poled_bones(skeleton, pins, frozen):
    """(N,) bool: the bones `turn_to_poles` may turn (upper bones and pinned bones of limbs)."""
    turned = np.zeros(len(skeleton), dtype=bool)
    pinned = [skeleton.index[pin.bone] for pin in pins]
    for k, pin in enumerate(pins):
        limb = _limb(skeleton, pinned, k, frozen) if pin.pole is not None else None
        if limb is not None:
            turned[[limb[0], limb[2]]] = True
    return turned


def _limb(skeleton, pinned, k, frozen):
    """(upper, lower, end) of pin k's limb: the pinned bone and the two bones above it; None
    where there are not two, where the upper or the pinned bone is frozen, or where another pin
    hangs from the limb's two bones but not from the pinned bone (the swivel would move it)."""
    end = pinned[k]
    limb = skeleton.limb_above(end)
    if limb is None or frozen[limb[0]] or frozen[end]:
        return None
    upper, lower = limb
    for other in pinned:
        chain = skeleton.ancestors(other)
        if upper in chain and end not in chain:
            return None
    return upper, lower, end


def _swivel(skeleton, rotations, locations, limb, pole, limits):
    """Turn the limb's upper bone about the line from its head to the end's head so the limb's
    bend direction points at `pole`, the end's frame kept (in place)."""
    upper, lower, end = limb
    world = np.empty((len(skeleton), 3, 3))
    heads = np.empty((len(skeleton), 3))
    skeleton.forward_into(rotations, locations, world, heads, skeleton.kinematic_levels([end]))
    rest = skeleton.rest_head
    own = own_bend(rest[upper], rest[lower], rest[end], skeleton.rest[lower, :3, :3])
    bend = bend_direction(heads[upper], heads[lower], heads[end], world[lower] @ own)
    if bend is None:
        return
    axis = heads[end] - heads[upper]
    axis /= np.linalg.norm(axis)
    toward_pole = _across(pole - heads[upper], axis)
    if toward_pole is None:
        return
    angle = math.atan2(axis @ np.cross(bend, toward_pole), bend @ toward_pole)
    turned = _turned(skeleton, world, limb, axis, angle)
    if limits is not None:
        turned = _within_limits(rotations, turned, limb, limits, skeleton, world, axis, angle)
    rotations[[upper, end]] = turned


def bend_direction(root, middle, end, own):
    """The unit direction, across the line from `root` to `end` (a limb's joints in armature
    space), in which the limb bends: toward the middle joint, blended toward `own` (the limb's
    own bend direction in armature space, `own_bend` turned by the lower bone) as the limb
    straightens below `FULL_BEND`; None where neither says (a limb folded onto its root)."""
    axis = end - root
    if np.linalg.norm(axis) < _TINY * (np.linalg.norm(middle - root) + np.linalg.norm(end - middle)):
        return None
    axis = axis / np.linalg.norm(axis)
    first, second = middle - root, end - middle
    cosine = first @ second / max(np.linalg.norm(first) * np.linalg.norm(second), 1e-300)
    straightness = max(0.0, 1.0 - math.acos(min(1.0, max(-1.0, cosine))) / FULL_BEND)
    real = _across(first, axis)
    own = _across(own, axis) if straightness else None
    if own is None:
        return real
    blended = straightness * own + (1.0 - straightness) * (real if real is not None else 0.0)
    return _across(blended, axis)


def own_bend(rest_root, rest_middle, rest_end, lower_rest):
    """A limb's own bend direction in its lower bone's frame (`lower_rest`: that bone's rest
    rotation matrix): the rest pose's bend, or the lower bone's Z axis where the rest pose
    holds the limb straight (within a degree)."""
    line = rest_end - rest_root
    first = rest_middle - rest_root
    across = first - (first @ line) * line / max(line @ line, 1e-300)
    if np.linalg.norm(across) <= math.sin(math.radians(1.0)) * np.linalg.norm(first):
        return np.array([0.0, 0.0, 1.0])
    return lower_rest.T @ (across / np.linalg.norm(across))


def _across(vector, axis):
    """`vector`'s part across `axis` (unit), normalized; None where it has none."""
    across = vector - (vector @ axis) * axis
    length = np.linalg.norm(across)
    scale = max(np.linalg.norm(vector), 1e-300)
    return None if length < _TINY * scale else across / length


def _turned(skeleton, world, limb, axis, angle):
    """Local rotations (2, 4) of the upper and the end bone once the upper bone has turned by
    `angle` about `axis` in armature space and the end bone has kept its armature frame."""
    upper, lower, end = limb
    spin = quat.to_matrix(quat.from_axis_angle(axis, angle))
    upper_frame = skeleton.parent_frames(np.array([upper]), world)[0]
    end_frame = spin @ world[lower] @ skeleton.local_rest_matrix[end]
    local = np.stack([upper_frame.T @ spin @ world[upper], end_frame.T @ world[end]])
    return quat.normalize(quat.from_matrix(local))


def _within_limits(rotations, turned, limb, limits, skeleton, world, axis, angle):
    """`turned`, or where it takes the upper or the end bone further outside its limits, the
    largest share of the swivel (to 1/4096) that does not."""
    upper, _, end = limb
    trial = rotations.copy()
    before = limits.violation(trial)[[upper, end]]

    def breaks(candidate):
        trial[[upper, end]] = candidate
        return bool((limits.violation(trial)[[upper, end]] > before + 1e-9).any())

    if not breaks(turned):
        return turned
    low, high, best = 0.0, 1.0, rotations[[upper, end]]
    for _ in range(_LIMIT_HALVINGS):
        share = 0.5 * (low + high)
        candidate = _turned(skeleton, world, limb, axis, share * angle)
        if breaks(candidate):
            high = share
        else:
            low, best = share, candidate
    return best
