"""What a solve does when its pins cannot all be met: joint limits that yield to pins within
reach, pins that give way to the others, and the pins whose targets lie beyond reach.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .attempt import SolveResult, attempt_for, solve_once, time_left
from .starts import pinned_frames, target_distances

if TYPE_CHECKING:
    from .kusudama import JointLimits
    from .pins import Pin
    from .settings import SolverSettings
    from .skeleton import Skeleton

_YIELD_HALVINGS = 4  # halvings of the angle by which limits yield to pins, from a half turn
_HOLD_MISS = 1e-4  # share of the rig's size a pin may miss by before one of the pins gives way


def limits_yield(
    skeleton: Skeleton,
    pins: Sequence[Pin],
    result: SolveResult,
    settings: SolverSettings,
    limits: JointLimits,
    stiffness: np.ndarray,
    started: float,
) -> SolveResult:
    """The result, or where a pin within reach is held back by joint limits, the pins reached
    with the limits grown by the least angle that lets them (to within a sixteenth of a half
    turn), solved from the result; `limits_exceeded` says how far each bone went beyond. Where
    no growth reaches every pin, the limits hold."""
    attempt = attempt_for(
        skeleton, pins, result.rotations, result.locations, settings, limits, stiffness, started
    )
    attempt.state.forward()
    if not (~attempt.state.reached(attempt.settings.tolerance) & attempt.within_reach()).any():
        return result
    low, high = 0.0, math.pi
    reached: SolveResult | None = None
    for _ in range(_YIELD_HALVINGS + 1):
        if not time_left(settings, started):
            break
        angle = high if reached is None else 0.5 * (low + high)
        tried = solve_once(
            skeleton,
            pins,
            result.rotations,
            result.locations,
            settings,
            limits.widened(angle),
            stiffness,
            started,
        )
        if tried.converged:
            high, reached = angle, tried
        elif reached is None:
            return result
        else:
            low = angle
    if reached is None:
        return result
    reached.iterations += result.iterations
    reached.moved |= result.moved
    reached.limits_exceeded = limits.violation(reached.rotations)
    return reached


def give_way(
    skeleton: Skeleton,
    pins: Sequence[Pin],
    start: tuple[np.ndarray, np.ndarray],
    settings: SolverSettings,
    limits: JointLimits | None,
    stiffness: np.ndarray,
    started: float,
    result: SolveResult,
) -> SolveResult:
    """The result once the pins that keep the others from their targets have given way.

    While a pin misses by more than `_HOLD_MISS` of the rig's size, the missing pin of lowest
    priority yields (among equals the one whose target lies farthest from where the start puts
    it, the pin dragged away, then the first), and the other pins are solved again from the same
    start without it. The misses only say which pins miss: how far each misses depends on where
    an unfinished solve stopped, the start's distances do not. Then the yielded pins reach as far
    as they can with every bone that serves a holding pin frozen: the bones only they move (a
    hand's arm) turn toward them, nothing the holding pins hang on moves.
    """
    yielded = np.zeros(len(pins), dtype=bool)
    errors, iterations = result.position_errors, result.iterations
    miss = max(settings.tolerance, _HOLD_MISS * skeleton.unit)
    away = None
    if (errors > miss).any():
        away = target_distances(
            pins, pinned_frames(skeleton, [skeleton.index[pin.bone] for pin in pins], start)[1]
        )
    while time_left(settings, started):
        giving_way = _next_to_yield(pins, errors, yielded, away, miss)
        if giving_way is None:
            break
        yielded[giving_way] = True
        holding = [pin for pin, gives in zip(pins, yielded) if not gives]
        result = solve_once(skeleton, holding, *start, settings, limits, stiffness, started)
        errors = np.zeros(len(pins))
        errors[~yielded] = result.position_errors
        iterations += result.iterations
    if yielded.any():
        held = stiffness.copy()
        for pin, gives in zip(pins, yielded):
            if not gives:
                held[skeleton.ancestors(skeleton.index[pin.bone])] = 1.0
        moved = result.moved
        result = solve_once(
            skeleton, pins, result.rotations, result.locations, settings, limits, held, started
        )
        result.moved |= moved
        iterations += result.iterations
    result.iterations, result.yielded = iterations, yielded
    return result


def _next_to_yield(pins, errors, yielded, away, miss):
    """The index of the pin to give way next (`give_way`'s order), or None when every pin that
    has not yielded is within `miss` or no other pin is left for it to pull."""
    if len(pins) - int(yielded.sum()) < 2:
        return None
    missing = np.flatnonzero(~yielded & (errors > miss))
    if not len(missing):
        return None
    return min(missing.tolist(), key=lambda p: (pins[p].priority, -away[p], p))


def beyond_reach(
    skeleton: Skeleton,
    pins: Sequence[Pin],
    result: SolveResult,
    settings: SolverSettings,
    limits: JointLimits | None,
    stiffness: np.ndarray,
    started: float,
) -> np.ndarray:
    """(P,) bool: the pins that miss and whose targets lie beyond the reach of the bones that move
    them (`Attempt.within_reach`, limits aside): what the status calls out of reach."""
    missing = result.position_errors > settings.tolerance
    if not missing.any():
        return np.zeros(len(pins), dtype=bool)
    attempt = attempt_for(
        skeleton, pins, result.rotations, result.locations, settings, limits, stiffness, started
    )
    return missing & ~attempt.within_reach()
