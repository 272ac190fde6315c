"""Solve one armature: read its pose and pins, solve, blend by the influence, write the pose back.

Bones no solve may turn (`Rig.solve_stiffness`: fully locked, held) are handed to the solver as
stiffness 1 so they never absorb motion that would be thrown away. The solver sees only the
pinned chains (`rig_cache.PinnedChains`): the other bones keep their channels, so a rig's extra
bones cost a solve nothing. Arrays in the returned SolveResult follow `obj.pose.bones` order.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from ...solver import EwbikError, Pin, SolverSettings, quat, solve
from ..bridge import pose_underneath
from ..bridge.pin_reading import read_pins
from ..bridge.pose_io import read_pose, write_pose
from ..bridge.rig_cache import rig_for
from ..com.armature_checks import RigError, armature_scale, check_writable
from ..com.stored_settings import stored_solver_settings
from ..rigs.balance_body import chains_body
from ..rigs.production_checks import check_pins_movable, place_ik_controls

if TYPE_CHECKING:
    import bpy

    from ...solver import SolveResult
    from ..bridge.pose_io import Locks
    from ..bridge.rig_cache import Rig


def solve_armature(
    obj: bpy.types.Object,
    *,
    full: bool = False,
    rescan: bool = True,
    only_targets_moved: bool = False,
    depsgraph: bpy.types.Depsgraph | None = None,
) -> SolveResult:
    """Read the armature's pose and pins, solve, write the moved bones back.

    full: ignore the time budget (the Solve operator, baking).
    rescan: re-read per-bone settings (pins, stiffness, limits). The live handler
    passes False when only pin targets moved since the last solve.
    only_targets_moved: since this armature's last solve nothing changed but its targets (the
    live handler knows from the depsgraph), so its pose channels are not read from Blender again
    (`read_pose`), its settings are the ones that solve used and its pins, which passed
    `check_pins_movable` then, are not checked against the rig's constraints again.
    depsgraph: the one whose evaluation the targets are read from (a render's); None: the file's.
    Raises an EwbikError (a RigError, or the solver's own refusal) for anything the user must fix;
    the pose is then unchanged (unless the second solve for partly locked bones fails: the first
    solve's pose stays). The result's `ms` is the whole call's, so a live solve that used up its
    budget anywhere is refined.
    """
    started = time.perf_counter()
    check_writable(obj)
    influence(obj)
    rig = rig_for(obj, rescan)
    if not rig.pins:
        raise no_pins(obj)
    if not (only_targets_moved and rig.last_settings is not None):
        check_pins_movable(obj, rig)
    assert rig.placed is not None and rig.chains is not None  # scanned, with pins
    if rig.placed.any():
        place_ik_controls(obj, rig)
    rotations, locations, locks = read_start_pose(obj, rig, only_targets_moved)
    # Before the pins: a zero scale would make their targets infinitely far.
    settings = settings_for(obj, rig, full, only_targets_moved)
    pins = read_pins(obj, rig, depsgraph)
    stiffness = rig.solve_stiffness(locks, rig.chains.rows)
    start = pose_underneath.start_pose(rig)
    pins, settings = _place_rotation_only(rig, pins, settings, stiffness, *start)
    before = (rotations, locations, locks)
    result = _solve_holding_partial_locks(obj, rig, pins, settings, stiffness, start, before, started)
    return dataclasses.replace(result, ms=(time.perf_counter() - started) * 1e3)


def _solve_holding_partial_locks(
    obj: bpy.types.Object,
    rig: Rig,
    pins: list[Pin],
    settings: SolverSettings,
    stiffness: np.ndarray,
    start: tuple[np.ndarray, np.ndarray],
    before: tuple[np.ndarray, np.ndarray, Locks],
    started: float,
) -> SolveResult:
    """Solve and write; then, where keeping partly locked channels changed a bone, solve again.

    The solver cannot see partial locks, so where keeping the locked channels changed a bone,
    the written pose misses the targets by what those channels contributed. A second solve
    from that pose, with those bones held, lets the other bones make up for it.
    """
    result, solved = _solve_and_write(obj, rig, pins, settings, stiffness, start, before)
    locks = before[2]
    if not np.any(result.moved & locks.partly_locked):
        return result
    turned = np.abs(np.einsum("ij,ij->i", result.rotations, solved)) < 1.0 - 1e-12
    held = result.moved & locks.partly_locked & turned
    if not np.any(held):
        return result
    if settings.time_budget_ms is not None:
        left = settings.time_budget_ms - (time.perf_counter() - started) * 1e3
        if left <= 0.0:
            return result
        settings = dataclasses.replace(settings, time_budget_ms=left)
    rotations, locations, locks = read_pose(obj, rig)
    assert rig.chains is not None  # the rig has pins
    stiffness[held[rig.chains.rows]] = 1.0
    before = (rotations, locations, locks)
    second, _ = _solve_and_write(obj, rig, pins, settings, stiffness, (rotations, locations), before)
    return dataclasses.replace(
        second, iterations=result.iterations + second.iterations, moved=result.moved | second.moved
    )


def read_start_pose(
    obj: bpy.types.Object, rig: Rig, only_targets_moved: bool
) -> tuple[np.ndarray, np.ndarray, Locks]:
    """(rotations, locations, locks) of the channels, the pose underneath tracked from them
    (`pose_underneath`: where the solve starts); when only targets moved since the last solve,
    the rig's buffers stand for the channels (`read_pose`)."""
    assert rig.placed is not None  # scanned by rig_for
    channels_kept = only_targets_moved and not rig.placed.any()  # placing IK controls set their channels
    rotations, locations, locks = read_pose(obj, rig, channels_kept)
    pose_underneath.track(obj, rig, rotations, locations, channels_kept)
    return rotations, locations, locks


def settings_for(obj: bpy.types.Object, rig: Rig, full: bool, only_targets_moved: bool) -> SolverSettings:
    """`solver_settings`, or the ones the rig's last solve used when only targets moved since
    (the armature's settings and scale are as they were)."""
    if only_targets_moved and rig.last_settings is not None and rig.last_settings[0] == full:
        return rig.last_settings[1]
    rig.last_settings = None  # until these are known good
    settings = solver_settings(obj, full)
    rig.last_settings = (full, settings)
    return settings


def solver_settings(obj: bpy.types.Object, full: bool) -> SolverSettings:
    """The solver's settings; the tolerance is a scene distance, turned into armature units."""
    props = obj.ewbik
    budget = props.time_budget_ms
    axes = [abs(s) for s in obj.matrix_world.to_scale()]
    if not min(axes) > 1e-6 * max(max(axes), 1e-300):
        raise RigError.about(
            obj.name,
            "scale",
            f"has zero scale on an axis (scale {', '.join(f'{s:g}' for s in axes)}): "
            "give it a scale in every axis to solve",
        )
    stored = {name: getattr(props, name) for name in stored_solver_settings()}
    stored.update(
        time_budget_ms=None if full or budget <= 0.0 else budget,
        tolerance=props.tolerance / armature_scale(obj),
    )
    try:
        return _settings_of(tuple(stored.items()))
    except EwbikError as error:
        raise RigError.told_after(f"'{obj.name}' ", error) from None


@functools.lru_cache(maxsize=64)
def _settings_of(fields: tuple[tuple[str, Any], ...]) -> SolverSettings:
    """SolverSettings from (name, value) pairs, validated once per distinct set of values (every
    live update asks again for the same ones)."""
    return SolverSettings(**dict(fields))


def _place_rotation_only(
    rig: Rig,
    pins: list[Pin],
    settings: SolverSettings,
    stiffness: np.ndarray,
    rotations: np.ndarray,
    locations: np.ndarray,
) -> tuple[list[Pin], SolverSettings]:
    """(pins, settings): each rotation-only pin's position set where the rest of the body puts its bone.

    The solver's pins always hold a position, so a rotation-only pin gets, as its position, the
    bone's head in a solve of the other pins (or in the current pose when there are none): the
    body goes where the other pins take it, and the pin only turns its bone. That costs a second
    solve, only while some pin is rotation-only; the two share the live time budget, so the returned
    settings give the main solve its half.
    """
    assert rig.checked_pins is not None and rig.chains is not None  # as read_pins read them
    placed = [kind.placed_by_other_pins for kind in rig.checked_pins.kinds]
    if not any(placed):
        return pins, settings
    rows, skeleton, limits = rig.chains.rows, rig.chains.skeleton, rig.chains.limits
    solver_rotations, solver_locations = rotations[rows], locations[rows]
    others = [pin for pin, by_others in zip(pins, placed) if not by_others]
    if others and settings.time_budget_ms is not None:
        settings = dataclasses.replace(settings, time_budget_ms=settings.time_budget_ms / 2.0)
    if others:
        others_solved = solve(
            skeleton, others, solver_rotations, solver_locations, settings, limits, stiffness
        )
        solver_rotations, solver_locations = others_solved.rotations, others_solved.locations
    _, heads = skeleton.forward(solver_rotations, solver_locations)
    placed_pins = []
    for pin, by_others in zip(pins, placed):
        if by_others:
            matrix = pin.target.copy()
            matrix[:3, 3] = heads[skeleton.index[pin.bone]]
            pin = Pin(pin.bone, matrix, pin.weight, pin.orientation_weights, pin.falloff)
        placed_pins.append(pin)
    return placed_pins, settings


def _solve_and_write(
    obj: bpy.types.Object,
    rig: Rig,
    pins: list[Pin],
    settings: SolverSettings,
    stiffness: np.ndarray,
    start: tuple[np.ndarray, np.ndarray],
    before: tuple[np.ndarray, np.ndarray, Locks],
) -> tuple[SolveResult, np.ndarray]:
    """Solve the pinned chains from `start` (rotations, locations; pose.bones order) and write the
    moved bones; `before` is the (rotations, locations, locks) of the channels read.

    Returns (the result with the rotations as written, the rotations meant to be written: the solver's
    own, blended by the influence), both in pose.bones order.
    """
    start_rotations, start_locations = start
    assert rig.chains is not None  # the rig has pins
    rows = rig.chains.rows
    result = solve(
        rig.chains.skeleton,
        pins,
        start_rotations[rows],
        start_locations[rows],
        settings,
        rig.chains.limits,
        stiffness,
        rig.chains.stretch if len(rig.chains.stretchable) else None,
        chains_body(obj, rig, start) if settings.balance else None,
    )
    solved_rotations, solved_locations = start_rotations.copy(), start_locations.copy()
    solved_rotations[rows], solved_locations[rows] = result.rotations, result.locations
    moved, exceeded = np.zeros(len(start_rotations), bool), np.zeros(len(start_rotations))
    moved[rows], exceeded[rows] = result.moved, result.limits_exceeded
    result = dataclasses.replace(result, limits_exceeded=exceeded)
    _write_stretch(obj, rig, result.scales)
    return write_solved(obj, rig, result, solved_rotations, solved_locations, moved, before, settings)


def _write_stretch(obj: bpy.types.Object, rig: Rig, scales: np.ndarray | None) -> None:
    """Each stretchable bone of the pinned chains gets the Y scale that makes it `scales` (chain
    order: each bone's length factor) times as long, blended by the influence: its own factor
    over its parent's, since a child inherits its parent's scale along the (straight) chain.
    A stretchable bone's Y scale is the solver's; others are never written."""
    chains = rig.chains
    assert chains is not None  # the rig has pins
    if not len(chains.stretchable):
        return
    assert scales is not None and chains.stretch is not None  # the solve was given the stretch
    shown = 1.0 + influence(obj) * (scales - 1.0)
    parents = chains.skeleton.parents
    pose_bones = obj.pose.bones
    for k in chains.stretchable.tolist():
        parent = parents[k]
        local = shown[k] / (shown[parent] if parent >= 0 and chains.stretch[parent] > 1.0 else 1.0)
        scale = pose_bones[int(chains.rows[k])].scale
        if scale[1] != np.float32(local):
            scale[1] = local


def write_solved(
    obj: bpy.types.Object,
    rig: Rig,
    result: SolveResult,
    solved_rotations: np.ndarray,
    solved_locations: np.ndarray,
    moved: np.ndarray,
    before: tuple[np.ndarray, np.ndarray, Locks],
    settings: SolverSettings,
) -> tuple[SolveResult, np.ndarray]:
    """Blend a solved pose (pose.bones order) over the pose underneath, write it and remember it;
    `before` is the (rotations, locations, locks) read before the solve. Returns what
    `_solve_and_write` returns."""
    rotations, locations, locks = before
    moved = moved | rig.placed
    shown_rotations, shown_locations, changes = _blend_over_underneath(
        obj, rig, solved_rotations, solved_locations, rotations, locations, moved
    )
    if not (np.all(np.isfinite(shown_rotations)) and np.all(np.isfinite(shown_locations))):
        reason = "the solver produced an invalid pose; the pose was left unchanged"
        raise RigError("pose", reason, f"'{obj.name}': {reason}")
    written_rotations = write_pose(
        obj, rig, locks, changes, shown_rotations, shown_locations, settings.translate_root
    )
    pose_underneath.remember(
        obj,
        rig,
        np.where(changes[:, None], written_rotations, rotations),
        np.where(changes[:, None], shown_locations, locations) if settings.translate_root else locations,
    )
    written = dataclasses.replace(result, rotations=written_rotations, locations=shown_locations, moved=moved)
    return written, shown_rotations


def influence(obj: bpy.types.Object) -> float:
    """The armature's Influence, refused outside [0, 1]: a NaN (typed in, or keyed on an F-curve)
    passes every comparison with 1 and would blend the solve into a NaN pose."""
    value = float(obj.ewbik.influence)
    if not 0.0 <= value <= 1.0:
        raise RigError.about(
            obj.name, "influence", f"influence is {value:g}: give it a value from 0 to 1 (or fix its keys)"
        )
    return value


def no_pins(obj: bpy.types.Object) -> RigError:
    """The refusal to solve an armature without pins."""
    return RigError.about(obj.name, "pins", "has no pinned bones: select bones in Pose Mode and use Pin")


def _blend_over_underneath(
    obj: bpy.types.Object,
    rig: Rig,
    solved_rotations: np.ndarray,
    solved_locations: np.ndarray,
    rotations: np.ndarray,
    locations: np.ndarray,
    moved: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The solved pose blended over the pose underneath by the armature's Influence (pose.bones order).

    Like a constraint's Influence: 1 shows the solve, 0 the animation (or hand pose) underneath. Bones
    whose blended pose equals what they hold already are not written, so at 0 keyed channels are left
    exactly as the animation set them. Returns (rotations, locations, bones to write).
    """
    weight = influence(obj)
    if weight >= 1.0:
        return solved_rotations, solved_locations, moved
    assert rig.underneath is not None  # tracked by read_start_pose
    base_rotations, base_locations = rig.underneath
    blended = quat.part_way(base_rotations, solved_rotations, weight)
    blended_locations = base_locations + weight * (solved_locations - base_locations)
    unchanged = (1.0 - np.abs(np.einsum("ij,ij->i", blended, rotations)) <= 1e-12) & np.all(
        np.abs(blended_locations - locations) <= 1e-7, axis=1
    )
    return blended, blended_locations, moved & ~unchanged
