"""Solver settings: stopping rules and step shaping, validated once."""

import dataclasses
import math
from dataclasses import dataclass

from .validation import (
    MAX_COORDINATE,
    MAX_TIME_BUDGET_MS,
    SceneError,
    flag,
    number,
    whole,
)

MAX_ITERATIONS = 1_000_000
MAX_ACCELERATION = 50
MAX_STABILIZATION_PASSES = 1000
BACKENDS = ("auto", "native", "numpy")
MAX_SOFT_REACH = 0.5  # share of a limb's length: a zone wider than half the limb bends it everywhere


@dataclass(frozen=True)
class SolverSettings:
    """How long and how boldly to solve.

    `dampening` caps one bone's rotation per step (radians): small steps keep
    the pose continuous while the targets move. `exact=False` switches the
    Minimizer to the references' e0 eigenvalue approximation, for comparison.
    `relaxation` scales each bone's optimal step (successive over-relaxation):
    values in (1, 2) speed up the slow, nearly straight-limb convergence of
    coordinate descent. `acceleration` is the memory of the Anderson
    extrapolation of whole sweeps (0 = plain EWBIK). `analytic_limbs` finishes each solve by placing two-bone
    limbs that serve a single pin exactly (analytic IK), keeping the bend plane
    the iterations chose, and keeps a limb's result only if its pin gets closer.
    `stage_targets`: the solve starts from the start pose carried toward the targets in
    stages (`solve`), so the answer follows the targets smoothly, and with `translate_root` its
    roots first moved with their pins as one (`carried_root`); off, it starts from the start
    pose itself (one plain attempt). `pins_give_way`: where the pins cannot all be reached, the one of lowest priority
    stops short and the others are reached (`solve`); off, every pin pulls by its weight
    and they share the miss (plain least squares). `strict_limits`: off (the default), a pin that
    only a bend past a joint limit can reach is reached and the limits yield by the least angle
    (`solve`; `SolveResult.limits_exceeded` says how far); on, limits always hold. `backend` picks the loop: "auto" (the compiled loop when it is built, else
    numpy), "native" (fail if not built) or "numpy"; both reach the same accuracy.
    `soft_reach` (share of a limb's length, 0 = off): a target within that share of full reach
    of a two-bone limb is pulled back toward the limb's root joint so the limb straightens only
    asymptotically, without a pop (`reach.py`); 0 by default, since a limb nearly straight at
    rest sits in the zone (the metarig's legs rest at 0.996 of their length) and a pin made where
    it rests would then miss. `balance`: with `translate_root`, the body's centre of mass is
    kept over the pinned feet (`balance.balanced`; `solve` needs the body's masses).
    """

    iterations: int = 100
    time_budget_ms: float | None = None
    tolerance: float = 1e-5
    dampening: float = 0.0873
    stabilization_passes: int = 1
    translate_root: bool = False
    exact: bool = True
    relaxation: float = 1.0
    acceleration: int = 3
    analytic_limbs: bool = True
    stage_targets: bool = True
    pins_give_way: bool = True
    strict_limits: bool = False
    backend: str = "auto"
    soft_reach: float = 0.0
    balance: bool = False

    def __post_init__(self) -> None:
        for field in FIELDS:
            object.__setattr__(self, field, _CHECKS[field](getattr(self, field), f"settings.{field}"))


FIELDS = tuple(f.name for f in dataclasses.fields(SolverSettings))
"""Every settings field, in declaration order: the one list scene documents and Blender derive theirs from."""


def _backend(value: object, field: str) -> str:
    if not isinstance(value, str) or value not in BACKENDS:
        raise SceneError(field, f"must be 'auto', 'native' or 'numpy', got {value!r}")
    return value


_CHECKS = {
    "iterations": lambda v, f: whole(v, f, 1, MAX_ITERATIONS),
    "time_budget_ms": lambda v, f: None if v is None else number(v, f, 0.0, MAX_TIME_BUDGET_MS),
    "tolerance": lambda v, f: number(v, f, 0.0, MAX_COORDINATE),
    "dampening": lambda v, f: number(v, f, 0.0, math.pi, open_low=True),
    "stabilization_passes": lambda v, f: whole(v, f, 0, MAX_STABILIZATION_PASSES),
    "translate_root": flag,
    "exact": flag,
    "relaxation": lambda v, f: number(v, f, 0.0, 2.0, open_low=True, open_high=True),
    "acceleration": lambda v, f: whole(v, f, 0, MAX_ACCELERATION),
    "analytic_limbs": flag,
    "stage_targets": flag,
    "pins_give_way": flag,
    "strict_limits": flag,
    "backend": _backend,
    "soft_reach": lambda v, f: number(v, f, 0.0, MAX_SOFT_REACH),
    "balance": flag,
}
