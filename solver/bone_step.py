"""The EWBIK bone step: every bone of a batch turned at once toward the pins it solves for.

Each bone solves a weighted Wahba problem: the turn about its head that best carries the
effectors of the pins it sees (their origins and axes, the paper's seven points per pin) onto
their targets, found by QCP. The turn is over-relaxed and cut to the bone's dampening, held to
its limits, and undone by the guard where it worsens the misfit of the bone's own pins; a
translating root also shifts. Only the pinned bones' frames are kept current during a sweep; a
bone's own head and constraint frame depend only on its ancestors, which the sweep reaches
later, so they stay valid from the iteration's forward pass. `csrc/bone_step.c`'s
`solve_bone_step` takes the same named steps for one bone at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from . import quat
from .loop_constants import GUARD_FLOOR, GUARD_SLACK
from .qcp import rotations_from_covariance

if TYPE_CHECKING:  # loop.py imports this module
    from .kusudama import JointLimits
    from .loop import State
    from .plan import Batch
    from .settings import SolverSettings


@dataclass
class BatchConstants:
    """What a batch step needs that stays fixed for a whole solve, gathered once."""

    w_origin: np.ndarray  # (k, S) origin weight: w + 2 sum(w_axis)
    w_axis: np.ndarray  # (k, S, 3) axis weights: 2 w_axis
    target_axes: np.ndarray  # (k, S, 3, 3)
    axis_fit: np.ndarray  # (k,) sum of w_axis (|e|^2 + |t|^2) for unit axes
    max_angle: np.ndarray  # (k,) dampening of each bone (pi for a translating root)
    relaxation: np.ndarray  # (k,)
    translating: bool
    limited: bool


def batch_constants(
    state: State, batch: Batch, max_step: np.ndarray, settings: SolverSettings, limits: JointLimits | None
) -> BatchConstants:
    """The paper's seven points per pin (origin, origin +- each axis) give the
    same covariance as the origin at weight w + 2 sum(w_axis) plus each axis
    at 2 w_axis: mirrored pairs cancel their cross terms."""
    w_pin = state.weight[batch.seen] * batch.factor
    w_axis = 2.0 * w_pin[..., None] * state.axis_weight[batch.seen]
    return BatchConstants(
        w_origin=w_pin + w_axis.sum(-1),
        w_axis=w_axis,
        target_axes=state.target_axes[batch.seen],
        axis_fit=2.0 * w_axis.sum((-1, -2)),
        max_angle=np.where(batch.translating, np.pi, max_step[batch.bones]),
        relaxation=np.where(batch.translating, 1.0, settings.relaxation),
        translating=bool(batch.translating.any()),
        limited=limits is not None and bool(limits.limited[batch.bones].any()),
    )


@dataclass
class _Covariance:
    """What a batch's bone steps know of the pins they solve for, measured from each bone's head."""

    eff_origin: np.ndarray  # (k, S, 3) effectors
    tgt_origin: np.ndarray  # (k, S, 3) targets
    s_origin: np.ndarray  # (k, 3, 3) the pins' origins: sum w_origin e t^T
    s_axes: np.ndarray  # (k, 3, 3) the pins' axes: sum w_axis e_a t_a^T
    s_scaled: np.ndarray  # (k, 3, 3) origins plus axes scaled by max(1, |t|^2) (the paper's basis scaling)
    fit: np.ndarray  # (k,) sum w_origin (|e|^2 + |t|^2): the origins' misfit before any turn
    e0: np.ndarray | None  # (k,) the references' estimate of the top eigenvalue (None: exact)
    mean_e: np.ndarray | None = None  # (k, 3) weighted means of effectors and targets (translating roots)
    mean_t: np.ndarray | None = None


def solve_batch(
    state: State,
    batch: Batch,
    const: BatchConstants,
    settings: SolverSettings,
    limits: JointLimits | None,
    iteration: int,
) -> None:
    """One EWBIK bone step for every bone of the batch at once.

    csrc/bone_step.c's solve_bone_step takes the same steps for one bone at a time.
    """
    bones = batch.bones
    head = state.world_head[bones]
    frame = state.skeleton.parent_frames(bones, state.world)
    cov = _pin_covariance(state, batch, const, head, settings.exact)
    if const.translating:
        _centre_translation(cov, const, batch.translating)
    delta = _dampen_turn(state, const, _fit_rotation(cov))
    old_local = state.rotations[bones]
    new_local = _turn_locally(frame, delta, old_local)
    if const.limited:
        new_local, delta = _apply_limits(limits, bones, frame, old_local, iteration, new_local)
    turn = quat.to_matrix(delta)
    shift = _root_shift(cov, turn, batch.translating) if const.translating else None
    if settings.stabilization_passes > 0:
        _guard_step(cov, const, old_local, turn, new_local, shift)
    _commit_step(state, batch, head, frame, new_local, turn, shift)


def _pin_covariance(state, batch, const, head, exact):
    """The covariances of the pins each bone of the batch solves for, about its head."""
    eff_origin = state.effector_pos[batch.seen] - head[:, None]
    tgt_origin = state.target_pos[batch.seen] - head[:, None]
    eff_axes = state.effector_axes[batch.seen]
    w_origin, w_axis, tgt_axes = const.w_origin, const.w_axis, const.target_axes
    tgt_len2 = (tgt_origin * tgt_origin).sum(-1)
    stretch = np.maximum(1.0, tgt_len2)[..., None]
    s_origin = np.swapaxes(eff_origin * w_origin[..., None], -1, -2) @ tgt_origin
    s_axes = np.einsum("ksa,ksai,ksaj->kij", w_axis, eff_axes, tgt_axes)
    s_scaled = s_origin + np.einsum("ksa,ksai,ksaj->kij", w_axis * stretch, eff_axes, tgt_axes)
    fit = (w_origin * ((eff_origin * eff_origin).sum(-1) + tgt_len2)).sum(-1)
    e0 = None if exact else 0.5 * (fit + 2.0 * (w_axis * stretch).sum((-1, -2)))
    return _Covariance(eff_origin, tgt_origin, s_origin, s_axes, s_scaled, fit, e0)


def _centre_translation(cov, const, translating):
    """A translating root's rotation is fitted about the weighted means of effectors and targets."""
    translating = translating[:, None]
    w_origin = const.w_origin
    w_sum = np.maximum(w_origin.sum(-1), 1e-300)[:, None]
    cov.mean_e = np.where(translating, (w_origin[..., None] * cov.eff_origin).sum(1) / w_sum, 0.0)
    cov.mean_t = np.where(translating, (w_origin[..., None] * cov.tgt_origin).sum(1) / w_sum, 0.0)
    centred = w_sum[:, :, None] * (cov.mean_e[:, :, None] * cov.mean_t[:, None, :])
    cov.s_scaled = cov.s_scaled - centred
    cov.s_origin = cov.s_origin - centred


def _fit_rotation(cov):
    """Each bone's best world turn about its head: QCP on the scaled covariance."""
    return rotations_from_covariance(cov.s_scaled, cov.e0)


def _dampen_turn(state, const, best_turn):
    """The turns over-relaxed and cut to each bone's dampening; a cut marks the sweep."""
    state.capped |= bool(np.any(const.relaxation * quat.angle(best_turn) > const.max_angle))
    return _clamp_angle(best_turn, const.max_angle, const.relaxation)


def _turn_locally(frame, delta, old_local):
    """The bones' local rotations after the world turns.

    A world-space turn (w, v) about the head is (w, A^T v) in the bone's constraint frame A, so
    no matrix-to-quaternion conversion is needed.
    """
    frame_t = np.swapaxes(frame, -1, -2)
    local_delta = np.concatenate((delta[:, :1], (frame_t @ delta[:, 1:, None])[..., 0]), axis=-1)
    return quat.multiply(local_delta, old_local)


def _apply_limits(limits, bones, frame, old_local, iteration, new_local):
    """The new local rotations held to the bones' limits, and the world turns they now amount to."""
    new_local = quat.normalize(limits.constrain(bones, new_local, iteration))
    local_delta = quat.multiply(new_local, quat.conjugate(old_local))
    delta = np.concatenate((local_delta[:, :1], (frame @ local_delta[:, 1:, None])[..., 0]), axis=-1)
    return new_local, delta


def _root_shift(cov, turn, translating):
    """A translating root's shift: the targets' mean less the turned effectors' mean (0 elsewhere)."""
    return np.where(translating[:, None], cov.mean_t - (turn @ cov.mean_e[..., None])[..., 0], 0.0)


def _guard_step(cov, const, old_local, turn, new_local, shift):
    """The stabilization guard: a step that worsens the misfit of the bone's own pins beyond
    rounding is undone (in place). The unscaled points' misfit is C - 2 tr(R S): compare
    tr(R S) with tr(S)."""
    s_guard = cov.s_origin + cov.s_axes
    trace = np.trace(s_guard, axis1=1, axis2=2)
    gain = (turn * np.swapaxes(s_guard, -1, -2)).sum((-1, -2)) - trace
    before = cov.fit + const.axis_fit - 2.0 * trace
    worse = -2.0 * gain > GUARD_SLACK * np.abs(before) + GUARD_FLOOR
    if worse.any():
        turn[worse] = np.eye(3)
        new_local[worse] = old_local[worse]
        if shift is not None:
            shift[worse] = 0.0


def _commit_step(state, batch, head, frame, new_local, turn, shift):
    """The step written: the bones' rotations, the pins they carry turned about their heads and
    shifted, translating roots' locations."""
    bones = batch.bones
    state.rotations[bones] = new_local
    rows, moved = batch.moved_rows, batch.moved_pins
    pivot = head[rows]
    turn_rows = turn[rows]
    state.effector_pos[moved] = pivot + (turn_rows @ (state.effector_pos[moved] - pivot)[..., None])[..., 0]
    state.effector_axes[moved] = state.effector_axes[moved] @ np.swapaxes(turn_rows, -1, -2)
    if shift is not None:
        state.locations[bones] += (np.swapaxes(frame, -1, -2) @ shift[..., None])[..., 0]
        state.effector_pos[moved] += shift[rows]


def _clamp_angle(q, max_angle, relaxation=1.0):
    """Scale each unit rotation's angle by `relaxation`, then cap it at max_angle (dampening).

    The axis is kept. With relaxation 1 this is the references' clamp on w.
    """
    q = quat.normalize(q)
    relaxation = np.asarray(relaxation, dtype=float)
    max_angle = np.asarray(max_angle, dtype=float)
    if np.all(relaxation == 1.0) and np.all(q[:, 0] >= np.cos(0.5 * max_angle)):
        return q
    xyz = q[:, 1:]
    norm = np.sqrt((xyz * xyz).sum(-1))
    half = np.minimum(np.arctan2(norm, q[:, 0]) * relaxation, 0.5 * max_angle)
    scale = np.sin(half) / np.where(norm > 1e-15, norm, 1.0)
    return np.concatenate((np.cos(half)[:, None], xyz * scale[:, None]), axis=-1)
