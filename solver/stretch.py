"""Stretch: the bones above a pin lengthen to meet a target beyond their reach.

The loops turn bones and never change their lengths, so stretch is a step after the solve: a pin
that still misses, whose stretchable bones (the run of its bone's ancestors, parent first, that
may stretch) lie straight toward its target, has those bones scaled along their Y by one factor,
up to the least of their maximum stretches, until its bone's head meets the target. The solve
straightens a chain toward a target beyond its reach, so the factor grows from 1 as the target
leaves the reach: the pose follows the target continuously, and is still a function of the
targets, settings and start pose.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .pins import Pin
    from .skeleton import Skeleton
    from .solve import SolveResult

MAX_STRETCH = 10.0  # largest scale factor a bone may stretch to
_STRAIGHT = 1e-6  # 1 - cosine between a bone and the way to the target below which it points there


def stretch_to_pins(
    skeleton: Skeleton,
    pins: Sequence[Pin],
    result: SolveResult,
    stretch: np.ndarray | None,
    tolerance: float,
) -> SolveResult:
    """`result` with `scales` (N,): each bone's Y scale, 1 but where a pin's straight chain
    stretches toward its target beyond reach (`stretch` (N,): each bone's maximum, >= 1); the
    stretched pins' position errors measured on the stretched pose, those it meets no longer
    beyond reach, and converged when every pin is then within `tolerance` (an axis counting
    as an arc of the rig's size, as in the loops)."""
    result.scales = np.ones(len(skeleton))
    if stretch is None or not (stretch > 1.0).any():
        return result
    stretched, frames = [], None
    for k, pin in enumerate(pins):
        chain = _stretchable(skeleton, skeleton.index[pin.bone], stretch)
        if pin.aim is None and result.position_errors[k] > tolerance and len(chain):
            if frames is None:
                frames = skeleton.frames(result.rotations, result.locations)
            factor = _factor(chain, skeleton.index[pin.bone], pin.target_position, *frames)
            if factor > 1.0:
                result.scales[chain] = min(factor, stretch[chain].min())
                stretched.append(k)
    if stretched:
        heads = skeleton.frames(result.rotations, result.locations, scales=result.scales)[1]
        for k in stretched:
            bone = skeleton.index[pins[k].bone]
            result.position_errors[k] = np.linalg.norm(heads[bone] - pins[k].target_position)
        result.moved[result.scales != 1.0] = True
        met = result.position_errors[stretched] <= tolerance
        result.beyond_reach[np.array(stretched)[met]] = False
        angle = np.degrees(tolerance / skeleton.unit)
        result.converged = bool(
            (result.position_errors <= tolerance).all() and (result.orientation_errors_deg <= angle).all()
        )
    return result


def _stretchable(skeleton: Skeleton, bone: int, stretch: np.ndarray) -> np.ndarray:
    """(C,) the run of `bone`'s ancestors, parent first, whose maximum stretch is above 1."""
    chain = []
    parent = skeleton.parents[bone]
    while parent >= 0 and stretch[parent] > 1.0:
        chain.append(parent)
        parent = skeleton.parents[parent]
    return np.array(chain, dtype=int)


def _factor(chain: np.ndarray, end: int, target: np.ndarray, world: np.ndarray, heads: np.ndarray) -> float:
    """The Y scale of every bone of `chain` (world rotation matrices `world` (N, 3, 3), heads (N, 3)) that puts `end`'s head at the distance of `target`
    from the chain's root joint, or 0 when a bone of the chain does not point at the target.

    The end's head is the root joint's plus each chain bone's offset to the next: the parts
    along the bones' Y grow with the factor s, the rest does not, so |fixed + s along| =
    distance is a quadratic in s.
    """
    root = heads[chain[-1]]
    way = target - root
    distance = np.linalg.norm(way)
    children = np.concatenate([[end], chain[:-1]])
    segments = heads[children] - heads[chain]
    lengths = np.linalg.norm(segments, axis=-1)
    if not (lengths > 0.0).all() or (segments @ way < (1.0 - _STRAIGHT) * lengths * distance).any():
        return 0.0
    axes = world[chain][:, :, 1]
    along = axes * np.einsum("ci,ci->c", axes, segments)[:, None]
    fixed, along = (segments - along).sum(0), along.sum(0)
    a, b, c = along @ along, 2.0 * fixed @ along, fixed @ fixed - distance * distance
    if not a > 0.0:
        return 0.0
    return (-b + np.sqrt(max(b * b - 4.0 * a * c, 0.0))) / (2.0 * a)
