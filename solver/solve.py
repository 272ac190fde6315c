"""EWBIK: blockwise coordinate descent where every bone solves a weighted Wahba problem.

Each iteration runs one forward-kinematics pass, then walks the solved bones from
the leaves toward the root. Bones with the same height above their deepest solved
descendant never share a pin and never contain each other, so each height is one
batch: one QCP call, one dampening clamp, one limits call and one guard check for
all of them. Only the pinned bones' frames are kept current during the walk; a
bone's own head and constraint frame depend only on its ancestors, which the walk
reaches later, so they stay valid from the iteration's forward pass.

Coordinate descent converges linearly and slowly where pins compete (a spine
serving head and hands). The first sweeps (Anderson-accelerated, optionally
over-relaxed) find the basin (at least three, until no bone step is cut to its
dampening); then the polish (polish.py: damped Gauss-Newton
over every solved bone at once, guarded like the sweeps) converges
quadratically, so warm-started solves reach tolerance 1e-6 in a few
iterations and the result is a smooth function of the targets. The analytic
two-bone finish remains for solves the polish cannot run (pin falloff below 1),
as a guarded candidate where the polish stalls while a limb misses (a straight
knee is singular; the finish bends it to the side its limits allow), and as a
guarded last step of a solve that ends unconverged.
"""

import dataclasses
import functools
import math
import time
from dataclasses import dataclass

import numpy as np

from . import native, quat
from .aim import solve_aimed
from .balance import balanced
from .carried_root import carry_roots, places_roots
from .kusudama import JointLimits
from .loop_constants import (
    BEND_TILT,
    GUARD_FLOOR,
    GUARD_SLACK,
    POLISH_AFTER,
    POLISH_SLOW,
    STALL,
    STRAIGHT_REACH,
    STRAIGHT_SINE,
)
from .pins import Pin
from .polish import Polisher, pin_trees, polish, polish_plan
from .polish import rotation_vectors as _log
from .poles import poled_bones, turn_to_poles
from .qcp import rotations_from_covariance
from .reach import solve_softened
from .settings import SolverSettings
from .skeleton import Skeleton
from .stretch import MAX_STRETCH, stretch_to_pins
from .two_bone import two_bone_ik
from .validation import MAX_COORDINATE, SceneError

_RESTART_MISS = 2e-3
_CONTINUATION_STEP = 0.2  # share of the rig's size a target moves per stage of the start's carry
_CONTINUATION_STAGES = 8  # at most this many stages before the solve itself
_YIELD_HALVINGS = 4  # halvings of the angle by which limits yield to pins, from a half turn
_STAGE_ITERATIONS = 30  # iterations of a stage of the carried start (they reach in 7 to 20)
_STAGE_TOLERANCE = 1e-3  # share of the rig's size within which a stage's pins count as reached
_HOLD_MISS = 1e-4  # share of the rig's size a pin may miss by before one of the pins gives way
_FAR_FROM_REST = 0.6  # share of the rig's size a pin misses by from rest for a start at the limits' centres
_REST_SINE = 1e-9  # sine of half a bone's turn from rest below which it is at rest
_PLANS_KEPT = 256  # plans kept per skeleton, the oldest dropped first (a crowd of 20 rigs asks for ~120)


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


@dataclass
class _Batch:
    bones: np.ndarray  # (k,) bones solved together
    seen: np.ndarray  # (k, S) pin indices each bone solves for (padded)
    factor: np.ndarray  # (k, S) falloff factor of each seen pin (0 = padding)
    moved_rows: np.ndarray  # (M,) row in `bones` of each (bone, descendant pin) pair
    moved_pins: np.ndarray  # (M,) pin carried along when that bone turns
    translating: np.ndarray  # (k,) bool: a root that may also move


@dataclass
class _Limbs:
    upper: np.ndarray  # (L,) the three bones of each two-bone limb ending in a pin
    lower: np.ndarray
    end: np.ndarray
    pin: np.ndarray


@dataclass
class _Plan:
    solved: np.ndarray
    batches: list
    limbs: _Limbs
    levels: tuple  # forward-kinematics levels of the pinned bones and their ancestors
    trees: list  # pin indices grouped by the solved bones they share (`polish.pin_trees`)
    polish: object  # one PolishPlan per tree of pins, or None where the sweeps minimise something else
    native_template: object = None  # the plan packed for the compiled loop, made on first use
    lineage: "_Lineage | None" = None  # made on first use (`_lineage`): only restarts under limits ask


@dataclass
class _Lineage:
    """Who carries whom among a plan's solved bones (`bones` (S,)): `moves` (P, S) pin p lies on
    or below solved bone s; `carries` (S, S) solved bone i is solved bone j or above it. Kept
    with the plan, so a restart finds the bones below those that missed without walking the
    skeleton again."""

    bones: np.ndarray
    moves: np.ndarray
    carries: np.ndarray


def plan_solve(skeleton, pin_bones, falloffs, frozen, translate_root):
    """Which bones see which pins, and in which batches they are solved.

    A bone sees a pin on itself or below it. Reaching another pinned bone on
    the way up multiplies the pin's influence by that bone's pin falloff, so
    with falloff 0 a pinned bone serves only its own pin and ends the segment
    of the pins below it, as in the reference implementation (its whole-chain
    result keeps a pinned root still). Bones that see no pin, and frozen
    bones, are never touched.
    """
    key = (tuple(pin_bones), tuple(falloffs), frozen.tobytes(), bool(translate_root))
    cached = skeleton.plan_cache.get(key)
    if cached is not None:
        return cached
    parents = skeleton.parents
    seen, below = _pins_per_bone(skeleton, pin_bones, falloffs)
    solved = np.array([bool(seen[i]) and not frozen[i] for i in range(len(skeleton))], dtype=bool)
    height = _heights(parents, solved)
    batches = [
        _batch(np.flatnonzero(solved & (height == h)), seen, below, parents, translate_root)
        for h in sorted(set(height[solved].tolist()))
    ]
    translating_bones = np.flatnonzero(solved & (parents < 0)) if translate_root else np.zeros(0, dtype=int)
    trees = pin_trees(np.flatnonzero(solved), below)
    plan = _Plan(
        solved,
        batches,
        _limbs(skeleton, pin_bones, below, solved),
        skeleton.kinematic_levels(pin_bones),
        trees,
        polish_plan(solved, below, seen, translating_bones, trees),
    )
    if len(skeleton.plan_cache) >= _PLANS_KEPT:
        del skeleton.plan_cache[next(iter(skeleton.plan_cache))]
    skeleton.plan_cache[key] = plan
    return plan


def _pins_per_bone(skeleton, pin_bones, falloffs):
    """Per bone: the (pin, falloff factor) pairs it sees, and every pin on it or below it."""
    pinned_falloff = dict(zip(pin_bones, falloffs))
    seen = [[] for _ in range(len(skeleton))]
    below = [[] for _ in range(len(skeleton))]
    for p, bone in enumerate(pin_bones):
        factor = 1.0
        for node in skeleton.ancestors(bone):
            below[node].append(p)
            if node != bone and node in pinned_falloff:
                factor *= pinned_falloff[node]
            if factor > 0.0:
                seen[node].append((p, factor))
    return seen, below


def _heights(parents, solved):
    """Each bone's height above its deepest solved descendant: the batch it is solved in."""
    height = np.zeros(len(parents), dtype=int)
    for i in range(len(parents) - 1, -1, -1):
        if parents[i] >= 0:
            height[parents[i]] = max(height[parents[i]], height[i] + 1 if solved[i] else height[i])
    return height


def _batch(bones, seen, below, parents, translate_root):
    """The batch of `bones`: the pins each sees (padded to the widest) and the pins each carries."""
    width = max(len(seen[b]) for b in bones)
    seen_idx = np.zeros((len(bones), width), dtype=int)
    factor = np.zeros((len(bones), width))
    rows, pins = [], []
    for r, b in enumerate(bones):
        for s, (p, f) in enumerate(seen[b]):
            seen_idx[r, s] = p
            factor[r, s] = f
        rows.extend([r] * len(below[b]))
        pins.extend(below[b])
    translating = (parents[bones] < 0) & bool(translate_root)
    return _Batch(bones, seen_idx, factor, np.array(rows, int), np.array(pins, int), translating)


def _lineage(plan, skeleton, pin_bones):
    """The plan's `_Lineage`, made on first use and kept with it."""
    if plan.lineage is None:
        bones = np.flatnonzero(plan.solved)
        column = np.full(len(skeleton), -1)
        column[bones] = np.arange(len(bones))
        moves = np.zeros((len(pin_bones), len(bones)), dtype=bool)
        carries = np.zeros((len(bones), len(bones)), dtype=bool)
        for p, bone in enumerate(np.asarray(pin_bones).tolist()):
            above = column[skeleton.ancestors(bone)]
            moves[p, above[above >= 0]] = True
        for j, bone in enumerate(bones.tolist()):
            above = column[skeleton.ancestors(bone)]
            carries[above[above >= 0], j] = True
        plan.lineage = _Lineage(bones, moves, carries)
    return plan.lineage


def _limbs(skeleton, pin_bones, below, solved):
    """The two-bone limbs ending in a pin that no other pin shares, both their bones solved."""
    limbs = []
    for p, end in enumerate(pin_bones):
        limb = skeleton.limb_above(end)
        if limb is not None and below[limb[0]] == [p] and solved[limb[1]] and solved[limb[0]]:
            limbs.append((*limb, end, p))
    return _Limbs(*np.array(limbs, dtype=int).reshape(-1, 4).T)


def solve(
    skeleton, pins, rotations, locations, settings, limits=None, stiffness=None, stretch=None, body=None
):
    """Move the skeleton's bones so the pinned bones reach their targets.

    `rotations` (N, 4) and `locations` (N, 3) are the local pose the solve starts
    from, in the skeleton's bone order. `stiffness` (N,) in [0, 1] scales
    each bone's dampening; 1 freezes the bone. `limits` is a JointLimits (or None)
    applied after every bone step. `stretch` (N,) >= 1 is the most each bone may lengthen by
    (Y scale) toward a pin beyond its reach (None: none may; `stretch.py`). Returns a
    SolveResult; the input arrays are not modified.

    Pins that the body cannot reach together do not share the miss (`_give_way`): the pins
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
    stretch = None if stretch is None else _checked_stretch(skeleton, stretch)

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

    skeleton: object
    limits: object
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
        rotations, locations, placed = _carried_start(
            skeleton, pins, rotations, locations, settings, stiffness
        )
        rotations = _centred_start(skeleton, pins, rotations, locations, settings, limits, stiffness)
        rotations, locations = _continued_start(
            skeleton, pins, rotations, locations, _kept_root(settings, placed), limits, stiffness, started
        )
    result = _solve_once(skeleton, pins, rotations, locations, settings, limits, stiffness, started)
    if limits is not None and not settings.strict_limits and not result.converged:
        result = _limits_yield(skeleton, pins, result, settings, limits, stiffness, started)
    if settings.pins_give_way:
        result = _give_way(
            skeleton, pins, (rotations, locations), settings, limits, stiffness, started, result
        )
    result.beyond_reach = _beyond_reach(skeleton, pins, result, settings, limits, stiffness, started)
    frozen = stiffness >= 1.0
    result.rotations = turn_to_poles(skeleton, pins, result.rotations, result.locations, limits, frozen)
    result.moved |= poled_bones(skeleton, pins, frozen)
    return result


def _carried_start(skeleton, pins, rotations, locations, settings, stiffness):
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
def _kept_root(settings, placed):
    """The settings of the carried start's stages: a root the torso placed keeps its head there
    (no root translation) until the solve itself."""
    return dataclasses.replace(settings, translate_root=False) if placed else settings


def _continued_start(skeleton, pins, rotations, locations, settings, limits, stiffness, started):
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
    travel = _travel(pins, heads)
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
    (`_Attempt._within_reach`) leaves the carry where its last stage left it: that stage is
    undone and run again without it, so a target dragged out of reach does not pull the body
    after it. A stage runs at most `_STAGE_ITERATIONS`, so the user's iteration cap changes
    nothing here.
    """
    rotations, locations = start
    stages = stages.copy()
    attempt, active, stage = None, [], 0
    while stage < len(targets_at[0]) and _time_left(settings, started):
        if len(active) != np.count_nonzero(stages > stage):
            if attempt is not None:
                rotations, locations = attempt.pose(locations)
            active = np.flatnonzero(stages > stage)
            if not len(active):
                break
            attempt = _attempt_for(
                skeleton,
                [pins[p] for p in active],
                rotations,
                locations,
                settings,
                limits,
                stiffness,
                started,
            )
        saved = attempt.state.rotations.copy(), attempt.state.locations.copy()
        attempt.state.aim(targets_at[0][stage, active], targets_at[1][stage, active])
        attempt.run()
        beyond = active[~attempt._within_reach()] if not attempt.converged else []
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
    """(positions (S, P, 3), target axes (S, P, 3, 3): `_State.aim`'s) of the pins' targets at
    each stage: `step` further along the way from the start pose's frames (P, 4) and heads
    (P, 3) to their own, `travel` (P,) away, per stage up to their `stages` (P,); positions in a
    straight line, turns along the shortest arc."""
    targets = np.array([pin.target_rotation for pin in pins])
    counts = np.arange(1, stages.max(initial=0) + 1)
    shares = np.minimum(1.0, counts[:, None] * step / np.maximum(travel, 1e-300))
    positions = start_heads + shares[..., None] * (
        np.array([pin.target_position for pin in pins]) - start_heads
    )
    return positions, _target_axes(quat.part_way(start_rotations, targets, shares))


def _start_frames(skeleton, bones, rotations, locations, levels):
    """(world rotations (P, 4), heads (P, 3)) of the pinned `bones` in the start pose (kept:
    `Skeleton.kept`)."""

    def frames():
        world, heads = _pinned_frames(skeleton, bones, (rotations, locations), levels)
        return quat.from_matrix(world), heads

    return skeleton.kept(("pinned frames", bones.tobytes(), rotations.tobytes(), locations.tobytes()), frames)


def _limits_yield(skeleton, pins, result, settings, limits, stiffness, started):
    """The result, or where a pin within reach is held back by joint limits, the pins reached
    with the limits grown by the least angle that lets them (to within a sixteenth of a half
    turn), solved from the result; `limits_exceeded` says how far each bone went beyond. Where
    no growth reaches every pin, the limits hold."""
    attempt = _attempt_for(
        skeleton, pins, result.rotations, result.locations, settings, limits, stiffness, started
    )
    attempt.state.forward()
    if not (~attempt.state.reached(attempt.settings.tolerance) & attempt._within_reach()).any():
        return result
    low, high, reached = 0.0, math.pi, None
    for _ in range(_YIELD_HALVINGS + 1):
        if not _time_left(settings, started):
            break
        angle = high if reached is None else 0.5 * (low + high)
        tried = _solve_once(
            skeleton,
            pins,
            result.rotations,
            result.locations,
            settings,
            limits.widened(angle),
            stiffness,
            started,
        )
        if tried.converged:
            high, reached = angle, tried
        elif reached is None:
            return result
        else:
            low = angle
    if reached is None:
        return result
    reached.iterations += result.iterations
    reached.moved |= result.moved
    reached.limits_exceeded = limits.violation(reached.rotations)
    return reached


def _give_way(skeleton, pins, start, settings, limits, stiffness, started, result):
    """The result once the pins that keep the others from their targets have given way.

    While a pin misses by more than `_HOLD_MISS` of the rig's size, the missing pin of lowest
    priority yields (among equals the one whose target lies farthest from where the start puts
    it, the pin dragged away, then the first), and the other pins are solved again from the same
    start without it. The misses only say which pins miss: how far each misses depends on where
    an unfinished solve stopped, the start's distances do not. Then the yielded pins reach as far as they can with
    every bone that serves a holding pin frozen: the bones only they move (a hand's arm) turn
    toward them, nothing the holding pins hang on moves.
    """
    yielded = np.zeros(len(pins), dtype=bool)
    errors, iterations = result.position_errors, result.iterations
    miss = max(settings.tolerance, _HOLD_MISS * skeleton.unit)
    away = None
    if (errors > miss).any():
        away = _travel(pins, _pinned_frames(skeleton, [skeleton.index[pin.bone] for pin in pins], start)[1])
    while _time_left(settings, started):
        giving_way = _next_to_yield(pins, errors, yielded, away, miss)
        if giving_way is None:
            break
        yielded[giving_way] = True
        holding = [pin for pin, gives in zip(pins, yielded) if not gives]
        result = _solve_once(skeleton, holding, *start, settings, limits, stiffness, started)
        errors = np.zeros(len(pins))
        errors[~yielded] = result.position_errors
        iterations += result.iterations
    if yielded.any():
        held = stiffness.copy()
        for pin, gives in zip(pins, yielded):
            if not gives:
                held[skeleton.ancestors(skeleton.index[pin.bone])] = 1.0
        moved = result.moved
        result = _solve_once(
            skeleton, pins, result.rotations, result.locations, settings, limits, held, started
        )
        result.moved |= moved
        iterations += result.iterations
    result.iterations, result.yielded = iterations, yielded
    return result


def _beyond_reach(skeleton, pins, result, settings, limits, stiffness, started):
    """(P,) bool: the pins that miss and whose targets lie beyond the reach of the bones that move
    them (`_Attempt._within_reach`, limits aside): what the status calls out of reach."""
    missing = result.position_errors > settings.tolerance
    if not missing.any():
        return np.zeros(len(pins), dtype=bool)
    attempt = _attempt_for(
        skeleton, pins, result.rotations, result.locations, settings, limits, stiffness, started
    )
    return missing & ~attempt._within_reach()


def _pinned_frames(skeleton, bones, pose, levels=None):
    """World rotation matrices (P, 3, 3) and heads (P, 3) of the pinned `bones` in `pose`
    (rotations, locations); `levels` (`plan.levels`) keeps the pass to them and their ancestors."""
    world, heads = skeleton.frames(*pose, levels)
    return world[bones], heads[bones]


def _travel(pins, heads):
    """(P,) how far each pin's target lies from its bone's head at `heads` (P, 3)."""
    return np.linalg.norm(np.array([pin.target_position for pin in pins]).reshape(-1, 3) - heads, axis=-1)


def _next_to_yield(pins, errors, yielded, away, miss):
    """The index of the pin to give way next (`_give_way`'s order), or None when every pin that
    has not yielded is within `miss` or no other pin is left for it to pull."""
    if len(pins) - int(yielded.sum()) < 2:
        return None
    missing = np.flatnonzero(~yielded & (errors > miss))
    if not len(missing):
        return None
    return min(missing.tolist(), key=lambda p: (pins[p].priority, -away[p], p))


def _time_left(settings, started):
    return settings.time_budget_ms is None or (time.perf_counter() - started) * 1e3 < settings.time_budget_ms


def _attempt_for(skeleton, pins, rotations, locations, settings, limits, stiffness, start):
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
    state = _State(work, pins, pin_bones, rotations.copy(), locations / unit, plan.levels, unit)
    return _Attempt(state, plan, settings, limits, stiffness, start, deadline)


def _centred_start(skeleton, pins, rotations, locations, settings, limits, stiffness):
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
    share = np.minimum(1.0, _travel(pins, heads) / (_FAR_FROM_REST * skeleton.unit))
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
    """What `_centred_start` needs of a start pose that the targets do not change: the resting
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
        moving = _missed_bones_each(
            plan, work, bones, ~frozen & limits.limited, np.eye(len(pins), dtype=bool)
        )
        centred = np.flatnonzero(moving.any(axis=0) & resting)
        turn = quat.arc(rotations[centred], limits.centres()[centred])
        return cls(centred, moving[:, centred], turn, 1.0 - stiffness[centred], plan.levels)


def _missed_bones_each(plan, skeleton, pin_bones, movable, groups):
    """(K, N) bool: for each row of `groups` (K, P) bool, the `movable` (N,) solved bones that move
    a pin of that row, and those below them (`_Attempt._missed_bones`)."""
    lineage = _lineage(plan, skeleton, pin_bones)
    movable = movable[lineage.bones]
    seeds = (groups @ lineage.moves) & movable
    carried = np.zeros((len(groups), len(skeleton)), dtype=bool)
    carried[:, lineage.bones] = (seeds @ lineage.carries) & movable
    return carried


def _solve_once(skeleton, pins, rotations, locations, settings, limits, stiffness, start):
    """One solve of these pins from the start pose: the attempt, and the restart under limits."""
    attempt = _attempt_for(skeleton, pins, rotations, locations, settings, limits, stiffness, start)
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


class _Attempt:
    """One run of the iteration loop (C or numpy) from a start pose, and how it ended."""

    def __init__(self, state, plan, settings, limits, stiffness, start, deadline):
        self.state, self.plan, self.settings, self.limits = state, plan, settings, limits
        self.stiffness, self.start, self.deadline = stiffness, start, deadline
        self.max_step = (1.0 - stiffness) * settings.dampening
        self.frozen = stiffness >= 1.0
        self.iterations = 0

    def run(self):
        state, plan, settings = self.state, self.plan, self.settings
        initial = state.rotations.copy()
        if _use_native(settings):
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
            done, converged = _iterate(
                state, plan, settings, self.limits, self.max_step, self.frozen, initial, self.start
            )
            self.position_errors, self.orientation_errors = state.pin_errors()
            converged = converged or not len(state.pin_bones) or bool(state.reached(settings.tolerance).all())
        self.iterations += done
        self.converged = bool(converged)
        return self

    def settled(self):
        """This attempt run, or its restart from the limits' centres where that fits better."""
        self.run()
        if self.limits is not None and not self.converged and self.time_left():
            return self.better_restart()
        return self

    def pose(self, locations):
        """(rotations, locations) of the state in the rig's units; `locations` are the ones the
        solve started from, kept bit for bit where the state did not move them."""
        state, unit = self.state, self.state.unit
        return state.rotations, np.where(
            state.locations == locations / unit, locations, state.locations * unit
        )

    def time_left(self):
        return _time_left(self.settings, self.start)

    def misfit(self):
        self.state.forward()
        return self.state.errors(self.settings.tolerance)[0]

    def _within_reach(self):
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
        movable = ~self.frozen & self.limits.limited
        return _missed_bones_each(self.plan, self.state.skeleton, self.state.pin_bones, movable, groups)

    def _serving_only(self, pins):
        """The bones that move some pin of `pins` (P,) bool and no other pin: a limb whose pin
        is reached, hanging below a chain that missed another, keeps its pose in a restart
        (solved bones only: the others never move)."""
        lineage = _lineage(self.plan, self.state.skeleton, self.state.pin_bones)
        serves, others = np.stack((pins, ~pins)) @ lineage.moves
        only = np.zeros(len(self.state.skeleton), dtype=bool)
        only[lineage.bones] = serves & ~others
        return only

    def better_restart(self):
        """This attempt, or a second one from the limits' centres if that fits the pins much better.

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
        missed = (self.position_errors > _RESTART_MISS) & self._within_reach()
        limited = self._missed_bones(missed) & ~self._serving_only(~missed)
        if not limited.any():
            return self
        restart = _State.like(self.state)
        bones = np.flatnonzero(limited)
        restart.rotations[bones] = quat.part_way(
            restart.rotations[bones], self.limits.centres()[bones], 1.0 - self.stiffness[bones]
        )
        second = _Attempt(
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


def _use_native(settings):
    if settings.backend == "numpy":
        return False
    if settings.backend == "native" and not native.available():
        raise SceneError("settings.backend", "'native' asked for, but the compiled solver is not built here")
    return native.available()


def _iterate(state, plan, settings, limits, max_step, frozen, initial, start):
    """The numpy loop: sweeps and acceleration until the polish takes over, limb finish, stopping rules.

    Returns (iterations, converged). csrc/ewbik.c runs the same steps in C.
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
        _finish_limbs(state, plan.limbs, frozen, limits, initial, loop.iterations * max_step)
    return loop.iterations, loop.converged


class _Loop:
    """The numpy loop's state between iterations and its named steps (`_iterate` runs them)."""

    def __init__(self, state, plan, settings, limits, max_step, frozen, initial, start):
        self.state, self.plan, self.settings, self.limits = state, plan, settings, limits
        self.max_step, self.frozen, self.initial = max_step, frozen, initial
        if limits is not None and np.any(plan.solved & limits.limited):
            bones = np.flatnonzero(plan.solved & limits.limited)
            state.rotations[bones] = limits.constrain(bones, state.rotations[bones], 0)
        self.constants = [
            _batch_constants(state, batch, max_step, settings, limits) for batch in plan.batches
        ]
        self.accelerator = _Anderson(settings.acceleration, plan) if settings.acceleration else None
        self.deadline = None if settings.time_budget_ms is None else start + settings.time_budget_ms * 1e-3
        self.finish = settings.analytic_limbs and len(plan.limbs.pin) > 0
        self.polisher = None if plan.polish is None else Polisher.make(plan.polish, max_step)
        self.hinges = _hinged_limbs(plan.limbs, limits) if self.finish and self.polisher is not None else None
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
        self.total, self.reached, kept = polish(state, self.polisher, self.limits, self.iterations, tolerance)
        self.polishing |= kept
        # A failed polish gives the sweeps a few iterations to move on before the next one.
        self.polish_from = self.iterations if kept else self.iterations + 1 + POLISH_AFTER
        if self.hinges is None or self.reached or self.total <= POLISH_SLOW * before:
            return kept
        stuck = _stuck(state, self.hinges, tolerance)
        if stuck is None:
            return kept
        stalled = self.total
        allowance = (self.iterations + 1) * self.max_step
        bends = _allowed_bends(state, stuck, self.limits)
        _finish_limbs(state, stuck, self.frozen, self.limits, self.initial, allowance, bends)
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
            _finish_limbs(
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


def _hinged_limbs(limbs, limits):
    """The limbs whose joint is limited, or None: where a stalled polish tries the analytic finish.

    A straight limb is singular: no turn moves its end toward its root to first order. A free
    joint leaves by turning sideways, but one limited to a narrow hinge corridor cannot, so
    sweeps and polish keep it straight and pull the rest of the body toward an end they cannot
    lift. When a polish step keeps more than POLISH_SLOW of the misfit while such a limb is
    straight and its pin misses, the analytic placement bends the joint directly, to the side
    its limits allow; each limb is kept only if its pin gets closer, and the polish goes on
    from there. A bent limb is left to the polish (placing it would turn its bend plane).
    """
    if limits is None:
        return None
    hinged = limits.limited[limbs.lower]
    if not hinged.any():
        return None
    return _Limbs(limbs.upper[hinged], limbs.lower[hinged], limbs.end[hinged], limbs.pin[hinged])


def _stuck(state, hinges, tolerance):
    """The hinged limbs that are straight while their target is closer to their root than a
    straight bend reaches (so they must bend more), and that miss their pin; or None."""
    head_u, head_l, head_e = (state.world_head[b] for b in (hinges.upper, hinges.lower, hinges.end))
    upper, lower = head_l - head_u, head_e - head_l
    upper_sq, lower_sq = np.sum(upper * upper, axis=-1), np.sum(lower * lower, axis=-1)
    normal = np.cross(upper, lower)
    straight = np.sum(normal * normal, axis=-1) < STRAIGHT_SINE**2 * upper_sq * lower_sq
    lengths = np.sqrt(upper_sq) + np.sqrt(lower_sq)
    near = np.linalg.norm(state.target_pos[hinges.pin] - head_u, axis=-1) < lengths * STRAIGHT_REACH
    stuck = straight & near & ~state.reached(tolerance)[hinges.pin]
    if not stuck.any():
        return None
    return _Limbs(hinges.upper[stuck], hinges.lower[stuck], hinges.end[stuck], hinges.pin[stuck])


def _allowed_bends(state, limbs, limits):
    """Per limb, the side its joint may bend to: opposite to where the centre of the lower
    bone's allowed swings tilts it from the upper bone (a knee bends forward when the shin may
    only swing back). Limbs whose lower bone has no such tilt keep their current side."""
    head_u, head_l = state.world_head[limbs.upper], state.world_head[limbs.lower]
    upper = (head_l - head_u) / np.linalg.norm(head_l - head_u, axis=-1, keepdims=True)
    centres = np.array([limits.kusudamas[b].centre for b in limbs.lower])
    allowed = (state.skeleton.parent_frames(limbs.lower, state.world) @ centres[..., None])[..., 0]
    tilt = allowed - np.sum(allowed * upper, axis=-1, keepdims=True) * upper
    tilted = np.linalg.norm(tilt, axis=-1, keepdims=True) > BEND_TILT
    return np.where(tilted, -tilt, upper)


def _sweep(state, plan, constants, settings, limits, iteration, accelerator, initial, max_step, deadline):
    """One EWBIK iteration: every batch's bone step, leaves first, then (with an accelerator)
    an Anderson step over the sweeps so far. The clock is read between batches (a sweep over
    thousands of bones can outlast the whole budget): past `deadline` the sweep stops there,
    without the Anderson step. Returns (total misfit, every pin reached, out of time)."""
    if accelerator is not None:
        accelerator.remember_start(state)
    out_of_time = False
    for batch, const in zip(plan.batches, constants):
        _solve_batch(state, batch, const, settings, limits, iteration)
        if deadline is not None and time.perf_counter() >= deadline:
            out_of_time = True
            break
    total, reached = state.errors(settings.tolerance)
    if accelerator is not None and not reached and not out_of_time:
        allowance = (iteration + 1) * max_step[accelerator.bones]
        return (*accelerator.extrapolate(state, total, limits, settings.tolerance, initial, allowance), False)
    state.forward()
    return total, reached, out_of_time


class _State:
    """The evolving pose plus the pinned bones' current frames (rotation matrices)."""

    def __init__(self, skeleton, pins, pin_bones, rotations, locations, levels, unit=1.0):
        self.skeleton, self.pins, self.unit = skeleton, pins, unit
        self.levels = levels
        self.rotations = rotations
        self.locations = locations
        n = len(skeleton)
        self.world = np.empty((n, 3, 3))
        self.world_head = np.empty((n, 3))
        self.pin_bones = np.array(pin_bones, dtype=int)
        self.weight = np.array([p.weight for p in pins], dtype=float)
        self.axis_weight = np.array([p.orientation_weights for p in pins], dtype=float).reshape(-1, 3)
        self.effector_pos = np.empty((len(pins), 3))
        self.effector_axes = np.empty((len(pins), 3, 3))
        self.capped = False  # whether a bone step of the current sweep was cut to its dampening
        self.aim(
            np.array([p.target_position for p in pins], dtype=float).reshape(-1, 3),
            _target_axes(np.array([p.target_rotation for p in pins], dtype=float).reshape(-1, 4)),
        )

    def aim(self, positions, axes):
        """Aim the pins at targets (P, 3) in the rig's units with `axes` (P, 3, 3) (`_target_axes`):
        their own, or a carried start's stage, which runs on the state as the last stage left it."""
        self.target_pos = positions / self.unit
        self.target_axes = axes

    @classmethod
    def like(cls, state):
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

    def forward(self):
        self.skeleton.forward_into(self.rotations, self.locations, self.world, self.world_head, self.levels)
        self.effector_pos[:] = self.world_head[self.pin_bones]
        self.effector_axes[:] = np.swapaxes(self.world[self.pin_bones], -1, -2)

    def squared_errors(self):
        """(squared position error (P,), squared axis chord of each axis (P, 3)) per pin."""
        pos2 = ((self.effector_pos - self.target_pos) ** 2).sum(-1)
        return pos2, ((self.effector_axes - self.target_axes) ** 2).sum(-1)

    def pin_costs(self, squared=None):
        """Each pin's seven-point misfit: (1 + 2 sum(w_axis)) |dp|^2 + 2 sum(w_axis |d axis|^2).

        The same measure the stabilization guard protects, so every acceptance
        test in the solver (guard, acceleration, limb finish) agrees on "better".
        """
        pos2, axis2 = squared if squared is not None else self.squared_errors()
        return (1.0 + 2.0 * self.axis_weight.sum(-1)) * pos2 + 2.0 * (self.axis_weight * axis2).sum(-1)

    def reached(self, tolerance, squared=None):
        """Per pin: within tolerance in position and on every weighted axis (or weightless).

        An axis chord below the tolerance means an angle below it too, so the
        check needs no trigonometry.
        """
        pos2, axis2 = squared if squared is not None else self.squared_errors()
        axis_ok = np.all((axis2 <= tolerance**2) | (self.axis_weight <= 0), axis=-1)
        return ((pos2 <= tolerance**2) & axis_ok) | (self.weight <= 0)

    def errors(self, tolerance):
        """(total weighted misfit, every pin within tolerance)."""
        squared = self.squared_errors()
        return float(np.sum(self.weight * self.pin_costs(squared))), bool(
            self.reached(tolerance, squared).all()
        )

    def pin_errors(self):
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


def _target_axes(rotations):
    """(..., 3, 3) the axes of frames turned by unit quaternions (..., 4), one axis per row: how
    a pin's target orientation is compared with its bone's axes."""
    return np.ascontiguousarray(np.swapaxes(quat.to_matrix(rotations), -1, -2))


@dataclass
class _BatchConstants:
    """What a batch step needs that stays fixed for a whole solve, gathered once."""

    w_origin: np.ndarray  # (k, S) origin weight: w + 2 sum(w_axis)
    w_axis: np.ndarray  # (k, S, 3) axis weights: 2 w_axis
    target_axes: np.ndarray  # (k, S, 3, 3)
    axis_fit: np.ndarray  # (k,) sum of w_axis (|e|^2 + |t|^2) for unit axes
    max_angle: np.ndarray  # (k,) dampening of each bone (pi for a translating root)
    relaxation: np.ndarray  # (k,)
    translating: bool
    limited: bool


def _batch_constants(state, batch, max_step, settings, limits):
    """The paper's seven points per pin (origin, origin +- each axis) give the
    same covariance as the origin at weight w + 2 sum(w_axis) plus each axis
    at 2 w_axis: mirrored pairs cancel their cross terms."""
    w_pin = state.weight[batch.seen] * batch.factor
    w_axis = 2.0 * w_pin[..., None] * state.axis_weight[batch.seen]
    return _BatchConstants(
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


def _solve_batch(state, batch, const, settings, limits, iteration):
    """One EWBIK bone step for every bone of the batch at once.

    csrc/ewbik.c's solve_bone_step takes the same steps for one bone at a time.
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


class _Anderson:
    """Anderson acceleration of the EWBIK sweep seen as a fixed-point map on the pose.

    The pose is the rotation vectors (and translating roots' locations) of the
    solved bones. From the last few sweeps it extrapolates where the sweeps are
    heading; the guess is kept only if it lowers the total pin misfit and no
    bone ends farther from where the solve started than the dampening allows
    for the iterations run (so dragging stays as continuous as without it).
    """

    def __init__(self, memory, plan):
        self.memory = memory
        self.bones = np.flatnonzero(plan.solved)
        self.inputs, self.outputs = [], []

    def remember_start(self, state):
        self.start = self._pose(state)

    def _pose(self, state):
        return np.concatenate((_log(state.rotations[self.bones]), state.locations[self.bones]), axis=-1)

    def extrapolate(self, state, total, limits, tolerance, initial, allowance):
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


def _finish_limbs(state, limbs, frozen, limits, initial, allowance, bend=None):
    """Place each single-pin two-bone limb exactly with analytic IK, then turn its end bone.

    The joint stays on the side the iterations bent it to, or bends toward `bend` (L, 3). A limb is put back
    as it was if its pin ends up farther from its target (joint limits can
    prevent the exact pose) or if a bone would end farther from where the solve
    started than the dampening allows for the iterations run, so the finish
    never makes a pose jump that the iterations themselves could not.
    """
    skel = state.skeleton
    upper, lower, end, pin = limbs.upper, limbs.lower, limbs.end, limbs.pin
    head_u, head_l, head_e = state.world_head[upper], state.world_head[lower], state.world_head[end]
    joint, tip = two_bone_ik(
        head_u,
        state.target_pos[pin],
        np.linalg.norm(head_l - head_u, axis=-1),
        np.linalg.norm(head_e - head_l, axis=-1),
        head_l - head_u if bend is None else bend,
    )
    turn_u = quat.shortest_arc(head_l - head_u, joint - head_u)
    turn_l = quat.multiply(quat.shortest_arc(quat.rotate(turn_u, head_e - head_l), tip - joint), turn_u)
    world_u = quat.to_matrix(turn_u) @ state.world[upper]
    world_l = quat.to_matrix(turn_l) @ state.world[lower]
    world_e = quat.to_matrix(turn_l) @ state.world[end]
    axes = np.swapaxes(world_e, -1, -2)
    axis_cov = np.einsum("la,lai,laj->lij", state.axis_weight[pin], axes, state.target_axes[pin])
    turn_e = quat.to_matrix(rotations_from_covariance(axis_cov))
    turn_e[frozen[end]] = np.eye(3)
    world_e = turn_e @ world_e

    bones = np.concatenate((upper, lower, end))
    old = state.rotations[bones].copy()
    frames = np.concatenate(
        (
            skel.parent_frames(upper, state.world),
            world_u @ skel.local_rest_matrix[lower],
            world_l @ skel.local_rest_matrix[end],
        )
    )
    new = quat.from_matrix(np.swapaxes(frames, -1, -2) @ np.concatenate((world_u, world_l, world_e)))
    if limits is not None:
        new = limits.constrain(bones, new, 0)
    new = quat.normalize(new)
    travel = quat.angle(quat.multiply(quat.conjugate(initial[bones]), new))
    too_far = (travel > allowance[bones] + 1e-12).reshape(3, -1).any(0)
    before = state.pin_costs()[pin]
    state.rotations[bones] = new
    state.forward()
    worse = np.tile((state.pin_costs()[pin] > before) | too_far, 3)
    if np.any(worse):
        state.rotations[bones[worse]] = old[worse]
        state.forward()


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
    rotations = _checked_rotations(skeleton, rotations)
    locations = _checked_array(skeleton, locations, (n, 3), "location", MAX_COORDINATE)
    stiffness = (
        np.zeros(n) if stiffness is None else _checked_array(skeleton, stiffness, (n,), "stiffness", 1.0)
    )
    if np.any(stiffness < 0):
        raise SceneError(f"bones[{int(np.flatnonzero(stiffness < 0)[0])}].stiffness", "must lie in [0, 1]")
    index = skeleton.index
    pin_bones = [index.get(pin.bone) if isinstance(pin, Pin) else None for pin in pins]
    if None in pin_bones or len(set(pin_bones)) < len(pin_bones):
        _refuse_pins(skeleton, pins)
    return pin_bones, rotations, locations, stiffness


def _checked_stretch(skeleton, stretch):
    """(N,) each bone's maximum stretch, within [1, MAX_STRETCH]; SceneError naming the bone otherwise."""
    stretch = _checked_array(skeleton, stretch, (len(skeleton),), "stretch", MAX_STRETCH)
    if np.any(stretch < 1.0):
        i = int(np.flatnonzero(stretch < 1.0)[0])
        raise SceneError(
            f"bones[{i}].stretch", f"must lie in [1, {MAX_STRETCH:g}] (bone '{skeleton.names[i]}')"
        )
    return stretch


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


def _checked_array(skeleton, values, shape, field, bound):
    """Finite values within [-bound, bound]; fields name the bone in skeleton order (`bones[i].location`)."""
    try:
        arr = np.array(values, dtype=float, order="C")
    except (TypeError, ValueError, OverflowError):
        raise SceneError(field, f"must be an array of numbers of shape {shape}") from None
    if arr.shape != shape:
        raise SceneError(field, f"expected shape {shape}, got {arr.shape}")
    if not np.abs(arr).max() <= bound:  # NaN fails the comparison too
        bad = ~(np.isfinite(arr) & (np.abs(arr) <= bound)).reshape(shape[0], -1).all(-1)
        i = int(np.flatnonzero(bad)[0])
        raise SceneError(
            f"bones[{i}].{field}",
            f"contains NaN, infinity or a value beyond {bound:g} (bone '{skeleton.names[i]}')",
        )
    return arr


def _checked_rotations(skeleton, rotations):
    arr = _checked_array(skeleton, rotations, (len(skeleton), 4), "rotation", MAX_COORDINATE)
    norm = np.linalg.norm(arr, axis=-1)
    if norm.min() < 1e-9:
        i = int(np.flatnonzero(norm < 1e-9)[0])
        raise SceneError(f"bones[{i}].rotation", f"is a zero quaternion (bone '{skeleton.names[i]}')")
    return arr / norm[:, None]
