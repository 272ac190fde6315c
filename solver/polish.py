"""Polish: damped Gauss-Newton (Levenberg-Marquardt) steps over the solved bones, tree by tree.

Coordinate descent moves one bone at a time and converges linearly, crawling where several
oriented pins pull against each other through a shared spine. Once the sweeps have found the
basin, one least-squares step over all free rotations (and a translating root's location)
converges quadratically to the pose the sweeps head for, and as a smooth function of the
targets: warm starts add no jitter of their own (restarts under limits still jump).

The residual is the sweeps' seven-point misfit written as twelve numbers per pin: the
position error scaled by sqrt(w (1 + 2 sum w_axis)) and each axis' chord scaled by
sqrt(2 w w_axis), so its squared norm is exactly `loop.State.errors`' total. A world-space turn
w of bone j about its head moves a pin below it by w x (pin - head_j) and turns each of the
pin's axes by w x axis: the analytic Jacobian. Each bone's parameters are weighted by
(largest max_step / its max_step)^2, so stiff bones cost more to move; every bone's turn is
then capped at POLISH_TURN_CAP times its dampening (a sweep step's cap; a larger turn would
leave the region where the linearisation holds), limits project the result, and the step is
kept only if the misfit drops (else the damping grows and the step is tried again).

Pins that share no solved bone (the armatures of a crowd problem, or limbs under a frozen
hips) make a block-diagonal Jacobian: each such tree gets its own system, damping and guard,
so the cost grows with the trees' sizes, not with the cube of all pins, and POLISH_MAX_PINS
applies per tree. The trees try side by side, one forward pass per try for all of them.

A pin's nine axis rows depend on the bones' turns only through one 3x3 block (every bone above
the pin turns its axes alike), so they hold three rows' worth of least squares: `reduced_rows`
keeps its three position rows and three for its turn, with the same normal equations, and the
residual space's system shrinks from 12 to 6 rows a pin (its Cholesky factor eight times). The
linear system is solved in whichever space is smaller: the parameters' (J^T J + mu D) or the
rows' (J D^-1 J^T + mu I), which give the same step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from . import quat
from .loop_constants import (
    POLISH_CLAMPED,
    POLISH_GROW,
    POLISH_LAMBDA_MAX,
    POLISH_LAMBDA_MIN,
    POLISH_MAX_PINS,
    POLISH_SHRINK,
    POLISH_TRIES,
    POLISH_TURN_CAP,
)

if TYPE_CHECKING:
    from .kusudama import JointLimits
    from .loop import State

PIN_RESIDUALS = 12  # the misfit's numbers a pin: its position error and three axis chords
PIN_ROWS = 6  # the rows a pin keeps in the step's system (`reduced_rows`): position, turn
ROUNDING = (
    16 * np.finfo(float).eps
)  # relative change of a sum of misfits that rounding alone makes (C: the same from DBL_EPSILON)


@dataclass
class PolishPlan:
    """One independent tree of the polish: its solved bones, its pins, and one (pin, bone column)
    pair per bone above a pin. Trees share no bone (a crowd problem holds one per armature), so
    the Jacobian is block-diagonal across them and each tree takes its own step."""

    bones: np.ndarray  # (C,) the tree's solved bones, ascending
    pins: np.ndarray  # (P,) the tree's pins, ascending
    pair_pin: np.ndarray  # (K,) index into `pins`
    pair_column: np.ndarray  # (K,) index into `bones`
    translating: np.ndarray  # (C,) bool: a root that may also move


def polish_plan(
    solved: np.ndarray,
    below: list[list[int]],
    seen: list[list[tuple[int, float]]],
    translating_bones: np.ndarray,
    trees: Sequence[Sequence[int]],
) -> tuple[PolishPlan, ...] | None:
    """The polish's trees (`trees`: `pin_trees` of the solved bones), or None when the sweeps
    solve another problem.

    With a pin falloff below 1 a bone serves the pins under a pinned bone only partly (or not
    at all), so the sweeps do not minimise the plain total misfit; the polish, which does, is
    then left out rather than pull the pose somewhere else. It is also left out when a tree has
    more than POLISH_MAX_PINS pins, where one of its steps costs more than a time budget's worth
    of sweeps (a crowd of small rigs keeps it: the limit is per tree).
    """
    bones = np.flatnonzero(solved)
    for b in bones:
        factors = dict(seen[b])
        if any(factors.get(p, 0.0) != 1.0 for p in below[b]):
            return None
    if not trees or max(len(pins) for pins in trees) > POLISH_MAX_PINS:
        return None
    return tuple(_tree_plan(bones, below, pins, translating_bones) for pins in trees)


def pin_trees(bones: np.ndarray, below: list[list[int]]) -> list[list[int]]:
    """The pins grouped by the bones they share (two pins below one solved bone are in one tree),
    each group ascending, groups in the order of their first pin."""
    tree_of: dict[int, int] = {}
    for b in bones:
        roots = {_tree_root(tree_of, p) for p in below[b]}
        smallest = min(roots)
        for root in roots:
            tree_of[root] = smallest
    groups: dict[int, list[int]] = {}
    for p in sorted(tree_of):
        groups.setdefault(_tree_root(tree_of, p), []).append(p)
    return list(groups.values())


def _tree_root(tree_of: dict[int, int], p: int) -> int:
    while tree_of.setdefault(p, p) != p:
        p = tree_of[p]
    return p


def _tree_plan(
    bones: np.ndarray, below: list[list[int]], pins: Sequence[int], translating_bones: np.ndarray
) -> PolishPlan:
    local = {p: k for k, p in enumerate(pins)}
    own_bones = [b for b in bones if below[b][0] in local]
    pairs = [(local[p], c) for c, b in enumerate(own_bones) for p in below[b]]
    pair_pin, pair_column = np.array(pairs, dtype=int).T
    own = np.array(own_bones, dtype=int)
    return PolishPlan(own, np.array(pins, dtype=int), pair_pin, pair_column, np.isin(own, translating_bones))


@dataclass
class TreePolish:
    """The polish of one tree: its plan, per-parameter weights and its own damping."""

    plan: PolishPlan
    max_step: np.ndarray  # (C,) each bone's turn cap per step (pi for a translating root)
    scale: np.ndarray  # (3C + 3T,) 1 / sqrt(D): how freely each parameter moves
    damping: float

    @classmethod
    def make(cls, plan: PolishPlan, max_step: np.ndarray) -> TreePolish:
        own = max_step[plan.bones]
        reference = float(own.max())
        rotation_scale = np.repeat(own / reference, 3)
        translation_scale = np.ones(3 * int(plan.translating.sum()))
        cap = np.where(plan.translating, np.pi, POLISH_TURN_CAP * own)
        return cls(plan, cap, np.concatenate((rotation_scale, translation_scale)), POLISH_LAMBDA_MIN)


@dataclass
class Polisher:
    """The polish of one solve: a TreePolish per independent tree."""

    trees: list

    @classmethod
    def make(cls, plans: Sequence[PolishPlan], max_step: np.ndarray) -> Polisher:
        return cls([TreePolish.make(plan, max_step) for plan in plans])


def residuals(state: State) -> tuple[np.ndarray, np.ndarray]:
    """(P, 4, 3) weighted position error and axis chords, and the (P, 4) weights used."""
    sqrt_weights = np.sqrt(
        np.concatenate(
            (
                (state.weight * (1.0 + 2.0 * state.axis_weight.sum(-1)))[:, None],
                2.0 * state.weight[:, None] * state.axis_weight,
            ),
            axis=-1,
        )
    )
    errors = np.concatenate(
        ((state.effector_pos - state.target_pos)[:, None], state.effector_axes - state.target_axes), axis=1
    )
    return sqrt_weights[..., None] * errors, sqrt_weights


def jacobian(state: State, plan: PolishPlan, sqrt_weights: np.ndarray) -> np.ndarray:
    """(12P, 3C + 3T) derivative of the tree's residuals by its bones' world turns (then the
    translating roots' shifts, which move every pin below them)."""
    pins, columns = len(plan.pins), len(plan.bones)
    pin, column = plan.pair_pin, plan.pair_column
    weights = sqrt_weights[plan.pins[pin]]
    levers = np.concatenate(
        (
            (state.effector_pos[plan.pins[pin]] - state.world_head[plan.bones[column]])[:, None],
            state.effector_axes[plan.pins[pin]],
        ),
        axis=1,
    )
    rotation = np.zeros((pins, 12, columns, 3))
    rotation[pin, :, column] = (-weights[..., None, None] * _cross_matrices(levers)).reshape(-1, 12, 3)
    moving = np.flatnonzero(plan.translating)
    slot = np.cumsum(plan.translating) - 1
    shifting = plan.translating[column]
    translation = np.zeros((pins, 4, 3, len(moving), 3))
    translation[pin[shifting], 0, :, slot[column[shifting]], :] = weights[shifting, 0, None, None] * np.eye(3)
    return np.concatenate((rotation.reshape(12 * pins, -1), translation.reshape(12 * pins, -1)), axis=1)


def _cross_matrices(v: np.ndarray) -> np.ndarray:
    x, y, z = v[..., 0], v[..., 1], v[..., 2]
    zero = np.zeros_like(x)
    return np.stack(
        (np.stack((zero, -z, y), -1), np.stack((z, zero, -x), -1), np.stack((-y, x, zero), -1)), -2
    )


def damped_step(
    scaled: np.ndarray, residual: np.ndarray, damping: float, residuals: int | None = None
) -> np.ndarray:
    """z minimising |A z + r|^2 + mu |z|^2 for the column-scaled Jacobian A (the step is then
    scale * z), with mu = damping times the trace of A^T A over the fewer of its columns and the
    `residuals` its rows stand for (None: its rows; `reduced_rows` keeps 6 a pin for 12)."""
    rows, cols = scaled.shape
    mean_over = min(cols, rows if residuals is None else residuals)
    if cols <= rows:
        normal = scaled.T @ scaled
        mu = damping * max(np.trace(normal) / mean_over, 1e-300)
        return np.linalg.solve(normal + mu * np.eye(cols), -(scaled.T @ residual))
    gram = scaled @ scaled.T
    mu = damping * max(np.trace(gram) / mean_over, 1e-300)
    return -(scaled.T @ np.linalg.solve(gram + mu * np.eye(rows), residual))


def reduced_rows(
    jac: np.ndarray, residual: np.ndarray, axes: np.ndarray, axis_weights: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(6P, params), (6P,): the tree's `jacobian` rows and residuals (12 a pin) with each pin's
    nine axis rows replaced by three holding the same least squares. The nine are M G, with M
    (9, 3) = the axes' blocks -s_a [e_a]x for the pin's `axes` e_a (P, 3, 3) and their sqrt
    weights s_a (`axis_weights` (P, 3)), and G its bones' turns: the three are L G and c, with
    L^T L = M^T M = E diag(d) E^T (d_k the other two axes' squared weights) and L^T c = M^T r,
    L = diag(sqrt d) E^T, c = diag(1 / sqrt d) E^T M^T r (a zero d: a zero row)."""
    pins = len(axes)
    squared = axis_weights**2
    d = squared.sum(-1, keepdims=True) - squared
    inverse = np.where(d > 0.0, 1.0 / np.sqrt(np.where(d > 0.0, d, 1.0)), 0.0)
    moments = axis_weights[:, :, None, None] * _cross_matrices(axes)  # (P, a, 3, 3): s_a [e_a]x = M_a^T
    weights = inverse[..., None] * (axes @ np.concatenate(np.moveaxis(moments, 1, 0), axis=-1))  # (P, 3, 9)
    jac, residual = jac.reshape(pins, PIN_RESIDUALS, -1), residual.reshape(pins, PIN_RESIDUALS)
    rows = np.concatenate((jac[:, :3], weights @ jac[:, 3:]), axis=1).reshape(PIN_ROWS * pins, -1)
    left = np.concatenate((residual[:, :3], (weights @ residual[:, 3:, None])[..., 0]), axis=1)
    return rows, left.ravel()


def polish(
    state: State, polisher: Polisher, limits: JointLimits | None, iteration: int, tolerance: float
) -> tuple[float, bool, bool]:
    """One guarded polish step of every tree; returns (total, reached, kept). A tree's pose
    changes only if its own misfit drops; kept says whether the total dropped by more than its
    rounding (a tree at its floor gains rounding noise, which must not decide for the others;
    a tree that gains nothing waits for the next step, with a larger damping, while the others
    polish).

    Where the limits clamp a bone's turn, plain projection leaves only a sliver of the step
    (coordinate-wise crawling along the boundary). So a try that clamps a bone is followed by
    one in which that bone may not turn along the clamp's correction (the step stays in the
    tangent space of its active boundary), up to POLISH_TRIES times; a try that lowers nothing
    raises the damping, up to POLISH_TRIES times; the best try that lowers the misfit is kept.
    The trees try side by side, one forward pass per round for all of them; a tree whose pins
    are all within tolerance sits the step out (at its floor it would only spend tries on noise).
    """
    residual, sqrt_weights = residuals(state)
    costs = state.weight * state.pin_costs()
    start = float(np.sum(costs))
    reached_pins = state.reached(tolerance)
    trying = [
        _TreeTry.start(state, tree, residual, sqrt_weights, costs)
        for tree in polisher.trees
        if not reached_pins[tree.plan.pins].all()
    ]
    active = trying
    while active:
        active = [one for one in active if one.next_step()]
        for one in active:
            one.apply(state, limits, iteration)
        if not active:
            break
        state.forward()
        costs = state.weight * state.pin_costs()
        active = [one for one in active if one.judge(state, costs)]
    for one in trying:
        one.settle(state)
    state.forward()
    polished, reached = state.errors(tolerance)
    return polished, reached, bool(polished < (1.0 - ROUNDING) * start)


@dataclass
class _TreeTry:
    """One tree's tries within a polish step: its linearization, the turns each bone may take,
    how often it restricted and grew the damping, and its best try so far."""

    tree: TreePolish
    jac: np.ndarray
    residual: np.ndarray
    frame: np.ndarray  # (C, 3, 3) constraint frames at the step's start
    saved: tuple  # (rotations, locations) of the tree's bones at the step's start
    free: np.ndarray  # (C, 3, 3) per bone: projector onto the turns it may take
    misfit: float  # the tree's best misfit so far (its start, until a try lowers it)
    best: tuple | None = None  # (rotations, locations) of the best try
    step: np.ndarray | None = None
    corrections: np.ndarray | None = None
    grown: int = 0
    restricted: int = 0

    @classmethod
    def start(
        cls,
        state: State,
        tree: TreePolish,
        residual: np.ndarray,
        sqrt_weights: np.ndarray,
        costs: np.ndarray,
    ) -> _TreeTry:
        plan = tree.plan
        bones = plan.bones
        jac, left = reduced_rows(
            jacobian(state, plan, sqrt_weights) * tree.scale,
            residual[plan.pins].ravel(),
            state.effector_axes[plan.pins],
            sqrt_weights[plan.pins, 1:],
        )
        return cls(
            tree,
            jac,
            left,
            state.skeleton.parent_frames(bones, state.world),
            (state.rotations[bones].copy(), state.locations[bones].copy()),
            np.tile(np.eye(3), (len(bones), 1, 1)),
            float(np.sum(costs[plan.pins])),
        )

    @property
    def kept(self) -> bool:
        return self.best is not None

    def next_step(self) -> bool:
        """The next try's step; False (this tree is done) when the system is not solvable."""
        self.step = _restricted_step(self.jac, self.residual, self.tree, self.free)
        return bool(np.all(np.isfinite(self.step)))

    def apply(self, state: State, limits: JointLimits | None, iteration: int) -> None:
        assert self.step is not None  # `next_step` made it
        self.corrections = _apply(
            state, self.tree.plan, self.tree.max_step, limits, iteration, self.step, self.frame, *self.saved
        )

    def judge(self, state: State, costs: np.ndarray) -> bool:
        """Keep the try if it lowers the tree's misfit; whether the tree tries again."""
        assert self.corrections is not None  # `apply` made them
        bones = self.tree.plan.bones
        misfit = float(np.sum(costs[self.tree.plan.pins]))
        if misfit < self.misfit:
            self.misfit, self.best = misfit, (state.rotations[bones].copy(), state.locations[bones].copy())
        if self.restricted < POLISH_TRIES and _restrict(self.free, self.corrections):
            self.restricted += 1
            return True
        if self.kept or self.grown == POLISH_TRIES:
            return False
        self.tree.damping = min(self.tree.damping * POLISH_GROW, POLISH_LAMBDA_MAX)
        self.grown += 1
        return True

    def settle(self, state: State) -> None:
        """The best try's pose (the damping eases), or the start's."""
        bones = self.tree.plan.bones
        if self.kept:
            self.tree.damping = max(self.tree.damping / POLISH_SHRINK, POLISH_LAMBDA_MIN)
        state.rotations[bones], state.locations[bones] = self.best if self.best is not None else self.saved


def _restricted_step(jac: np.ndarray, residual: np.ndarray, tree: TreePolish, free: np.ndarray) -> np.ndarray:
    """The damped step with each bone's turn kept in the span of its projector `free` (C, 3, 3)."""
    columns = len(free)
    rotation = np.einsum("rci,cij->rcj", jac[:, : 3 * columns].reshape(len(jac), columns, 3), free)
    z = (
        damped_step(
            np.concatenate((rotation.reshape(len(jac), -1), jac[:, 3 * columns :]), axis=1),
            residual,
            tree.damping,
            PIN_RESIDUALS * len(tree.plan.pins),
        )
        * tree.scale
    )
    turns = (free @ z[: 3 * columns].reshape(columns, 3, 1))[..., 0]
    return np.concatenate((turns.ravel(), z[3 * columns :]))


def _restrict(free: np.ndarray, corrections: np.ndarray) -> bool:
    """Take each clamp's correction direction out of its bone's allowed turns; whether any was new."""
    direction = (free @ corrections[..., None])[..., 0]
    size = np.linalg.norm(direction, axis=-1)
    new = size > POLISH_CLAMPED
    if not new.any():
        return False
    unit = direction[new] / size[new, None]
    free[new] -= unit[:, :, None] * unit[:, None, :]
    return True


def _apply(
    state: State,
    plan: PolishPlan,
    cap: np.ndarray,
    limits: JointLimits | None,
    iteration: int,
    step: np.ndarray,
    frame: np.ndarray,
    old_rotations: np.ndarray,
    old_locations: np.ndarray,
) -> np.ndarray:
    """Turn each bone by its world turn (capped at POLISH_TURN_CAP dampenings) about its head, in its
    constraint frame as a sweep step does, limit it, and move translating roots. Returns (C, 3)
    the limits' corrections as world rotation vectors (0 where nothing was clamped)."""
    columns = len(plan.bones)
    turns = step[: 3 * columns].reshape(columns, 3)
    angle = np.linalg.norm(turns, axis=-1)
    turns = turns * np.minimum(1.0, cap / np.where(angle > 0.0, angle, 1.0))[:, None]
    local_turns = (np.swapaxes(frame, -1, -2) @ turns[..., None])[..., 0]
    new = quat.multiply(
        quat.from_axis_angle(local_turns, np.linalg.norm(local_turns, axis=-1)), old_rotations
    )
    corrections = np.zeros((columns, 3))
    if limits is not None and limits.limited[plan.bones].any():
        limited = limits.limited[plan.bones]
        wanted = new[limited]
        new[limited] = limits.constrain(plan.bones[limited], wanted, iteration)
        local = rotation_vectors(quat.multiply(quat.normalize(new[limited]), quat.conjugate(wanted)))
        corrections[limited] = (frame[limited] @ local[..., None])[..., 0]
    state.rotations[plan.bones] = quat.normalize(new)
    locations = old_locations.copy()
    moving = np.flatnonzero(plan.translating)
    if len(moving):
        shifts = step[3 * columns :].reshape(len(moving), 3)
        locations[moving] += (np.swapaxes(frame[moving], -1, -2) @ shifts[..., None])[..., 0]
    state.locations[plan.bones] = locations
    return corrections


def rotation_vectors(q: ArrayLike) -> np.ndarray:
    """Rotation vectors of unit quaternions (angle in [0, pi])."""
    q = quat.normalize(q)
    xyz = q[..., 1:]
    n = np.linalg.norm(xyz, axis=-1, keepdims=True)
    return 2.0 * np.arctan2(n, q[..., :1]) * xyz / np.where(n > 1e-15, n, 1.0)
