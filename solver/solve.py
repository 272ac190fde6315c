"""`solve`: the pinned bones moved to their targets, from a start pose.

The arguments are checked once, then the solve is built up in layers (`_Solving`): soft reach
(`reach.py`) over aim pins (`aim.py`) over the pins' own solve, and balance (`balance.py`)
re-solving with the root shifted; stretch (`stretch.py`) comes last. The pins' own solve takes
each root's tree apart, then runs the start (`starts.py`: carried roots, centred limited bones,
stages toward the targets), the solve itself (`attempt.py`: the loop, `loop.py`, and its restart),
what happens where the pins cannot all be met (`give_way.py`) and the poles (`poles.py`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .aim import solve_aimed
from .attempt import SolveResult, solve_once
from .balance import Body, balanced
from .give_way import beyond_reach, give_way, limits_yield
from .kusudama import JointLimits
from .pins import Pin
from .poles import poled_bones, turn_to_poles
from .reach import solve_softened
from .settings import SolverSettings
from .skeleton import Skeleton
from .starts import carried_start, centred_start, continued_start, kept_root
from .stretch import stretch_to_pins
from .validation import MAX_COORDINATE, SceneError, bone_array, bone_rotations, bone_stretch


def solve(
    skeleton: Skeleton,
    pins: Sequence[Pin],
    rotations: np.ndarray,
    locations: np.ndarray,
    settings: SolverSettings,
    limits: JointLimits | None = None,
    stiffness: np.ndarray | None = None,
    stretch: np.ndarray | None = None,
    body: Body | None = None,
) -> SolveResult:
    """Move the skeleton's bones so the pinned bones reach their targets.

    `rotations` (N, 4) and `locations` (N, 3) are the local pose the solve starts
    from, in the skeleton's bone order. `stiffness` (N,) in [0, 1] scales
    each bone's dampening; 1 freezes the bone. `limits` is a JointLimits (or None)
    applied after every bone step. `stretch` (N,) >= 1 is the most each bone may lengthen by
    (Y scale) toward a pin beyond its reach (None: none may; `stretch.py`). Returns a
    SolveResult; the input arrays are not modified.

    Pins that the body cannot reach together do not share the miss (`give_way`): the pins
    that can be reached together are, and the others stop as close as the bones that serve
    them alone can take them. Which pin yields is decided by the targets and priorities alone,
    never by the order in which they moved. Aim pins (`Pin.aim`): the other pins' solve, then
    each aimed bone turned onto its target, or re-aimed solves (`aim.solve_aimed`); limbs whose
    targets lie near their full reach are then bent to softened targets (`settings.soft_reach`,
    `reach.solve_softened`). With `settings.balance` and
    `translate_root`, a `body` (`balance.Body`: masses and feet) keeps its centre of mass over
    the pinned feet by re-solves with the root shifted (`balance.balanced`).
    """
    started = time.perf_counter()
    _, rotations, locations, stiffness = _checked_input(
        skeleton, pins, rotations, locations, settings, limits, stiffness
    )
    stretch = None if stretch is None else bone_stretch(skeleton, stretch)

    solving = _Solving(skeleton, limits, stiffness, started)
    if settings.balance and settings.translate_root and body is not None:
        result = balanced(solving, skeleton, pins, rotations, locations, body, settings)
    else:
        result = solving(settings)(pins, rotations, locations)
    result = stretch_to_pins(skeleton, pins, result, stretch, settings.tolerance)
    result.ms = (time.perf_counter() - started) * 1e3
    return result


@dataclass(frozen=True)
class _Solving:
    """`solving(settings)(pins, rotations, locations)`: the solve of checked pins from a pose under
    these settings, within one call's time budget: targets near full reach softened
    (`reach.solve_softened`) over aim pins turned or re-aimed (`aim.solve_aimed`) over the pins'
    solve, the tree of each root apart. Balance's rounds solve under settings of their own
    (`balance.round_settings`)."""

    skeleton: Skeleton
    limits: JointLimits | None
    stiffness: np.ndarray
    started: float

    def __call__(self, settings):
        return functools.partial(self._soft, settings)

    def _soft(self, settings, pins, rotations, locations):
        aims = functools.partial(self._aims, settings)
        return solve_softened(aims, self.skeleton, pins, rotations, locations, settings)

    def _aims(self, settings, pins, rotations, locations):
        if not any(pin.aim is not None for pin in pins):
            return self._pins(settings, pins, rotations, locations)
        pins_alone = functools.partial(self._pins, settings)
        frozen = self.stiffness >= 1.0
        return solve_aimed(
            pins_alone, self.skeleton, pins, rotations, locations, settings.tolerance, frozen, self.limits
        )

    def _pins(self, settings, pins, rotations, locations):
        skeleton, limits, stiffness, started = self.skeleton, self.limits, self.stiffness, self.started
        roots = skeleton.root_of[[skeleton.index[pin.bone] for pin in pins]]
        if len(set(roots.tolist())) > 1:
            return _solved_apart(
                skeleton, pins, roots, rotations, locations, settings, limits, stiffness, started
            )
        return _solved(skeleton, pins, rotations, locations, settings, limits, stiffness, started)


def _solved_apart(skeleton, pins, roots, rotations, locations, settings, limits, stiffness, started):
    """The result of solving the pins of each root's tree of bones (`roots` (P,): each pin's) on
    its own: a crowd of armatures, one skeleton, gets for each armature the pose it gets alone,
    whatever the others do (one loop over all would share its stopping rule and its
    extrapolation between them)."""
    apart = SolveResult(
        rotations=rotations.copy(),
        locations=locations.copy(),
        iterations=0,
        converged=True,
        ms=0.0,
        position_errors=np.zeros(len(pins)),
        orientation_errors_deg=np.zeros(len(pins)),
        moved=np.zeros(len(skeleton), dtype=bool),
        yielded=np.zeros(len(pins), dtype=bool),
        beyond_reach=np.zeros(len(pins), dtype=bool),
        limits_exceeded=np.zeros(len(skeleton)),
    )
    for root in dict.fromkeys(roots.tolist()):
        members = np.flatnonzero(roots == root)
        tree = skeleton.root_of == root
        one = _solved(
            skeleton, [pins[p] for p in members], rotations, locations, settings, limits, stiffness, started
        )
        apart.rotations[tree], apart.locations[tree] = one.rotations[tree], one.locations[tree]
        apart.moved |= one.moved
        apart.limits_exceeded[tree] = one.limits_exceeded[tree]
        apart.iterations = max(apart.iterations, one.iterations)
        apart.converged &= one.converged
        for field in ("position_errors", "orientation_errors_deg", "yielded", "beyond_reach"):
            getattr(apart, field)[members] = getattr(one, field)
    return apart


def _solved(skeleton, pins, rotations, locations, settings, limits, stiffness, started):
    """`solve` on checked arguments whose pins hang from one root."""
    if settings.stage_targets:
        rotations, locations, placed = carried_start(
            skeleton, pins, rotations, locations, settings, stiffness
        )
        rotations = centred_start(skeleton, pins, rotations, locations, settings, limits, stiffness)
        rotations, locations = continued_start(
            skeleton, pins, rotations, locations, kept_root(settings, placed), limits, stiffness, started
        )
    result = solve_once(skeleton, pins, rotations, locations, settings, limits, stiffness, started)
    if limits is not None and not settings.strict_limits and not result.converged:
        result = limits_yield(skeleton, pins, result, settings, limits, stiffness, started)
    if settings.pins_give_way:
        result = give_way(
            skeleton, pins, (rotations, locations), settings, limits, stiffness, started, result
        )
    result.beyond_reach = beyond_reach(skeleton, pins, result, settings, limits, stiffness, started)
    frozen = stiffness >= 1.0
    result.rotations = turn_to_poles(skeleton, pins, result.rotations, result.locations, limits, frozen)
    result.moved |= poled_bones(skeleton, pins, frozen)
    return result


def _checked_input(skeleton, pins, rotations, locations, settings, limits, stiffness):
    """(pinned bone indices, rotations, locations, stiffness) of valid arguments; SceneError otherwise."""
    if not isinstance(skeleton, Skeleton):
        raise SceneError("skeleton", f"must be a Skeleton, got {type(skeleton).__name__}")
    if not isinstance(settings, SolverSettings):
        raise SceneError("settings", f"must be SolverSettings, got {type(settings).__name__}")
    if limits is not None and not isinstance(limits, JointLimits):
        raise SceneError("limits", f"must be JointLimits or None, got {type(limits).__name__}")
    n = len(skeleton)
    if limits is not None and limits.n_bones != n:
        raise SceneError("limits", f"made for {limits.n_bones} bones, the skeleton has {n}")
    rotations = bone_rotations(skeleton, rotations)
    locations = bone_array(skeleton, locations, (n, 3), "location", MAX_COORDINATE)
    stiffness = np.zeros(n) if stiffness is None else bone_array(skeleton, stiffness, (n,), "stiffness", 1.0)
    if np.any(stiffness < 0):
        raise SceneError(f"bones[{int(np.flatnonzero(stiffness < 0)[0])}].stiffness", "must lie in [0, 1]")
    index = skeleton.index
    pin_bones = [index.get(pin.bone) if isinstance(pin, Pin) else None for pin in pins]
    if None in pin_bones or len(set(pin_bones)) < len(pin_bones):
        _refuse_pins(skeleton, pins)
    return pin_bones, rotations, locations, stiffness


def _refuse_pins(skeleton, pins):
    """Raise the SceneError of the first pin that is not a Pin, not on a bone, or on a pinned bone."""
    seen = set()
    for k, pin in enumerate(pins):
        if not isinstance(pin, Pin):
            raise SceneError(f"pins[{k}]", f"must be a Pin, got {type(pin).__name__}")
        if pin.bone not in skeleton.index:
            raise SceneError(f"pins[{k}].bone", f"'{pin.bone}' is not in the skeleton")
        if pin.bone in seen:
            raise SceneError(f"pins[{k}].bone", f"'{pin.bone}' is pinned twice")
        seen.add(pin.bone)
