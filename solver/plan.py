"""The plan of a solve: which bones see which pins, and in which batches they are solved.

Bones with the same height above their deepest solved descendant never share a pin and never
contain each other, so each height is one batch: the loop steps all of its bones at once (one
QCP call, one dampening clamp, one limits call and one guard check for all of them in numpy; one
bone after another in C, which gives the same result). A plan depends only on the skeleton, the
pinned bones, their falloffs, the frozen bones and root translation, so each skeleton keeps the
plans it was asked for (`Skeleton.plan_cache`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .polish import pin_trees, polish_plan

if TYPE_CHECKING:
    from .skeleton import Skeleton

_PLANS_KEPT = 256  # plans kept per skeleton, the oldest dropped first (a crowd of 20 rigs asks for ~120)


@dataclass
class Batch:
    bones: np.ndarray  # (k,) bones solved together
    seen: np.ndarray  # (k, S) pin indices each bone solves for (padded)
    factor: np.ndarray  # (k, S) falloff factor of each seen pin (0 = padding)
    moved_rows: np.ndarray  # (M,) row in `bones` of each (bone, descendant pin) pair
    moved_pins: np.ndarray  # (M,) pin carried along when that bone turns
    translating: np.ndarray  # (k,) bool: a root that may also move


@dataclass
class Limbs:
    upper: np.ndarray  # (L,) the three bones of each two-bone limb ending in a pin
    lower: np.ndarray
    end: np.ndarray
    pin: np.ndarray


@dataclass
class Plan:
    solved: np.ndarray
    batches: list
    limbs: Limbs
    levels: tuple  # forward-kinematics levels of the pinned bones and their ancestors
    trees: list  # pin indices grouped by the solved bones they share (`polish.pin_trees`)
    polish: object  # one PolishPlan per tree of pins, or None where the sweeps minimise something else
    native_template: object = None  # the plan packed for the compiled loop, made on first use
    lineage: Lineage | None = None  # made on first use (`lineage_of`): only restarts under limits ask


@dataclass
class Lineage:
    """Who carries whom among a plan's solved bones (`bones` (S,)): `moves` (P, S) pin p lies on
    or below solved bone s; `carries` (S, S) solved bone i is solved bone j or above it. Kept
    with the plan, so a restart finds the bones below those that missed without walking the
    skeleton again."""

    bones: np.ndarray
    moves: np.ndarray
    carries: np.ndarray


def plan_solve(
    skeleton: Skeleton,
    pin_bones: Sequence[int],
    falloffs: Sequence[float],
    frozen: np.ndarray,
    translate_root: bool,
) -> Plan:
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
    plan = Plan(
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
    seen: list[list[tuple[int, float]]] = [[] for _ in range(len(skeleton))]
    below: list[list[int]] = [[] for _ in range(len(skeleton))]
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
    return Batch(bones, seen_idx, factor, np.array(rows, int), np.array(pins, int), translating)


def lineage_of(plan: Plan, skeleton: Skeleton, pin_bones: np.ndarray) -> Lineage:
    """The plan's `Lineage`, made on first use and kept with it."""
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
        plan.lineage = Lineage(bones, moves, carries)
    return plan.lineage


def _limbs(skeleton, pin_bones, below, solved):
    """The two-bone limbs ending in a pin that no other pin shares, both their bones solved."""
    limbs = []
    for p, end in enumerate(pin_bones):
        limb = skeleton.limb_above(end)
        if limb is not None and below[limb[0]] == [p] and solved[limb[1]] and solved[limb[0]]:
            limbs.append((*limb, end, p))
    return Limbs(*np.array(limbs, dtype=int).reshape(-1, 4).T)


def missed_bones_each(
    plan: Plan, skeleton: Skeleton, pin_bones: np.ndarray, movable: np.ndarray, groups: np.ndarray
) -> np.ndarray:
    """(K, N) bool: for each row of `groups` (K, P) bool, the `movable` (N,) solved bones that move
    a pin of that row, and those below them (`Attempt._missed_bones`)."""
    lineage = lineage_of(plan, skeleton, pin_bones)
    movable = movable[lineage.bones]
    seeds = (groups @ lineage.moves) & movable
    carried = np.zeros((len(groups), len(skeleton)), dtype=bool)
    carried[:, lineage.bones] = (seeds @ lineage.carries) & movable
    return carried
