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

from __future__ import annotations

import dataclasses
import math
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from . import floats

if TYPE_CHECKING:
    from .kusudama import JointLimits
    from .pins import Pin
    from .skeleton import Skeleton


FULL_BEND = math.radians(10.0)  # bend from which only the limb's real bend says where it points
_LIMIT_HALVINGS = 12  # halvings of the swivel when it would break a limit
_TINY = 1e-9  # share of the limb's length below which a direction is undefined
_CACHED = 64  # poled limbs kept per skeleton (one entry per set of pinned and frozen bones)


def turn_to_poles(
    skeleton: Skeleton,
    pins: Sequence[Pin],
    rotations: np.ndarray,
    locations: np.ndarray,
    limits: JointLimits | None,
    frozen: np.ndarray,
    unit: float = 1.0,
) -> np.ndarray:
    """`rotations` (N, 4) with each limb of a pin that has a pole swivelled toward it (a new
    array; the same one when no pin has a pole). `locations` (N, 3) and the poles are in the
    units of `skeleton` times `unit` (a solve's normalized skeleton passes its unit). `frozen`
    (N,) bool: bones the solve may not turn; a limb that needs one of them is left as it is."""
    if all(pin.pole is None for pin in pins):
        return rotations
    rotations = rotations.copy()
    for k, limb in _poled_limbs(skeleton, pins, frozen).items():
        pole = pins[k].pole
        assert pole is not None  # `_poled_limbs` holds only pins with a pole
        _swivel(skeleton, rotations, locations, limb, pole / unit, limits)
    return rotations


def poled_bones(skeleton: Skeleton, pins: Sequence[Pin], frozen: np.ndarray) -> np.ndarray:
    """(N,) bool: the bones `turn_to_poles` may turn (upper bones and pinned bones of limbs)."""
    turned = np.zeros(len(skeleton), dtype=bool)
    if any(pin.pole is not None for pin in pins):
        for limb in _poled_limbs(skeleton, pins, frozen).values():
            turned[[limb.upper, limb.end]] = True
    return turned


@dataclasses.dataclass(frozen=True)
class _Limb:
    """A poled limb's bones, the forward-kinematics levels down to its pinned bone, and its own
    bend direction in its lower bone's frame (`own_bend`)."""

    upper: int
    lower: int
    end: int
    levels: tuple
    own: np.ndarray


_LIMBS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # skeleton -> {key: poled limbs}


def _poled_limbs(skeleton: Skeleton, pins: Sequence[Pin], frozen: np.ndarray) -> dict[int, _Limb]:
    """{pin index: _Limb} of the pins with a pole whose limb `_limb` finds, cached per skeleton,
    pinned bones and frozen bones (a stage and the solve ask again for the same ones)."""
    key = (tuple((pin.bone, pin.pole is not None) for pin in pins), np.packbits(frozen).tobytes())
    known = _LIMBS.setdefault(skeleton, {})
    if key not in known:
        pinned = [skeleton.index[pin.bone] for pin in pins]
        rest = skeleton.rest_head
        limbs = {}
        for k, pin in enumerate(pins):
            limb = _limb(skeleton, pinned, k, frozen) if pin.pole is not None else None
            if limb is not None:
                upper, lower, end = limb
                own = own_bend(rest[upper], rest[lower], rest[end], skeleton.rest[lower, :3, :3])
                limbs[k] = _Limb(upper, lower, end, skeleton.kinematic_levels([end]), own)
        if len(known) > _CACHED:
            known.clear()
        known[key] = limbs
    return known[key]


def _limb(
    skeleton: Skeleton, pinned: Sequence[int], k: int, frozen: np.ndarray
) -> tuple[int, int, int] | None:
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


def _swivel(
    skeleton: Skeleton,
    rotations: np.ndarray,
    locations: np.ndarray,
    limb: _Limb,
    pole: np.ndarray,
    limits: JointLimits | None,
) -> None:
    """Turn the limb's upper bone about the line from its head to the end's head so the limb's
    bend direction points at `pole`, the end's frame kept (in place)."""
    world, heads = skeleton.frames(rotations, locations, limb.levels)
    root, middle, end = heads[[limb.upper, limb.lower, limb.end]].tolist()
    bend = _bend_floats(root, middle, end, (world[limb.lower] @ limb.own).tolist())
    if bend is None:
        return
    axis = floats.minus(end, root)
    length = math.sqrt(floats.dot(axis, axis))
    axis = [a / length for a in axis]
    toward_pole = floats.across(floats.minus(pole.tolist(), root), axis, _TINY)
    if toward_pole is None:
        return
    angle = math.atan2(floats.dot(axis, floats.cross(bend, toward_pole)), floats.dot(bend, toward_pole))
    turn_axis = np.array(axis)
    frames = skeleton.parent_frames(np.array([limb.upper, limb.end]), world)
    turned = _turned(rotations, frames, limb, turn_axis, angle)
    if limits is not None:
        turned = _within_limits(rotations, turned, limb, limits, frames, turn_axis, angle)
    rotations[[limb.upper, limb.end]] = turned


def bend_direction(root: ArrayLike, middle: ArrayLike, end: ArrayLike, own: ArrayLike) -> np.ndarray | None:
    """The unit direction, across the line from `root` to `end` (a limb's joints in armature
    space), in which the limb bends: toward the middle joint, blended toward `own` (the limb's
    own bend direction in armature space, `own_bend` turned by the lower bone) as the limb
    straightens below `FULL_BEND`; None where neither says (a limb folded onto its root).
    Computed on floats: a handful of 3-vectors cost numpy more than the arithmetic."""
    bend = _bend_floats(*(np.asarray(v, dtype=float).tolist() for v in (root, middle, end, own)))
    return None if bend is None else np.array(bend)


def _bend_floats(
    root: Sequence[float], middle: Sequence[float], end: Sequence[float], own: Sequence[float]
) -> list[float] | None:
    """`bend_direction` on lists of floats, returning a list (or None)."""
    axis, first, second = floats.minus(end, root), floats.minus(middle, root), floats.minus(end, middle)
    length, first_length, second_length = (math.sqrt(floats.dot(v, v)) for v in (axis, first, second))
    if length < _TINY * (first_length + second_length):
        return None
    axis = [a / length for a in axis]
    cosine = floats.dot(first, second) / max(first_length * second_length, 1e-300)
    straightness = max(0.0, 1.0 - math.acos(min(1.0, max(-1.0, cosine))) / FULL_BEND)
    real = floats.across(first, axis, _TINY)
    own_across = floats.across(own, axis, _TINY) if straightness else None
    if own_across is None:
        return real
    real = real if real is not None else [0.0, 0.0, 0.0]
    blended = [straightness * o + (1.0 - straightness) * r for o, r in zip(own_across, real)]
    return floats.across(blended, axis, _TINY)


def own_bend(
    rest_root: np.ndarray, rest_middle: np.ndarray, rest_end: np.ndarray, lower_rest: np.ndarray
) -> np.ndarray:
    """A limb's own bend direction in its lower bone's frame (`lower_rest`: that bone's rest
    rotation matrix): the rest pose's bend, or the lower bone's Z axis where the rest pose
    holds the limb straight (within a degree)."""
    line = rest_end - rest_root
    first = rest_middle - rest_root
    across = first - (first @ line) * line / max(line @ line, 1e-300)
    if np.linalg.norm(across) <= math.sin(math.radians(1.0)) * np.linalg.norm(first):
        return np.array([0.0, 0.0, 1.0])
    return lower_rest.T @ (across / np.linalg.norm(across))


def _turned(
    rotations: np.ndarray, frames: np.ndarray, limb: _Limb, axis: np.ndarray, angle: float
) -> np.ndarray:
    """Local rotations (2, 4) of the upper and the end bone once the upper bone has turned by
    `angle` about `axis` in armature space and the end bone has kept its armature frame;
    `frames`: the upper's and the end's parent frames (3, 3) before the turn."""
    half = 0.5 * angle
    cosine, sine = math.cos(half), math.sin(half)
    upper_frame, end_frame = frames
    turns = ((sine * axis) @ upper_frame).tolist(), ((-sine * axis) @ end_frame).tolist()
    local = rotations[[limb.upper, limb.end]].tolist()
    return np.array([floats.product(cosine, *turn, *rotation) for turn, rotation in zip(turns, local)])


def _within_limits(
    rotations: np.ndarray,
    turned: np.ndarray,
    limb: _Limb,
    limits: JointLimits,
    frames: np.ndarray,
    axis: np.ndarray,
    angle: float,
) -> np.ndarray:
    """`turned`, or where it takes the upper or the end bone further outside its limits, the
    largest share of the swivel (to 1/4096) that does not."""
    upper, end = limb.upper, limb.end
    trial = rotations.copy()
    before = limits.violation(trial)[[upper, end]]

    def breaks(candidate: np.ndarray) -> bool:
        trial[[upper, end]] = candidate
        return bool((limits.violation(trial)[[upper, end]] > before + 1e-9).any())

    if not breaks(turned):
        return turned
    low, high, best = 0.0, 1.0, rotations[[upper, end]]
    for _ in range(_LIMIT_HALVINGS):
        share = 0.5 * (low + high)
        candidate = _turned(rotations, frames, limb, axis, share * angle)
        if breaks(candidate):
            high = share
        else:
            low, best = share, candidate
    return best
