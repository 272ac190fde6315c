"""The iteration loop: blockwise coordinate descent where every bone solves a weighted Wahba problem.

Each iteration runs one forward-kinematics pass, then walks the solved bones from the leaves
toward the root, one batch of bones at a time (`plan.py`, `bone_step.py`).

Coordinate descent converges linearly and slowly where pins compete (a spine
serving head and hands). The first sweeps (Anderson-accelerated, `anderson.py`, optionally
over-relaxed) find the basin (at least three, until no bone step is cut to its
dampening); then the polish (polish.py: damped Gauss-Newton
over every solved bone at once, guarded like the sweeps) converges
quadratically, so warm-started solves reach tolerance 1e-6 in a few
iterations and the result is a smooth function of the targets. The analytic
two-bone finish (`limbs.py`) remains for solves the polish cannot run (pin falloff below 1),
as a guarded candidate where the polish stalls while a limb misses (a straight
knee is singular; the finish bends it to the side its limits allow), and as a
guarded last step of a solve that ends unconverged.

The same loop runs in C (`csrc/loop.c`, through `native.py`) where the library is built;
`use_native` picks one.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from . import native, quat
from .anderson import Anderson
from .bone_step import batch_constants, solve_batch
from .limbs import allowed_bends, finish_limbs, hinged_limbs, stuck_limbs
from .loop_constants import POLISH_AFTER, POLISH_SLOW, STALL
from .polish import Polisher, polish
from .validation import SceneError

if TYPE_CHECKING:
    from .kusudama import JointLimits
    from .pins import Pin
    from .plan import Plan
    from .settings import SolverSettings
    from .skeleton import Skeleton


class State:
    """The evolving pose plus the pinned bones' current frames (rotation matrices)."""

    def __init__(
        self,
        skeleton: Skeleton,
        pins: Sequence[Pin],
        pin_bones: np.ndarray | Sequence[int],
        rotations: np.ndarray,
        locations: np.ndarray,
        levels: tuple,
        unit: float = 1.0,
    ) -> None:
        self.skeleton, self.pins, self.unit = skeleton, pins, unit
        self.levels = levels
        self.rotations = rotations
        self.locations = locations
        n = len(skeleton)
        self.world = np.empty((n, 3, 3))
        self.world_head = np.empty((n, 3))
        self.pin_bones = np.array(pin_bones, dtype=int)
        self.weight, self.axis_weight, positions, axes = pin_arrays(pins)
        self.effector_pos = np.empty((len(pins), 3))
        self.effector_axes = np.empty((len(pins), 3, 3))
        self.capped = False  # whether a bone step of the current sweep was cut to its dampening
        self.aim(positions, axes)

    def aim(self, positions: np.ndarray, axes: np.ndarray) -> None:
        """Aim the pins at targets (P, 3) in the rig's units with `axes` (P, 3, 3) (`target_axes`):
        their own, or a carried start's stage, which runs on the state as the last stage left it."""
        self.target_pos = positions / self.unit
        self.target_axes = axes

    @classmethod
    def like(cls, state: State) -> State:
        """A fresh state for the same problem (its pins aimed where `state`'s are), starting from
        `state`'s current pose."""
        fresh = cls(
            state.skeleton,
            state.pins,
            state.pin_bones,
            state.rotations.copy(),
            state.locations.copy(),
            state.levels,
            state.unit,
        )
        fresh.target_pos, fresh.target_axes = state.target_pos, state.target_axes
        return fresh

    def forward(self) -> None:
        self.skeleton.forward_into(self.rotations, self.locations, self.world, self.world_head, self.levels)
        self.effector_pos[:] = self.world_head[self.pin_bones]
        self.effector_axes[:] = np.swapaxes(self.world[self.pin_bones], -1, -2)

    def squared_errors(self) -> tuple[np.ndarray, np.ndarray]:
        """(squared position error (P,), squared axis chord of each axis (P, 3)) per pin."""
        pos2 = ((self.effector_pos - self.target_pos) ** 2).sum(-1)
        return pos2, ((self.effector_axes - self.target_axes) ** 2).sum(-1)

    def pin_costs(self, squared: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """Each pin's seven-point misfit: (1 + 2 sum(w_axis)) |dp|^2 + 2 sum(w_axis |d axis|^2).

        The same measure the stabilization guard protects, so every acceptance
        test in the solver (guard, acceleration, limb finish) agrees on "better".
        """
        pos2, axis2 = squared if squared is not None else self.squared_errors()
        return (1.0 + 2.0 * self.axis_weight.sum(-1)) * pos2 + 2.0 * (self.axis_weight * axis2).sum(-1)

    def reached(self, tolerance: float, squared: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """Per pin: within tolerance in position and on every weighted axis (or weightless).

        An axis chord below the tolerance means an angle below it too, so the
        check needs no trigonometry.
        """
        pos2, axis2 = squared if squared is not None else self.squared_errors()
        axis_ok = np.all((axis2 <= tolerance**2) | (self.axis_weight <= 0), axis=-1)
        return ((pos2 <= tolerance**2) & axis_ok) | (self.weight <= 0)

    def errors(self, tolerance: float) -> tuple[float, bool]:
        """(total weighted misfit, every pin within tolerance)."""
        squared = self.squared_errors()
        return float(np.sum(self.weight * self.pin_costs(squared))), bool(
            self.reached(tolerance, squared).all()
        )

    def pin_errors(self) -> tuple[np.ndarray, np.ndarray]:
        """Per pin: position error and orientation error (radians) over the weighted axes.

        Two or more weighted axes fix the whole orientation, so the full rotation
        angle is reported; one weighted axis reports that axis' angle; a
        position-only pin asks for no orientation and reports 0. Angles come
        from chords (|a - b| = 2 sin(angle / 2)), which stay exact near zero.
        """
        pos2, axis2 = self.squared_errors()
        full = 2.0 * np.arcsin(np.minimum(1.0, np.sqrt(axis2.sum(-1) / 8.0)))
        weighted = self.axis_weight > 0
        single = np.max(
            np.where(weighted, 2.0 * np.arcsin(np.minimum(1.0, np.sqrt(axis2) / 2.0)), 0.0), axis=-1
        )
        count = weighted.sum(-1)
        ang = np.where(count >= 2, full, np.where(count == 1, single, 0.0))
        return np.sqrt(pos2), ang


_pin_arrays: dict[tuple[int, ...], tuple[tuple, tuple[np.ndarray, ...]]] = {}
_KEPT_PIN_ARRAYS = 32


def pin_arrays(pins: Sequence[Pin]) -> tuple[np.ndarray, ...]:
    """(weights (P,), orientation weights (P, 3), target positions (P, 3), `target_axes` (P, 3, 3))
    of `pins`, read-only: kept per pin list (pins do not change; a solve's attempts, stages and
    rounds build their states from the same ones), the oldest of `_KEPT_PIN_ARRAYS` dropped first."""
    key = tuple(map(id, pins))
    found = _pin_arrays.get(key)
    if found is None or any(kept is not pin for kept, pin in zip(found[0], pins)):
        arrays = (
            np.array([p.weight for p in pins], dtype=float),
            np.array([p.orientation_weights for p in pins], dtype=float).reshape(-1, 3),
            np.array([p.target_position for p in pins], dtype=float).reshape(-1, 3),
            target_axes(np.array([p.target_rotation for p in pins], dtype=float).reshape(-1, 4)),
        )
        for array in arrays:
            array.flags.writeable = False
        if len(_pin_arrays) >= _KEPT_PIN_ARRAYS:
            del _pin_arrays[next(iter(_pin_arrays))]
        found = _pin_arrays[key] = (tuple(pins), arrays)
    return found[1]


def target_axes(rotations: np.ndarray) -> np.ndarray:
    """(..., 3, 3) the axes of frames turned by unit quaternions (..., 4), one axis per row: how
    a pin's target orientation is compared with its bone's axes."""
    return np.ascontiguousarray(np.swapaxes(quat.to_matrix(rotations), -1, -2))


def use_native(settings: SolverSettings) -> bool:
    if settings.backend == "numpy":
        return False
    if settings.backend == "native" and not native.available():
        raise SceneError("settings.backend", "'native' asked for, but the compiled solver is not built here")
    return native.available()


def iterate(
    state: State,
    plan: Plan,
    settings: SolverSettings,
    limits: JointLimits | None,
    max_step: np.ndarray,
    frozen: np.ndarray,
    initial: np.ndarray,
    start: float,
) -> tuple[int, bool]:
    """The numpy loop: sweeps and acceleration until the polish takes over, limb finish, stopping rules.

    Returns (iterations, converged). csrc/loop.c runs the same steps in C.
    """
    loop = _Loop(state, plan, settings, limits, max_step, frozen, initial, start)
    while len(state.pin_bones) and loop.iterations < settings.iterations:
        kept = loop.polish_step() if loop.polish_due() else False
        out_of_time = False if kept else loop.sweep_step()
        loop.iterations += 1
        loop.finish_when_only_limbs_miss()
        if loop.stops(out_of_time):
            break
    if loop.finish and not loop.converged and loop.iterations:
        finish_limbs(state, plan.limbs, frozen, limits, initial, loop.iterations * max_step)
    return loop.iterations, loop.converged


class _Loop:
    """The numpy loop's state between iterations and its named steps (`iterate` runs them)."""

    def __init__(self, state, plan, settings, limits, max_step, frozen, initial, start):
        self.state, self.plan, self.settings, self.limits = state, plan, settings, limits
        self.max_step, self.frozen, self.initial = max_step, frozen, initial
        if limits is not None and np.any(plan.solved & limits.limited):
            bones = np.flatnonzero(plan.solved & limits.limited)
            state.rotations[bones] = limits.constrain(bones, state.rotations[bones], 0)
        self.constants = [batch_constants(state, batch, max_step, settings, limits) for batch in plan.batches]
        self.accelerator = Anderson(settings.acceleration, plan) if settings.acceleration else None
        self.deadline = None if settings.time_budget_ms is None else start + settings.time_budget_ms * 1e-3
        self.finish = settings.analytic_limbs and len(plan.limbs.pin) > 0
        self.polisher = None if plan.polish is None else Polisher.make(plan.polish, max_step)
        self.hinges = hinged_limbs(plan.limbs, limits) if self.finish and self.polisher is not None else None
        self.others = np.ones(len(state.pin_bones), dtype=bool)
        self.others[plan.limbs.pin] = False
        state.forward()
        self.total, self.reached = state.errors(settings.tolerance)
        self.iterations, self.converged, self.previous = 0, False, np.inf
        self.polish_from, self.settled, self.polishing = POLISH_AFTER, False, False

    def polish_due(self):
        """The polish takes over once the sweeps have found the basin: no bone step capped by
        its dampening in the last sweep (far from the targets Gauss-Newton steps mislead)."""
        return self.polisher is not None and self.iterations >= self.polish_from and self.settled

    def polish_step(self):
        """One polish step, then the analytic finish of straight hinged limbs if it stalled.
        Returns whether the misfit dropped (else this iteration is a sweep)."""
        state, tolerance = self.state, self.settings.tolerance
        before = self.total
        assert self.polisher is not None  # polish_due
        self.total, self.reached, kept = polish(state, self.polisher, self.limits, self.iterations, tolerance)
        self.polishing |= kept
        # A failed polish gives the sweeps a few iterations to move on before the next one.
        self.polish_from = self.iterations if kept else self.iterations + 1 + POLISH_AFTER
        if self.hinges is None or self.reached or self.total <= POLISH_SLOW * before:
            return kept
        stuck = stuck_limbs(state, self.hinges, tolerance)
        if stuck is None:
            return kept
        stalled = self.total
        allowance = (self.iterations + 1) * self.max_step
        bends = allowed_bends(state, stuck, self.limits)
        finish_limbs(state, stuck, self.frozen, self.limits, self.initial, allowance, bends)
        self.total, self.reached = state.errors(tolerance)
        return kept or self.total < stalled

    def sweep_step(self):
        """One EWBIK sweep (Anderson-accelerated until the polish has kept a step). Returns
        whether the time budget ran out during it."""
        self.state.capped = False
        self.total, self.reached, out_of_time = _sweep(
            self.state,
            self.plan,
            self.constants,
            self.settings,
            self.limits,
            self.iterations,
            None if self.polishing else self.accelerator,
            self.initial,
            self.max_step,
            self.deadline,
        )
        self.settled = not self.state.capped
        return out_of_time

    def finish_when_only_limbs_miss(self):
        """Without a polish: when only limbs miss, the analytic finish places them directly."""
        state, tolerance = self.state, self.settings.tolerance
        if self.reached or not self.finish or self.polisher is not None:
            return
        if state.reached(tolerance)[self.others].all():
            finish_limbs(
                state,
                self.plan.limbs,
                self.frozen,
                self.limits,
                self.initial,
                self.iterations * self.max_step,
            )
            self.total, self.reached = state.errors(tolerance)

    def stops(self, out_of_time):
        """The stopping rules after an iteration: reached, stalled, or out of time."""
        if self.reached:
            self.converged = True
            return True
        if np.isfinite(self.previous) and abs(self.previous - self.total) <= STALL * self.previous:
            return True
        self.previous = self.total
        return out_of_time or (self.deadline is not None and time.perf_counter() >= self.deadline)


def _sweep(state, plan, constants, settings, limits, iteration, accelerator, initial, max_step, deadline):
    """One EWBIK iteration: every batch's bone step, leaves first, then (with an accelerator)
    an Anderson step over the sweeps so far. The clock is read between batches (a sweep over
    thousands of bones can outlast the whole budget): past `deadline` the sweep stops there,
    without the Anderson step. Returns (total misfit, every pin reached, out of time)."""
    if accelerator is not None:
        accelerator.remember_start(state)
    out_of_time = False
    for batch, const in zip(plan.batches, constants):
        solve_batch(state, batch, const, settings, limits, iteration)
        if deadline is not None and time.perf_counter() >= deadline:
            out_of_time = True
            break
    total, reached = state.errors(settings.tolerance)
    if accelerator is not None and not reached and not out_of_time:
        allowance = (iteration + 1) * max_step[accelerator.bones]
        return (*accelerator.extrapolate(state, total, limits, settings.tolerance, initial, allowance), False)
    state.forward()
    return total, reached, out_of_time
