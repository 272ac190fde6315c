"""Look-at pins (`Pin.aim`): a bone's axis points at a target whose position the bone need not reach.

The pins that do not aim are solved first, which places the aimed bones' heads where the rest
of the body puts them. An aim pin holds no position, so where its bone may turn (not frozen),
no other pin hangs from it and no joint limits bind it, the bone is then turned about its head
by the shortest arc from its axis to the way to its target (`_turned_to_aims`): the aim is exact,
nothing else moves, and one solve serves.

Otherwise (limits, or another pin below the aimed bone, where the aim and that pin share the
miss by their weights and priorities) an aim pin is solved as a fixed point above the loops: it
becomes an ordinary pin that holds the bone's head where it is and weighs only the aimed axis,
turned toward the target from that head (`_placed`); each round solves every pin from the last
round's pose and re-aims from the new heads, until no head moved enough to turn the way to its
target by more than the tolerance (an arc of the rig's size, as the loops count an axis). The
heads move little once the others are met (only the aimed bones and what holds them turn), so a
few rounds do. Either way the answer is a function of the targets, the settings and the start
pose.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from . import quat
from .pins import AIM_AXES, Pin

if TYPE_CHECKING:
    from .kusudama import JointLimits
    from .skeleton import Skeleton
    from .solve import SolveResult

AIM_ROUNDS = 8  # at most this many re-aimed solves after the heads are placed
_AXIS = {name: (k // 2, 1.0 if k % 2 == 0 else -1.0) for k, name in enumerate(AIM_AXES)}
_SAME_POINT = 1e-12  # relative distance below which the target sits on the head: no direction


def solve_aimed(
    solve_pins: Callable[[Sequence[Pin], np.ndarray, np.ndarray], SolveResult],
    skeleton: Skeleton,
    pins: Sequence[Pin],
    rotations: np.ndarray,
    locations: np.ndarray,
    tolerance: float,
    frozen: np.ndarray | None = None,
    limits: JointLimits | None = None,
) -> SolveResult:
    """The SolveResult of pins some of which aim (`Pin.aim`): a solve of the others, then each
    aimed bone turned to its target (`_turned_to_aims`) or, where that cannot serve, re-aimed
    solves.

    `solve_pins(pins, rotations, locations)` is `solve` on checked arguments (the caller's
    settings and time budget); `tolerance` the settings' (armature units); `frozen` (N,) bool
    the bones the solve may not turn (None: not known, re-aimed solves); `limits` the joint
    limits (re-aimed solves where there are some). An aim pin reports position error 0 (its
    position is free) and as orientation error the angle between its axis and the way to its
    target; the solve converged when every pin is within tolerance, an axis counting as an arc
    of the rig's size (as in the loops).
    """
    aiming = np.array([pin.aim is not None for pin in pins])
    bones = np.array([skeleton.index[pin.bone] for pin in pins])
    others = [pin for pin, aims in zip(pins, aiming) if not aims]
    if others and frozen is not None and limits is None and _turnable(skeleton, pins, bones, frozen):
        return _turned_to_aims(
            solve_pins(others, rotations, locations), skeleton, pins, aiming, bones, tolerance
        )
    pose, iterations, moved = (rotations, locations), 0, np.zeros(len(skeleton), dtype=bool)
    if others:
        first = solve_pins(others, rotations, locations)
        pose, iterations, moved = (first.rotations, first.locations), first.iterations, first.moved
    heads = skeleton.forward(*pose)[1][bones]
    for _ in range(AIM_ROUNDS):
        result = solve_pins(_placed(skeleton, pins, pose), *pose)
        iterations += result.iterations
        moved |= result.moved
        pose = (result.rotations, result.locations)
        new_heads = skeleton.forward(*pose)[1][bones]
        turned = _way_turned(pins, heads, new_heads)[aiming].max()
        heads = new_heads
        if not turned > tolerance / skeleton.unit:
            break
    angles = aim_errors(skeleton, pins, *pose)
    result.position_errors = np.where(aiming, 0.0, result.position_errors)
    result.orientation_errors_deg = np.where(aiming, np.degrees(angles), result.orientation_errors_deg)
    result.converged = bool(result.converged and (angles[aiming] <= tolerance / skeleton.unit).all())
    result.iterations, result.moved = iterations, moved
    return result


def _turnable(skeleton: Skeleton, pins: Sequence[Pin], bones: np.ndarray, frozen: np.ndarray) -> bool:
    """Whether each aimed bone can turn alone: not frozen, and no other pin hangs from it (its
    turn would move that pin) nor from another aimed bone."""
    for pin, bone in zip(pins, bones):
        if pin.aim is None:
            continue
        if frozen[bone] or any(other != bone and bone in skeleton.ancestors(other) for other in bones):
            return False
    return True


def _turned_to_aims(
    result: SolveResult,
    skeleton: Skeleton,
    pins: Sequence[Pin],
    aiming: np.ndarray,
    bones: np.ndarray,
    tolerance: float,
) -> SolveResult:
    """`result` (the solve of the pins that do not aim) with each aimed bone turned about its
    head by the shortest arc from its axis to the way to its target, its per-pin measures for
    every pin. An aim pin holds no position, so where its bone turns alone, nothing else
    moves, and no other pin depends on the turn (`_turnable`), the aim is exact in one step: the
    fixed point the re-aimed solves reach, with the head where the others put it."""
    rotations = result.rotations.copy()
    moved = result.moved.copy()
    angles = np.zeros(len(pins))
    for k, pin in enumerate(pins):
        if pin.aim is None:
            continue
        bone = int(bones[k])
        world, heads = skeleton.frames(rotations, result.locations, skeleton.kinematic_levels([bone]))
        column, sign = _AXIS[pin.aim]
        axis = sign * world[bone][:, column]
        way = pin.target_position - heads[bone]
        if np.linalg.norm(way) > _SAME_POINT * skeleton.unit:
            turn = quat.shortest_arc(axis, way)
            frame = skeleton.parent_frames(np.array([bone]), world)[0]
            local = np.concatenate([turn[:1], turn[1:] @ frame])
            rotations[bone] = quat.normalize(quat.multiply(local, rotations[bone]))
            angles[k] = aim_angle(
                quat.to_matrix(turn) @ world[bone], heads[bone], pin.target_position, pin.aim
            )
        moved[bone] = True
    result.rotations, result.moved = rotations, moved
    for field, fill in (
        ("position_errors", 0.0),
        ("orientation_errors_deg", 0.0),
        ("yielded", False),
        ("beyond_reach", False),
    ):
        values = np.full(len(pins), fill, dtype=getattr(result, field).dtype)
        values[~aiming] = getattr(result, field)
        setattr(result, field, values)
    result.orientation_errors_deg = np.where(aiming, np.degrees(angles), result.orientation_errors_deg)
    result.converged = bool(result.converged and (angles[aiming] <= tolerance / skeleton.unit).all())
    return result


def _way_turned(pins: Sequence[Pin], heads: np.ndarray, new_heads: np.ndarray) -> np.ndarray:
    """(P,) the most the way from each bone's head to its pin's target can have turned (radians)
    when the head moved from `heads` to `new_heads` (P, 3): the shift over the new distance."""
    targets = np.array([pin.target_position for pin in pins])
    distances = np.linalg.norm(targets - new_heads, axis=-1)
    shifts = np.linalg.norm(new_heads - heads, axis=-1)
    return np.where(shifts > 0.0, shifts / np.maximum(distances, 1e-300), 0.0)


def aim_errors(
    skeleton: Skeleton, pins: Sequence[Pin], rotations: np.ndarray, locations: np.ndarray
) -> np.ndarray:
    """(P,) radians between each aim pin's axis and the way from its bone's head to its target
    (0 for other pins)."""
    world, heads = skeleton.forward(rotations, locations)
    angles = np.zeros(len(pins))
    for k, pin in enumerate(pins):
        if pin.aim is not None:
            i = skeleton.index[pin.bone]
            angles[k] = aim_angle(quat.to_matrix(world[i]), heads[i], pin.target_position, pin.aim)
    return angles


def aim_angle(basis: ArrayLike, head: ArrayLike, target: ArrayLike, aim: str) -> float:
    """Radians between axis `aim` of a bone with world `basis` (3, 3, columns = its axes, any
    scale) and head `head`, and the way from there to `target`; 0 when the target is on the head.
    One measure for the solver's errors and for what Blender evaluated."""
    column, sign = _AXIS[aim]
    axis = sign * np.asarray(basis, dtype=float)[:, column]
    way = np.asarray(target, dtype=float) - np.asarray(head, dtype=float)
    if not np.linalg.norm(way) > _SAME_POINT * max(np.abs(head).max(), np.abs(target).max(), 1.0):
        return 0.0
    return float(np.arctan2(np.linalg.norm(np.cross(axis, way)), axis @ way))


def _world_axis(rotation: np.ndarray, aim: str) -> np.ndarray:
    """The aimed axis of a bone turned by world `rotation` (w, x, y, z), a unit vector."""
    column, sign = _AXIS[aim]
    return sign * quat.to_matrix(rotation)[:, column]


def _placed(skeleton: Skeleton, pins: Sequence[Pin], pose: tuple[np.ndarray, np.ndarray]) -> list[Pin]:
    """The pins as the loops take them: each aim pin holds its bone's head in `pose` and weighs
    only its axis, turned (by the shortest arc from where the bone points now) toward the target."""
    world, heads = skeleton.forward(*pose)
    placed = []
    for pin in pins:
        if pin.aim is None:
            placed.append(pin)
            continue
        i = skeleton.index[pin.bone]
        axis = _world_axis(world[i], pin.aim)
        way = pin.target_position - heads[i]
        if np.linalg.norm(way) <= _SAME_POINT * skeleton.unit:
            way = axis
        rotation = quat.normalize(quat.multiply(quat.shortest_arc(axis, way), world[i]))
        weights = [0.0, 0.0, 0.0]
        weights[_AXIS[pin.aim][0]] = 1.0
        target = quat.rigid_matrices(rotation[None], heads[i][None])[0]
        placed.append(dataclasses.replace(pin, target=target, orientation_weights=tuple(weights), aim=None))
    return placed
