"""Several live armatures solved in one solver call, as one skeleton with a root per armature."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ...solver import EwbikError, Skeleton, solve
from ...solver.kusudama import JointLimits, Kusudama
from ..bridge import pose_underneath
from ..bridge.pin_reading import read_pins
from ..bridge.rig_cache import crowds, rig_for
from ..com.armature_checks import check_writable
from ..rigs.production_checks import check_pins_movable
from . import armature_solve

if TYPE_CHECKING:
    import bpy

    from ...solver import Pin, SolveResult, SolverSettings
    from ..bridge.pose_io import Locks
    from ..bridge.rig_cache import Rig

    # (armature, its rig, its pins, its start pose, its channels read: rotations, locations, locks)
    _Entry = tuple[
        bpy.types.Object, Rig, list[Pin], tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, Locks]
    ]


@dataclasses.dataclass
class _Crowd:
    """Several rigs as one skeleton with a root per armature, cached while the rigs stay the same."""

    key: tuple
    skeleton: Skeleton
    pose_index: list[np.ndarray]  # per rig: pose.bones index -> combined skeleton index
    limits: JointLimits | None


def solve_crowd(
    objects: Iterable[bpy.types.Object],
    only_targets_moved: Collection[bpy.types.Object] = frozenset(),
    full: bool = False,
) -> dict[bpy.types.Object, SolveResult | EwbikError]:
    """Solve several live armatures in one solver call (their bone settings as last scanned).

    Armatures with the same settings (and rig size) become one problem whose skeleton holds each
    of them as its own tree, with the sum of their time budgets; the others, and armatures with
    partly locked bones (which need a second solve), are solved one by one. Returns
    {object: SolveResult or EwbikError}, the poses written like `solve_armature`.
    only_targets_moved: the armatures that nothing but their targets changed since their last
    solve (`solve_armature`'s argument): their pose is taken from what that solve wrote.
    full: no time budget (baking).
    """
    outcomes: dict[bpy.types.Object, SolveResult | EwbikError] = {}
    groups: dict[tuple[str, float], tuple[SolverSettings, list[_Entry]]] = {}
    alone: list[bpy.types.Object] = []
    for obj in objects:
        try:
            check_writable(obj)
            rig = rig_for(obj, False)
            if not rig.pins:
                raise armature_solve.no_pins(obj)
            check_pins_movable(obj, rig)
            kept = obj in only_targets_moved
            settings = armature_solve.settings_for(obj, rig, full, kept)
            rotations, locations, locks = armature_solve.read_start_pose(obj, rig, kept)
            pins = read_pins(obj, rig)
            if _needs_own_solve(obj, rig, locks):
                alone.append(obj)
                continue
            entry = (obj, rig, pins, pose_underneath.start_pose(rig), (rotations, locations, locks))
        except EwbikError as error:
            outcomes[obj] = error
            continue
        groups.setdefault((repr(settings), rig.skeleton.unit), (settings, []))[1].append(entry)
    for settings, entries in groups.values():
        if len(entries) == 1:
            alone.append(entries[0][0])
        else:
            outcomes.update(_solve_together(settings, entries))
    for obj in alone:
        outcomes[obj] = _solve_alone(obj, obj in only_targets_moved, full)
    return outcomes


def _needs_own_solve(obj: bpy.types.Object, rig: Rig, locks: Locks) -> bool:
    """Partly locked bones (a second solve holds them), rotation-only pins (placed by a solve of
    their own), an influence below 1 (a start and a blend of their own) and bones the rig itself
    poses or places (constraints, drivers, IK controls) are solved alone."""
    if not obj.ewbik.influence >= 1.0 or np.any(rig.driven & locks.partly_locked):
        return True
    if np.any(rig.held) or np.any(rig.placed) or np.any(rig.fixed_mask):
        return True
    assert rig.checked_pins is not None  # checked by read_pins
    return any(kind.placed_by_other_pins for kind in rig.checked_pins.kinds)


def _solve_alone(obj: bpy.types.Object, only_targets_moved: bool, full: bool) -> SolveResult | EwbikError:
    try:
        return armature_solve.solve_armature(
            obj, full=full, rescan=False, only_targets_moved=only_targets_moved
        )
    except EwbikError as error:
        return error


def _solve_together(
    settings: SolverSettings, entries: Sequence[_Entry]
) -> dict[bpy.types.Object, SolveResult | EwbikError]:
    """One solve for the entries (obj, rig, pins, start pose, channels read: rotations, locations,
    locks); each pose written."""
    crowd = _crowd_for([entry[1] for entry in entries])
    outcomes: dict[bpy.types.Object, SolveResult | EwbikError]
    n = len(crowd.skeleton.names)
    all_rotations, all_locations, stiffness = np.empty((n, 4)), np.empty((n, 3)), np.empty(n)
    pins = []
    for k, (_obj, rig, rig_pins, start, before) in enumerate(entries):
        index = crowd.pose_index[k]
        all_rotations[index], all_locations[index] = start
        stiffness[index] = rig.solve_stiffness(before[2])
        pins += [pin.renamed(f"{k}/{pin.bone}") for pin in rig_pins]
    if settings.time_budget_ms is not None:
        settings = dataclasses.replace(settings, time_budget_ms=settings.time_budget_ms * len(entries))
    try:
        result = solve(crowd.skeleton, pins, all_rotations, all_locations, settings, crowd.limits, stiffness)
    except EwbikError as error:
        return {entry[0]: error for entry in entries}
    outcomes, first_pin = {}, 0
    for k, (obj, rig, rig_pins, _start, before) in enumerate(entries):
        index, pin_slice = crowd.pose_index[k], slice(first_pin, first_pin + len(rig_pins))
        first_pin = pin_slice.stop
        one = dataclasses.replace(
            result,
            position_errors=result.position_errors[pin_slice],
            ms=result.ms / len(entries),
            orientation_errors_deg=result.orientation_errors_deg[pin_slice],
            yielded=result.yielded[pin_slice],
            beyond_reach=result.beyond_reach[pin_slice],
            limits_exceeded=result.limits_exceeded[index],
        )
        try:
            outcomes[obj] = armature_solve.write_solved(
                obj,
                rig,
                one,
                result.rotations[index],
                result.locations[index],
                result.moved[index],
                before,
                settings,
            )[0]
        except EwbikError as error:
            outcomes[obj] = error
    return outcomes


def _crowd_for(rigs: Sequence[Rig]) -> _Crowd:
    """The cached combined skeleton and limits of these rigs (bone names prefixed by the rig's
    place, `k/name`)."""
    key = tuple((rig.structure_key, rig.settings_key) for rig in rigs)
    crowd = crowds.get(key)
    if crowd is not None:
        return crowd
    names, parents, rest, lengths, kusudamas = [], [], [], [], {}
    for k, rig in enumerate(rigs):
        skeleton = rig.skeleton
        names += [f"{k}/{name}" for name in skeleton.names]
        parents += [None if p < 0 else f"{k}/{skeleton.names[p]}" for p in skeleton.parents]
        rest.append(skeleton.rest)
        lengths.append(skeleton.lengths)
    skeleton = Skeleton(names, parents, np.concatenate(rest), np.concatenate(lengths))
    pose_index = []
    for k, rig in enumerate(rigs):
        in_skeleton = np.array([skeleton.index[f"{k}/{name}"] for name in rig.skeleton.names])
        pose_index.append(in_skeleton[rig.to_solver])
        for bone, limit in (rig.limit_dicts or {}).items():
            kusudamas[skeleton.index[f"{k}/{bone}"]] = Kusudama.from_dict(limit, bone=bone)
    limits = JointLimits(kusudamas, len(names)) if kusudamas else None
    crowds.clear()  # one crowd at a time: the scene's live armatures
    crowd = crowds[key] = _Crowd(key, skeleton, pose_index, limits)
    return crowd
