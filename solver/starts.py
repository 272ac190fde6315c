"""The start a solve runs from: the translating roots carried with their pins, resting limited
bones started toward their limits' centres, and the pose carried in stages toward the targets.

Each makes the start, and with it the solved pose, a smooth function of the targets: a solve
from a fixed start stops wherever its iterations meet the pins, so targets a little apart could
otherwise give bodies far apart (docs/ARCHITECTURE.md, "One pose per set of targets").
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from . import quat
from .attempt import Attempt, attempt_for, time_left
from .carried_root import carry_roots, places_roots
from .loop import target_axes
from .plan import missed_bones_each, plan_solve

if TYPE_CHECKING:
    from .kusudama import JointLimits
    from .pins import Pin
    from .settings import SolverSettings
    from .skeleton import Skeleton

_CONTINUATION_STEP = 0.2  # share of the rig's size a target moves per stage of the start's carry
_CONTINUATION_STAGES = 8  # at most this many stages before the solve itself
_STAGE_ITERATIONS = 30  # iterations of a stage of the carried start (they reach in 7 to 20)
_STAGE_TOLERANCE = 1e-3  # share of the rig's size within which a stage's pins count as reached
_FAR_FROM_REST = 0.6  # share of the rig's size a pin misses by from rest for a start at the limits' centres
_REST_SINE = 1e-9  # sine of half a bone's turn from rest below which it is at rest


def carried_start(
    skeleton: Skeleton,
    pins: Sequence[Pin],
    rotations: np.ndarray,
    locations: np.ndarray,
    settings: SolverSettings,
    stiffness: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, bool]:
    """(rotations, locations, placed) of the start with its translating roots carried with the
    pins they see (`carry_roots`); placed: the torso placed a root (`places_roots`)."""
    if not settings.translate_root:
        return rotations, locations, False
    plan = plan_solve(
        skeleton.normalized(),
        [skeleton.index[pin.bone] for pin in pins],
        [pin.falloff for pin in pins],
        stiffness >= 1.0,
        True,
    )
    roots = [
        (int(bone), seen[factor > 0.0], factor[factor > 0.0])
        for batch in plan.batches
        for bone, seen, factor, moving in zip(batch.bones, batch.seen, batch.factor, batch.translating)
        if moving
    ]
    rotations, locations = carry_roots(skeleton, pins, rotations, locations, roots, plan.levels, stiffness)
    return rotations, locations, places_roots(skeleton, pins, roots)


@functools.lru_cache(maxsize=32)
def kept_root(settings: SolverSettings, placed: bool) -> SolverSettings:
    """The settings of the carried start's stages: a root the torso placed keeps its head there
    (no root translation) until the solve itself."""
    return dataclasses.replace(settings, translate_root=False) if placed else settings


def centred_start(
    skeleton: Skeleton,
    pins: Sequence[Pin],
    rotations: np.ndarray,
    locations: np.ndarray,
    settings: SolverSettings,
    limits: JointLimits | None,
    stiffness: np.ndarray,
) -> np.ndarray:
    """The start pose with the bones that move a missed pin started on their way to their
    limits' centres when they rest: as far as that pin misses, up to all the way when it misses
    by `_FAR_FROM_REST` of the rig's size.

    The rest pose tells nothing about a pose far from it that the targets ask for (a pose the
    user made by hand on some of those bones is kept, and so are the others), and the rest pose
    sits on the edge of many limits (a straight knee on its hinge), where the sweeps stall and
    then need a restart. Solves from rest then fall into two families, those the first attempt
    finished and those the restart did, and neighbouring frames jump between them. Started from
    the middle of their ranges (the restart's start), they all take the same road. The share
    grows with the miss, so the start, and with it the solved pose, changes smoothly as a target
    moves away from where the rest pose puts it: a target dragged a little from the rest pose is
    reached from nearly the rest pose.
    """
    if limits is None:
        return rotations
    bones = np.array([skeleton.index[pin.bone] for pin in pins], dtype=int)
    centring = skeleton.kept(
        (
            "centring",
            bones.tobytes(),
            rotations.tobytes(),
            stiffness.tobytes(),
            limits,
            settings.translate_root,
        ),
        lambda: _Centring.of(skeleton, pins, bones, rotations, settings.translate_root, limits, stiffness),
    )
    if not len(centring.bones):
        return rotations
    heads = _start_frames(skeleton, bones, rotations, locations, centring.levels)[1]
    share = np.minimum(1.0, target_distances(pins, heads) / (_FAR_FROM_REST * skeleton.unit))
    shares = np.max(centring.moving * share[:, None], axis=0)
    turned = shares > 0.0
    rotations = rotations.copy()
    rotations[centring.bones[turned]] = quat.along(
        rotations[centring.bones[turned]],
        (centring.turn[0][turned], centring.turn[1][turned]),
        centring.willingness[turned] * shares[turned],
    )
    return rotations


@dataclass(frozen=True)
class _Centring:
    """What `centred_start` needs of a start pose that the targets do not change: the resting
    limited `bones` (K,) some pin moves, `moving` (P, K) which of them each pin's miss turns
    (with the bones below), the `turn` (`quat.arc`) from each one's rest to its limits' centre,
    how `willingness` (K,) it takes it (1 - stiffness: stiff bones such as clavicles stay nearly
    put) and the forward-kinematics `levels` of the pinned bones."""

    bones: np.ndarray
    moving: np.ndarray
    turn: tuple
    willingness: np.ndarray
    levels: tuple

    @classmethod
    def of(cls, skeleton, pins, bones, rotations, translate_root, limits, stiffness):
        frozen = stiffness >= 1.0
        work = skeleton.normalized()
        plan = plan_solve(work, bones.tolist(), [p.falloff for p in pins], frozen, translate_root)
        resting = np.linalg.norm(rotations[:, 1:], axis=-1) <= _REST_SINE
        moving = missed_bones_each(plan, work, bones, ~frozen & limits.limited, np.eye(len(pins), dtype=bool))
        centred = np.flatnonzero(moving.any(axis=0) & resting)
        turn = quat.arc(rotations[centred], limits.centres()[centred])
        return cls(centred, moving[:, centred], turn, 1.0 - stiffness[centred], plan.levels)


def continued_start(
    skeleton: Skeleton,
    pins: Sequence[Pin],
    rotations: np.ndarray,
    locations: np.ndarray,
    settings: SolverSettings,
    limits: JointLimits | None,
    stiffness: np.ndarray,
    started: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The start pose carried along the way to the targets: the pose the solve starts from.

    A solve from a fixed start stops wherever its iterations meet the pins; far from the start
    that depends on discrete turns of the road (a step kept or not, a limit reached), so targets
    a little apart could give bodies far apart. Solved in stages, each from the last, toward
    targets moved from where the start puts the pins (`_stage_targets`) a fixed distance at a
    time, each pin on its own (a stage appears where the last one ended, so the stages change
    smoothly with the targets); each tree of pins that share a solved bone (`plan_solve`'s
    trees) takes its own count of stages, as it would alone; a pin no solved bone moves takes
    none. The pose is carried as a drag carries it, near the answer of the stage before: the
    solved body follows the targets smoothly, and is still decided by the start and the
    targets alone.
    """
    bones = np.array([skeleton.index[pin.bone] for pin in pins], dtype=int)
    plan = plan_solve(
        skeleton.normalized(),
        bones.tolist(),
        [p.falloff for p in pins],
        stiffness >= 1.0,
        settings.translate_root,
    )
    start_rotations, heads = _start_frames(skeleton, bones, rotations, locations, plan.levels)
    travel = target_distances(pins, heads)
    step = _CONTINUATION_STEP * skeleton.unit
    if travel.max(initial=0.0) <= step:
        return rotations, locations
    stages = np.zeros(len(pins), dtype=int)
    for members in plan.trees:
        stages[members] = min(_CONTINUATION_STAGES, math.ceil(travel[members].max() / step) - 1)
    return _carried(
        skeleton,
        pins,
        (rotations, locations),
        _stage_targets(pins, start_rotations, heads, travel, step, stages),
        stages,
        plan.trees,
        _stage_settings(settings, skeleton.unit),
        limits,
        stiffness,
        started,
    )


def _carried(skeleton, pins, start, targets_at, stages, trees, settings, limits, stiffness, started):
    """The start carried through the stages' targets (`targets_at`: `_stage_targets`' positions
    and axes per stage and pin; pin p takes `stages[p]` of them), each stage run on the state the
    last left.

    A tree of pins with a stage's target beyond the reach of the bones that move it
    (`Attempt.within_reach`) leaves the carry where its last stage left it: that stage is
    undone and run again without it, so a target dragged out of reach does not pull the body
    after it. A stage runs at most `_STAGE_ITERATIONS`, so the user's iteration cap changes
    nothing here.
    """
    rotations, locations = start
    stages = stages.copy()
    attempt: Attempt | None = None
    active, stage = np.empty(0, dtype=np.intp), 0
    while stage < len(targets_at[0]) and time_left(settings, started):
        if len(active) != np.count_nonzero(stages > stage):
            if attempt is not None:
                rotations, locations = attempt.pose(locations)
            active = np.flatnonzero(stages > stage)
            if not len(active):
                break
            attempt = attempt_for(
                skeleton,
                [pins[p] for p in active],
                rotations,
                locations,
                settings,
                limits,
                stiffness,
                started,
            )
        assert attempt is not None  # made at the first stage
        saved = attempt.state.rotations.copy(), attempt.state.locations.copy()
        attempt.state.aim(targets_at[0][stage, active], targets_at[1][stage, active])
        attempt.run()
        beyond = active[~attempt.within_reach()] if not attempt.converged else []
        if not len(beyond):
            stage += 1
            continue
        attempt.state.rotations[:], attempt.state.locations[:] = saved
        for members in trees:
            if np.isin(members, beyond).any():
                stages[members] = stage
    return (rotations, locations) if attempt is None else attempt.pose(locations)


@functools.lru_cache(maxsize=32)
def _stage_settings(settings, unit):
    """A stage's settings: the solve's, with at most `_STAGE_ITERATIONS` iterations, done when its
    pins are within `_STAGE_TOLERANCE` of the rig's size (`unit`): a stage only carries the pose
    on toward the targets, the solve itself meets them."""
    return dataclasses.replace(
        settings,
        iterations=min(settings.iterations, _STAGE_ITERATIONS),
        tolerance=max(settings.tolerance, _STAGE_TOLERANCE * unit),
    )


def _stage_targets(pins, start_rotations, start_heads, travel, step, stages):
    """(positions (S, P, 3), target axes (S, P, 3, 3): `State.aim`'s) of the pins' targets at
    each stage: `step` further along the way from the start pose's frames (P, 4) and heads
    (P, 3) to their own, `travel` (P,) away, per stage up to their `stages` (P,); positions in a
    straight line, turns along the shortest arc."""
    targets = np.array([pin.target_rotation for pin in pins])
    counts = np.arange(1, stages.max(initial=0) + 1)
    shares = np.minimum(1.0, counts[:, None] * step / np.maximum(travel, 1e-300))
    positions = start_heads + shares[..., None] * (
        np.array([pin.target_position for pin in pins]) - start_heads
    )
    return positions, target_axes(quat.part_way(start_rotations, targets, shares))


def _start_frames(skeleton, bones, rotations, locations, levels):
    """(world rotations (P, 4), heads (P, 3)) of the pinned `bones` in the start pose (kept:
    `Skeleton.kept`)."""

    def frames():
        world, heads = pinned_frames(skeleton, bones, (rotations, locations), levels)
        return quat.from_matrix(world), heads

    return skeleton.kept(("pinned frames", bones.tobytes(), rotations.tobytes(), locations.tobytes()), frames)


def pinned_frames(
    skeleton: Skeleton,
    bones: np.ndarray | Sequence[int],
    pose: tuple[np.ndarray, np.ndarray],
    levels: tuple | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """World rotation matrices (P, 3, 3) and heads (P, 3) of the pinned `bones` in `pose`
    (rotations, locations); `levels` (`plan.levels`) keeps the pass to them and their ancestors."""
    world, heads = skeleton.frames(*pose, levels)
    return world[bones], heads[bones]


def target_distances(pins: Sequence[Pin], heads: np.ndarray) -> np.ndarray:
    """(P,) how far each pin's target lies from its bone's head at `heads` (P, 3)."""
    return np.linalg.norm(np.array([pin.target_position for pin in pins]).reshape(-1, 3) - heads, axis=-1)
