"""One solve of checked pins from a start pose: the loop's attempt (C or numpy) and, under
limits, its restart from the limits' centres; the `SolveResult` it gives.

Every step of `solve` that solves (the carried start's stages, the solve itself, limits that
yield, pins that give way) runs attempts made here, on arguments `solve` checked once.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from . import native, quat
from .loop import State, iterate, use_native
from .plan import Plan, lineage_of, missed_bones_each, plan_solve
from .validation import MAX_COORDINATE

if TYPE_CHECKING:
    from .kusudama import JointLimits
    from .pins import Pin
    from .settings import SolverSettings
    from .skeleton import Skeleton

_RESTART_MISS = 2e-3


@dataclass
class SolveResult:
    """The solved pose and how the solve went."""

    rotations: np.ndarray
    locations: np.ndarray
    iterations: int
    converged: bool
    ms: float
    position_errors: np.ndarray
    orientation_errors_deg: np.ndarray
    moved: np.ndarray
    yielded: np.ndarray  # (P,) bool: pins that gave way so the others could be reached
    beyond_reach: np.ndarray  # (P,) bool: missing pins whose targets the bones that move them cannot reach
    limits_exceeded: np.ndarray  # (N,) radians each bone ends beyond its limits where they yielded to pins
    # (N,) each bone's stretch (its length's factor, 1 = none) toward pins beyond reach (`stretch.py`)
    scales: np.ndarray | None = None


def attempt_for(
    skeleton: Skeleton,
    pins: Sequence[Pin],
    rotations: np.ndarray,
    locations: np.ndarray,
    settings: SolverSettings,
    limits: JointLimits | None,
    stiffness: np.ndarray,
    start: float,
) -> Attempt:
    """The attempt (C or numpy loop) of these pins from a pose, before it runs; the arguments are
    `solve`'s, checked once there (a solve runs several attempts on them)."""
    pin_bones = [skeleton.index[pin.bone] for pin in pins]
    frozen = stiffness >= 1.0
    unit = skeleton.unit
    work = skeleton.normalized()
    plan = plan_solve(work, pin_bones, [p.falloff for p in pins], frozen, settings.translate_root)
    if unit != 1.0:
        settings = _in_rig_units(settings, unit)
    deadline = None if settings.time_budget_ms is None else start + settings.time_budget_ms * 1e-3
    state = State(work, pins, pin_bones, rotations.copy(), locations / unit, plan.levels, unit)
    return Attempt(state, plan, settings, limits, stiffness, start, deadline)


def solve_once(
    skeleton: Skeleton,
    pins: Sequence[Pin],
    rotations: np.ndarray,
    locations: np.ndarray,
    settings: SolverSettings,
    limits: JointLimits | None,
    stiffness: np.ndarray,
    start: float,
) -> SolveResult:
    """One solve of these pins from the start pose: the attempt, and the restart under limits."""
    attempt = attempt_for(skeleton, pins, rotations, locations, settings, limits, stiffness, start)
    attempt = attempt.settled()
    rotations, locations = attempt.pose(locations)
    return SolveResult(
        rotations=rotations,
        locations=locations,
        iterations=attempt.iterations,
        converged=attempt.converged,
        ms=(time.perf_counter() - start) * 1e3,
        position_errors=attempt.position_errors * skeleton.unit,
        orientation_errors_deg=np.degrees(attempt.orientation_errors),
        moved=attempt.plan.solved.copy(),
        yielded=np.zeros(len(pins), dtype=bool),
        beyond_reach=np.zeros(len(pins), dtype=bool),
        limits_exceeded=np.zeros(len(skeleton)),
    )


@functools.lru_cache(maxsize=32)
def _in_rig_units(settings, unit):
    """The settings with the tolerance in rig units, validated once per settings and rig size (a
    live drag solves with the same ones every update)."""
    return dataclasses.replace(settings, tolerance=min(settings.tolerance / unit, MAX_COORDINATE))


def time_left(settings: SolverSettings, started: float) -> bool:
    return settings.time_budget_ms is None or (time.perf_counter() - started) * 1e3 < settings.time_budget_ms


class Attempt:
    """One run of the iteration loop (C or numpy) from a start pose, and how it ended."""

    def __init__(
        self,
        state: State,
        plan: Plan,
        settings: SolverSettings,
        limits: JointLimits | None,
        stiffness: np.ndarray,
        start: float,
        deadline: float | None,
    ) -> None:
        self.state, self.plan, self.settings, self.limits = state, plan, settings, limits
        self.stiffness, self.start, self.deadline = stiffness, start, deadline
        self.max_step = (1.0 - stiffness) * settings.dampening
        self.frozen = stiffness >= 1.0
        self.iterations = 0

    def run(self) -> Attempt:
        state, plan, settings = self.state, self.plan, self.settings
        initial = state.rotations.copy()
        if use_native(settings):
            done, converged, self.position_errors, self.orientation_errors = native.run(
                state.skeleton,
                plan,
                state,
                settings,
                self.limits,
                self.max_step,
                self.frozen,
                initial,
                self.deadline,
            )
        else:
            done, converged = iterate(
                state, plan, settings, self.limits, self.max_step, self.frozen, initial, self.start
            )
            self.position_errors, self.orientation_errors = state.pin_errors()
            converged = converged or not len(state.pin_bones) or bool(state.reached(settings.tolerance).all())
        self.iterations += done
        self.converged = bool(converged)
        return self

    def settled(self) -> Attempt:
        """This attempt run, or its restart from the limits' centres where that fits better."""
        self.run()
        if self.limits is not None and not self.converged and self.time_left():
            return self.better_restart(self.limits)
        return self

    def pose(self, locations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rotations, locations) of the state in the rig's units; `locations` are the ones the
        solve started from, kept bit for bit where the state did not move them."""
        state, unit = self.state, self.state.unit
        return state.rotations, np.where(
            state.locations == locations / unit, locations, state.locations * unit
        )

    def time_left(self) -> bool:
        return time_left(self.settings, self.start)

    def misfit(self) -> float:
        self.state.forward()
        return self.state.errors(self.settings.tolerance)[0]

    def within_reach(self) -> np.ndarray:
        """Per pin: whether its target lies within reach of the bones that move it, limits aside.

        The pinned bone's head can get no farther from the head of the highest bone that moves
        it than the chain of heads between them is long; beyond that no start pose helps, so a
        target dragged out of reach costs no restart. A translating root reaches anywhere.
        """
        state, solved, parents = self.state, self.plan.solved, self.state.skeleton.parents
        state.forward()
        reach = np.ones(len(state.pin_bones), dtype=bool)
        for p, bone in enumerate(state.pin_bones):
            length, top = 0.0, bone if solved[bone] else -1
            while top >= 0 and parents[top] >= 0 and solved[parents[top]]:
                length += float(np.linalg.norm(state.world_head[top] - state.world_head[parents[top]]))
                top = parents[top]
            if top < 0 or (parents[top] < 0 and self.settings.translate_root):
                continue
            distance = float(np.linalg.norm(state.target_pos[p] - state.world_head[top]))
            reach[p] = distance <= length + _RESTART_MISS
        return reach

    def _missed_bones(self, missed):
        """The limited, solved bones that move a pin of `missed` (P,) bool, and those below them.

        A bone below one that moves a missed pin is carried along when that one turns, and its
        pose was fitted to where it was (a limb's reached pin below a missed one's chain), so
        it starts afresh as well; limbs hanging off elsewhere keep their pose.
        """
        return self._missed_bones_each(missed[None])[0]

    def _missed_bones_each(self, groups):
        """`_missed_bones` of each row of `groups` (K, P) bool at once: (K, N) bool."""
        assert self.limits is not None  # restarts under limits only
        movable = ~self.frozen & self.limits.limited
        return missed_bones_each(self.plan, self.state.skeleton, self.state.pin_bones, movable, groups)

    def _serving_only(self, pins):
        """The bones that move some pin of `pins` (P,) bool and no other pin: a limb whose pin
        is reached, hanging below a chain that missed another, keeps its pose in a restart
        (solved bones only: the others never move)."""
        lineage = lineage_of(self.plan, self.state.skeleton, self.state.pin_bones)
        serves, others = np.stack((pins, ~pins)) @ lineage.moves
        only = np.zeros(len(self.state.skeleton), dtype=bool)
        only[lineage.bones] = serves & ~others
        return only

    def better_restart(self, limits: JointLimits) -> Attempt:
        """This attempt, or a second one from the centres of `limits` (this attempt's) if that fits
        the pins much better.

        Coordinate descent stalls where a bone sits on its limit's boundary and the way to the
        target leads around it (a straight elbow whose hinge faces away from the target: the
        upper arm would have to twist first, which it has no reason to do). From the middle of
        every limited bone's range the same targets are reached. Only the bones that move a
        missed pin, and those below them, go there (`_missed_bones`), less the limbs that serve
        only reached pins (`_serving_only`: an arm whose hand is on its target, below a spine
        that missed the other hand's), so the restart changes nothing the attempt got right.
        The restart is kept only when it halves the misfit and this attempt misses a pin by more
        than 0.2 % of the rig's size, so a solve that is merely still on its way (a fast drag)
        never jumps to another pose.
        """
        missed = (self.position_errors > _RESTART_MISS) & self.within_reach()
        limited = self._missed_bones(missed) & ~self._serving_only(~missed)
        if not limited.any():
            return self
        restart = State.like(self.state)
        bones = np.flatnonzero(limited)
        restart.rotations[bones] = quat.part_way(
            restart.rotations[bones], limits.centres()[bones], 1.0 - self.stiffness[bones]
        )
        second = Attempt(
            restart,
            self.plan,
            self.settings,
            self.limits,
            self.stiffness,
            self.start,
            self.deadline,
        ).run()
        second.iterations += self.iterations
        if second.misfit() < 0.5 * self.misfit():
            return second
        self.iterations = second.iterations
        return self
