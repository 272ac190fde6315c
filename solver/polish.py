"""Polish: damped Gauss-Newton (Levenberg-Marquardt) steps over every solved bone at once.

Coordinate descent moves one bone at a time and converges linearly, crawling where several
oriented pins pull against each other through a shared spine. Once the sweeps have found the
basin, one least-squares step over all free rotations (and a translating root's location)
converges quadratically to the pose the sweeps head for, and as a smooth function of the
targets: warm starts add no jitter of their own (restarts under limits still jump).

The residual is the sweeps' seven-point misfit written as twelve numbers per pin: the
position error scaled by sqrt(w (1 + 2 sum w_axis)) and each axis' chord scaled by
sqrt(2 w w_axis), so its squared norm is exactly `_State.errors`' total. A world-space turn
w of bone j about its head moves a pin below it by w x (pin - head_j) and turns each of the
pin's axes by w x axis: the analytic Jacobian. Each bone's parameters are weighted by
(largest max_step / its max_step)^2, so stiff bones cost more to move; every bone's turn is
then capped at its dampening like a sweep step, limits project the result, and the step is
kept only if the misfit drops (else the damping grows and the step is tried again).

The linear system is solved in whichever space is smaller: the parameters' (J^T J + mu D) or
the residuals' (J D^-1 J^T + mu I), which give the same step.
"""

from dataclasses import dataclass

import numpy as np

from . import quat
from .loop_constants import (
    POLISH_CLAMPED,
    POLISH_GROW,
    POLISH_LAMBDA_MAX,
    POLISH_LAMBDA_MIN,
    POLISH_MAX_PINS,
    POLISH_SHRINK,
    POLISH_TRIES,
)


@dataclass
class PolishPlan:
    """Which pins each polished bone carries: one (pin, bone column) pair per bone above a pin."""

    bones: np.ndarray  # (C,) the solved bones, ascending
    pair_pin: np.ndarray  # (K,)
    pair_column: np.ndarray  # (K,) index into `bones`
    translating: np.ndarray  # (C,) bool: a root that may also move


def polish_plan(solved, below, seen, translating_bones):
    """The pairs of the polish Jacobian, or None when the sweeps solve another problem.

    With a pin falloff below 1 a bone serves the pins under a pinned bone only partly (or not
    at all), so the sweeps do not minimise the plain total misfit; the polish, which does, is
    then left out rather than pull the pose somewhere else. It is also left out past
    POLISH_MAX_PINS pins, where one of its steps costs more than a time budget's worth of sweeps.
    """
    bones = np.flatnonzero(solved)
    column = {int(b): c for c, b in enumerate(bones)}
    pairs = []
    for b in bones:
        factors = dict(seen[b])
        if any(factors.get(p, 0.0) != 1.0 for p in below[b]):
            return None
        pairs.extend((p, column[int(b)]) for p in below[b])
    if not pairs:
        return None
    pair_pin, pair_column = np.array(pairs, dtype=int).T
    if len(np.unique(pair_pin)) > POLISH_MAX_PINS:
        return None
    return PolishPlan(bones, pair_pin, pair_column, np.isin(bones, translating_bones))


@dataclass
class Polisher:
    """The polish of one solve: its plan, per-parameter weights and the current damping."""

    plan: PolishPlan
    max_step: np.ndarray  # (C,) each bone's cap per step (pi for a translating root)
    scale: np.ndarray  # (3C + 3T,) 1 / sqrt(D): how freely each parameter moves
    damping: float

    @classmethod
    def make(cls, plan, max_step):
        own = max_step[plan.bones]
        reference = float(own.max())
        rotation_scale = np.repeat(own / reference, 3)
        translation_scale = np.ones(3 * int(plan.translating.sum()))
        cap = np.where(plan.translating, np.pi, own)
        return cls(plan, cap, np.concatenate((rotation_scale, translation_scale)), POLISH_LAMBDA_MIN)


def residuals(state):
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


def jacobian(state, plan, sqrt_weights):
    """(12P, 3C + 3T) derivative of the residuals by the bones' world turns (then translations)."""
    pins, columns = len(state.pin_bones), len(plan.bones)
    pin, column = plan.pair_pin, plan.pair_column
    levers = np.concatenate(
        ((state.effector_pos[pin] - state.world_head[plan.bones[column]])[:, None], state.effector_axes[pin]),
        axis=1,
    )
    blocks = -sqrt_weights[pin][..., None, None] * _cross_matrices(levers)
    rotation = np.zeros((pins, 12, columns, 3))
    rotation[pin, :, column] = blocks.reshape(-1, 12, 3)
    moving = np.flatnonzero(plan.translating)
    translation = np.zeros((pins, 4, 3, len(moving), 3))
    translation[:, 0, :, :, :] = sqrt_weights[:, 0, None, None, None] * np.eye(3)[None, :, None, :]
    return np.concatenate((rotation.reshape(12 * pins, -1), translation.reshape(12 * pins, -1)), axis=1)


def _cross_matrices(v):
    x, y, z = v[..., 0], v[..., 1], v[..., 2]
    zero = np.zeros_like(x)
    return np.stack(
        (np.stack((zero, -z, y), -1), np.stack((z, zero, -x), -1), np.stack((-y, x, zero), -1)), -2
    )


def damped_step(scaled, residual, damping):
    """z minimising |A z + r|^2 + mu |z|^2 for the column-scaled Jacobian A (the step is then
    scale * z), with mu = damping times the mean diagonal of A^T A."""
    rows, cols = scaled.shape
    if cols <= rows:
        normal = scaled.T @ scaled
        mu = damping * max(np.trace(normal) / cols, 1e-300)
        return np.linalg.solve(normal + mu * np.eye(cols), -(scaled.T @ residual))
    gram = scaled @ scaled.T
    mu = damping * max(np.trace(gram) / rows, 1e-300)
    return -(scaled.T @ np.linalg.solve(gram + mu * np.eye(rows), residual))


def polish(state, polisher, limits, iteration, total, tolerance):
    """One guarded polish step; returns (total, reached, kept). The pose changes only if kept.

    Where the limits clamp a bone's turn, plain projection leaves only a sliver of the step
    (coordinate-wise crawling along the boundary). So a try that clamps a bone is followed by
    one in which that bone may not turn along the clamp's correction (the step stays in the
    tangent space of its active boundary), up to POLISH_TRIES times; a try that lowers nothing
    raises the damping, up to POLISH_TRIES times; the best try that lowers the misfit is kept.
    """
    plan = polisher.plan
    residual, sqrt_weights = residuals(state)
    jac = jacobian(state, plan, sqrt_weights) * polisher.scale
    bones = plan.bones
    old_rotations = state.rotations[bones].copy()
    old_locations = state.locations[bones].copy()
    frame = state.skeleton.parent_frames(bones, state.world)
    free = np.tile(np.eye(3), (len(bones), 1, 1))  # per bone: projector onto the turns it may take
    best, grown, restricted = None, 0, 0
    while True:
        step = _restricted_step(jac, residual.ravel(), polisher, free)
        if not np.all(np.isfinite(step)):
            break
        corrections = _apply(
            state, plan, polisher.max_step, limits, iteration, step, frame, old_rotations, old_locations
        )
        state.forward()
        new_total, reached = state.errors(tolerance)
        if new_total < (total if best is None else best[0]):
            best = (new_total, reached, state.rotations[bones].copy(), state.locations[bones].copy())
        if restricted < POLISH_TRIES and _restrict(free, corrections):
            restricted += 1
            continue
        if best is not None or grown == POLISH_TRIES:
            break
        polisher.damping = min(polisher.damping * POLISH_GROW, POLISH_LAMBDA_MAX)
        grown += 1
    if best is None:
        state.rotations[bones] = old_rotations
        state.locations[bones] = old_locations
        state.forward()
        total, reached = state.errors(tolerance)
        return total, reached, False
    polisher.damping = max(polisher.damping / POLISH_SHRINK, POLISH_LAMBDA_MIN)
    state.rotations[bones], state.locations[bones] = best[2], best[3]
    state.forward()
    return best[0], best[1], True


def _restricted_step(jac, residual, polisher, free):
    """The damped step with each bone's turn kept in the span of its projector `free` (C, 3, 3)."""
    columns = len(free)
    rotation = np.einsum("rci,cij->rcj", jac[:, : 3 * columns].reshape(len(jac), columns, 3), free)
    z = (
        damped_step(
            np.concatenate((rotation.reshape(len(jac), -1), jac[:, 3 * columns :]), axis=1),
            residual,
            polisher.damping,
        )
        * polisher.scale
    )
    turns = (free @ z[: 3 * columns].reshape(columns, 3, 1))[..., 0]
    return np.concatenate((turns.ravel(), z[3 * columns :]))


def _restrict(free, corrections):
    """Take each clamp's correction direction out of its bone's allowed turns; whether any was new."""
    direction = (free @ corrections[..., None])[..., 0]
    size = np.linalg.norm(direction, axis=-1)
    new = size > POLISH_CLAMPED
    if not new.any():
        return False
    unit = direction[new] / size[new, None]
    free[new] -= unit[:, :, None] * unit[:, None, :]
    return True


def _apply(state, plan, cap, limits, iteration, step, frame, old_rotations, old_locations):
    """Turn each bone by its world turn (capped at its dampening) about its head, in its
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


def rotation_vectors(q):
    """Rotation vectors of unit quaternions (angle in [0, pi])."""
    q = quat.normalize(q)
    xyz = q[..., 1:]
    n = np.linalg.norm(xyz, axis=-1, keepdims=True)
    return 2.0 * np.arctan2(n, q[..., :1]) * xyz / np.where(n > 1e-15, n, 1.0)
