"""Anderson acceleration of the sweeps: where the last few sweeps are heading, tried as the next pose.

`csrc/anderson.c`'s `extrapolate` takes the same named steps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import quat
from .polish import rotation_vectors as _log

if TYPE_CHECKING:  # loop.py imports this module
    from .kusudama import JointLimits
    from .loop import State
    from .plan import Plan


class Anderson:
    """Anderson acceleration of the EWBIK sweep seen as a fixed-point map on the pose.

    The pose is the rotation vectors (and translating roots' locations) of the
    solved bones. From the last few sweeps it extrapolates where the sweeps are
    heading; the guess is kept only if it lowers the total pin misfit and no
    bone ends farther from where the solve started than the dampening allows
    for the iterations run (so dragging stays as continuous as without it).
    """

    def __init__(self, memory: int, plan: Plan) -> None:
        self.memory = memory
        self.bones = np.flatnonzero(plan.solved)
        self.inputs: list[np.ndarray] = []
        self.outputs: list[np.ndarray] = []

    def remember_start(self, state: State) -> None:
        self.start = self._pose(state)

    def _pose(self, state):
        return np.concatenate((_log(state.rotations[self.bones]), state.locations[self.bones]), axis=-1)

    def extrapolate(
        self,
        state: State,
        total: float,
        limits: JointLimits | None,
        tolerance: float,
        initial: np.ndarray,
        allowance: np.ndarray,
    ) -> tuple[float, bool]:
        """One Anderson step after a sweep; returns (total misfit, every pin reached)."""
        self._remember_sweep(state)
        if len(self.inputs) < 2:
            state.forward()
            return total, False
        guess = self._anderson_guess()
        new = None if guess is None else self._settle_guess(guess, limits, initial, allowance)
        if new is None:
            return self._reject_history(state, tolerance)
        return self._try_guess(state, total, tolerance, guess, new)

    def _remember_sweep(self, state):
        """The sweep just run joins the history, its start pose as input and the swept pose as
        output; past memory + 1 pairs the oldest goes."""
        self.inputs.append(self.start)
        self.outputs.append(self._pose(state))
        del self.inputs[: -self.memory - 1], self.outputs[: -self.memory - 1]

    def _anderson_guess(self):
        """Where the sweeps are heading, extrapolated from the history; None if not finite."""
        outputs = np.array(self.outputs).reshape(len(self.outputs), -1)
        residuals = outputs - np.array(self.inputs).reshape(len(self.inputs), -1)
        gamma = np.linalg.lstsq(np.diff(residuals, axis=0).T, residuals[-1], rcond=1e-10)[0]
        guess = (outputs[-1] - np.diff(outputs, axis=0).T @ gamma).reshape(self.outputs[-1].shape)
        return guess if np.all(np.isfinite(guess)) else None

    def _settle_guess(self, guess, limits, initial, allowance):
        """The guess's rotations, limited and normalized; None where a bone would end farther
        from the warm start than `allowance`."""
        new = _exp(guess[:, :3])
        if limits is not None:
            new = limits.constrain(self.bones, new, 0)
        new = quat.normalize(new)
        travel = quat.angle(quat.multiply(quat.conjugate(initial[self.bones]), new))
        return None if np.any(travel > allowance + 1e-12) else new

    def _try_guess(self, state, total, tolerance, guess, new):
        """The guess posed and kept if it lowers the total misfit; otherwise the swept pose back
        and the history dropped."""
        old_rotations = state.rotations[self.bones].copy()
        old_locations = state.locations[self.bones].copy()
        state.rotations[self.bones] = new
        state.locations[self.bones] = guess[:, 3:]
        state.forward()
        guess_total, reached = state.errors(tolerance)
        if guess_total < total:
            return guess_total, reached
        state.rotations[self.bones] = old_rotations
        state.locations[self.bones] = old_locations
        return self._reject_history(state, tolerance)

    def _reject_history(self, state, tolerance):
        """The history dropped (the next sweeps start it afresh); the swept pose's misfit."""
        self.inputs.clear()
        self.outputs.clear()
        state.forward()
        return state.errors(tolerance)


def _exp(v):
    return quat.from_axis_angle(v, np.linalg.norm(v, axis=-1))
