"""Solver settings: stopping rules and step shaping, validated once."""

import math
from dataclasses import dataclass

MAX_ITERATIONS = 1_000_000
MAX_ACCELERATION = 50


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
    `backend` picks the loop: "auto" (the compiled loop when it is built, else
    numpy), "native" (fail if not built) or "numpy"; both reach the same accuracy.
    """

    iterations: int = 15
    time_budget_ms: float | None = None
    tolerance: float = 1e-5
    dampening: float = 0.0873
    stabilization_passes: int = 1
    translate_root: bool = False
    exact: bool = True
    relaxation: float = 1.0
    acceleration: int = 3
    analytic_limbs: bool = True
    backend: str = "auto"

    def __post_init__(self):
        if int(self.iterations) != self.iterations or not 1 <= self.iterations <= MAX_ITERATIONS:
            raise ValueError(f"settings: iterations must be a whole number in [1, {MAX_ITERATIONS}], "
                             f"got {self.iterations}")
        if self.time_budget_ms is not None and not (self.time_budget_ms >= 0 and math.isfinite(self.time_budget_ms)):
            raise ValueError(f"settings: time_budget_ms must be >= 0 or null, got {self.time_budget_ms}")
        if not (self.tolerance >= 0 and math.isfinite(self.tolerance)):
            raise ValueError(f"settings: tolerance must be a finite number >= 0, got {self.tolerance}")
        if not (0 < self.dampening <= math.pi):
            raise ValueError(f"settings: dampening must lie in (0, pi], got {self.dampening}")
        if not (0 < self.relaxation < 2):
            raise ValueError(f"settings: relaxation must lie in (0, 2), got {self.relaxation}")
        if int(self.acceleration) != self.acceleration or not 0 <= self.acceleration <= MAX_ACCELERATION:
            raise ValueError(f"settings: acceleration must be a whole number in [0, {MAX_ACCELERATION}], "
                             f"got {self.acceleration}")
        if self.backend not in ("auto", "native", "numpy"):
            raise ValueError(f"settings: backend must be 'auto', 'native' or 'numpy', got {self.backend!r}")
        if int(self.stabilization_passes) != self.stabilization_passes or self.stabilization_passes < 0:
            raise ValueError("settings: stabilization_passes must be a whole number >= 0")
