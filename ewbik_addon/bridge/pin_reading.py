"""Pins: each pinned bone's target read as an armature-space frame and checked against the rig."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import bpy
import mathutils
import numpy as np

from ...solver import EwbikError, Pin, quat
from ...solver.validation import MAX_COORDINATE
from ..com.armature_checks import RigError, armature_scale
from ..com.messages import count, degrees, distance
from ..com.pin_kinds import pin_kind
from ..limits.limit_status import BEYOND_TOLERANCE
from ..rigs.production_checks import FOLLOW_TOLERANCE, evaluated_pin_errors
from .rig_cache import CheckedPins, cached_rig, rig_for, targets_deleted

if TYPE_CHECKING:
    from ...solver import SolveResult
    from .rig_cache import Rig

PLANTED_PRIORITY = 1.0  # added to a planted pin's priority: where pins cannot all be reached, it holds


_POSITION_ONLY_AXES = (0.0, 0.0, 0.0)


def read_pins(obj: bpy.types.Object, rig: Rig, depsgraph: bpy.types.Depsgraph | None = None) -> list[Pin]:
    """Pins with armature-space target matrices (scale removed); raises RigError for bad targets
    and the solver's SceneError for bad pin settings.
    depsgraph: read the targets and the armature as it evaluated them (a render's); None: the file's."""
    checked = rig.checked_pins
    if checked is None:
        checked = rig.checked_pins = _check_pins(obj, rig)
    _check_feedback(obj, rig, checked)
    frames = _target_frames(obj, rig, checked, depsgraph)
    moved = np.flatnonzero((frames != checked.frames).any(axis=1))
    if len(moved):
        matrices = target_matrices(frames[moved])
        for i, matrix in zip(moved.tolist(), matrices):
            checked.pins[i] = checked.pins[i].moved_to(matrix, frames[i, :4], frames[i, 4:])
    checked.frames = frames
    _read_poles(obj, checked, depsgraph)
    return list(checked.pins)


def _read_poles(obj: bpy.types.Object, checked: CheckedPins, depsgraph: bpy.types.Depsgraph | None) -> None:
    """Give each pin its pole's armature-space position (None without a pole), only where it
    changed since the last read: a pole is read like a target, on every solve."""
    if checked.pole_positions is None:
        return
    positions = _pole_positions(obj, checked, depsgraph)
    kept = checked.pole_positions
    same = (positions == kept) | (np.isnan(positions) & np.isnan(kept))
    for i in np.flatnonzero(~same.all(axis=1)).tolist():
        pole = None if np.isnan(positions[i, 0]) else positions[i]
        try:
            checked.pins[i] = checked.pins[i].with_pole(pole)
        except EwbikError:
            raise RigError(
                f"pin '{checked.bones[i]}'",
                f"pole '{checked.poles[i].name}' contains NaN or infinity, "
                f"or lies farther than {MAX_COORDINATE:g} armature units",
            ) from None
    checked.pole_positions = positions if any(pole is not None for pole in checked.poles) else None


def _pole_positions(
    obj: bpy.types.Object, checked: CheckedPins, depsgraph: bpy.types.Depsgraph | None
) -> np.ndarray:
    """(P, 3) the pins' poles in armature space (as `depsgraph` evaluated them, if given); NaN
    rows for pins without a pole or whose pole object was deleted."""
    positions = np.full((len(checked.poles), 3), np.nan)
    if not any(pole is not None for pole in checked.poles):
        return positions
    to_armature = _evaluated(obj, depsgraph).matrix_world.inverted_safe()
    for i, pole in enumerate(checked.poles):
        try:
            if pole is not None:
                positions[i] = to_armature @ _evaluated(pole, depsgraph).matrix_world.translation
        except ReferenceError:
            continue
    return positions


def target_matrices(frames: np.ndarray) -> np.ndarray:
    """(k, 4, 4) rigid matrices of (k, 7) frames (unit quaternion, position), all in one go."""
    return quat.rigid_matrices(frames[:, :4], frames[:, 4:])


def _check_pins(obj: bpy.types.Object, rig: Rig) -> CheckedPins:
    """Validate every pin of the last scan and build its Pin at the target's current frame; a pin
    whose settings are unchanged since the last check is moved, not validated again."""
    bones = tuple(bone for bone, _ in rig.pins)
    targets = tuple(target for _, target in rig.pins)
    target_bones = tuple(_pin_target_bone(obj, bone, target) for bone, target in rig.pins)
    checked = CheckedPins(bones, targets, target_bones, [], np.full((len(bones), 7), np.nan))
    checked.poles = rig.poles
    checked.pole_positions = np.full((len(bones), 3), np.inf)  # every pin's pole read at the next read
    frames = _target_frames(obj, rig, checked)
    for (bone, target), frame in zip(rig.pins, frames):
        if not any(scene.objects.get(target.name) == target for scene in obj.users_scene):
            raise RigError(f"pin '{bone}'", f"target '{target.name}' is not in the armature's scene")
        props = obj.pose.bones[bone].ewbik
        key = (
            bone,
            props.weight,
            tuple(props.orientation_weights),
            props.falloff,
            props.pin_kind,
            props.aim_axis,
            props.planted,
            props.priority,
        )
        known = rig.validated_pins.get(key)
        if known is None:
            pin = _make_pin(bone, mathutils.Vector(frame[4:]), mathutils.Quaternion(frame[:4]), props)
        else:
            pin = known.moved_to(target_matrices(frame[None])[0], frame[:4], frame[4:])
        checked.pins.append(pin)
        checked.keys.append(key)
        checked.kinds.append(pin_kind(props.pin_kind))
    checked.frames = frames
    rig.validated_pins = dict(zip(checked.keys, checked.pins))
    return checked


def _pin_target_bone(obj: bpy.types.Object, bone: str, target: bpy.types.Object) -> str | None:
    """The bone an armature target's pin follows (None for other targets); checks the pin's bone."""
    pose_bone = obj.pose.bones.get(bone)
    try:
        kind = target.type
    except ReferenceError:
        raise targets_deleted([bone]) from None
    if pose_bone is None:
        raise RigError(f"pin '{bone}'", "the bone no longer exists; unpin it")
    return pose_bone.ewbik.target_bone if kind == "ARMATURE" else None


def _target_frames(
    obj: bpy.types.Object, rig: Rig, checked: CheckedPins, depsgraph: bpy.types.Depsgraph | None = None
) -> np.ndarray:
    """(P, 7) armature-space frames (unit quaternion with w >= 0, position) of the pins' targets
    (an armature target: its bone), read in one pass (as `depsgraph` evaluated them, if given); a
    deleted or non-finite target raises RigError naming its pin."""
    to_armature = _evaluated(obj, depsgraph).matrix_world.inverted_safe()
    rows = []
    for bone, target, target_bone in zip(checked.bones, checked.targets, checked.target_bones):
        try:
            if target_bone is None:
                matrix = _evaluated(target, depsgraph).matrix_world
            else:
                matrix = _target_bone_matrix(obj, rig, bone, target, target_bone, depsgraph)
        except ReferenceError:
            raise targets_deleted([bone]) from None
        location, rotation, _ = (to_armature @ matrix).decompose()
        if rotation.w < 0.0:
            rotation.negate()
        row = (*rotation, *location)
        if not (all(map(math.isfinite, row)) and max(map(abs, location)) <= MAX_COORDINATE):
            raise RigError(
                f"pin '{bone}'",
                f"target contains NaN or infinity, or lies farther than {MAX_COORDINATE:g} armature units",
            )
        rows.append(row)
    return np.array(rows, dtype=float).reshape(-1, 7)


def _check_feedback(obj: bpy.types.Object, rig: Rig, checked: CheckedPins) -> None:
    """Refuse a target that follows a bone the solver moves (it would chase itself)."""
    for bone, target in zip(checked.bones, checked.targets):
        try:
            loop_bone = _feedback_bone(obj, target)
        except ReferenceError:
            raise targets_deleted([bone]) from None
        if loop_bone is not None and rig.driven[rig.index[loop_bone]]:
            raise RigError(
                f"pin '{bone}'",
                f"target '{target.name}' follows bone '{loop_bone}', which the solver moves "
                "(feedback loop): parent the target elsewhere",
            )


def _make_pin(
    bone: str, location: mathutils.Vector, rotation: mathutils.Quaternion, props: bpy.types.PropertyGroup
) -> Pin:
    """The solver's pin for one bone: its kind picks the weighed axes (or the aimed one), planted
    raises the priority.

    Planted leaves the weight alone: giving way (`solver.give_way`) already holds the pins of higher
    priority, and a weight far above the others' made the body crawl toward the other targets
    (a hand reaching to the floor beside two feet weighing 1000 stopped 0.35 m short after 100
    iterations, and reached in 35 with equal weights)."""
    matrix = np.array(mathutils.Matrix.LocRotScale(location, rotation, None))
    kind = pin_kind(props.pin_kind)
    axes = tuple(props.orientation_weights) if kind.turns_with_target or kind.aims else _POSITION_ONLY_AXES
    priority = props.priority + (PLANTED_PRIORITY if props.planted else 0.0)
    aim = props.aim_axis if kind.aims else None
    return Pin(bone, matrix, props.weight, axes, props.falloff, priority, aim=aim)


def _evaluated(thing: bpy.types.Object, depsgraph: bpy.types.Depsgraph | None) -> bpy.types.Object:
    return thing if depsgraph is None else thing.evaluated_get(depsgraph)


def _target_bone_matrix(
    obj: bpy.types.Object,
    rig: Rig,
    bone: str,
    target: bpy.types.Object,
    target_bone: str,
    depsgraph: bpy.types.Depsgraph | None = None,
) -> mathutils.Matrix:
    """World matrix of the bone a pin follows (a bone of another armature, or a control bone of obj).

    A bone of obj that the pinned bone's own pose moves (itself or a descendant), or that the solver
    moves, would make the pin chase itself: refused with a message.
    """
    other = target.pose.bones.get(target_bone) if target.pose is not None else None
    if other is None:
        what = "choose its Target Bone" if not target_bone else f"it has no bone '{target_bone}'"
        raise RigError(f"pin '{bone}'", f"target '{target.name}' is an armature: {what}")
    if target == obj:
        follower = follows_pinned_bone(obj, target_bone, bone)
        if follower:
            raise RigError(
                f"pin '{bone}'", f"target bone '{target_bone}' {follower}, so it cannot be its target"
            )
        if rig.driven[rig.index[target_bone]]:
            raise RigError(
                f"pin '{bone}'",
                f"target bone '{target_bone}' is moved by the solver (feedback loop): "
                "use a control bone outside the pinned chains",
            )
    if depsgraph is not None:
        target = target.evaluated_get(depsgraph)
        other = target.pose.bones[target_bone]
    return target.matrix_world @ other.matrix


def follows_pinned_bone(obj: bpy.types.Object, target_bone: str, pinned: str) -> str:
    """Why bone `target_bone` of obj moves with bone `pinned` ("is the pinned bone itself" or "follows
    the pinned bone"), else "": such a bone cannot be that pin's target."""
    if target_bone == pinned:
        return "is the pinned bone itself"
    bone = obj.data.bones[target_bone].parent
    while bone is not None:
        if bone.name == pinned:
            return "follows the pinned bone"
        bone = bone.parent
    return ""


def _feedback_bone(obj: bpy.types.Object, target: bpy.types.Object) -> str | None:
    """The bone of obj that target follows through parenting, a constraint or a driver, if any."""
    node = target
    seen = set()
    while node is not None and node.name not in seen:
        seen.add(node.name)
        parent = node.parent
        if parent == obj and node.parent_type == "BONE" and node.parent_bone in obj.pose.bones:
            return node.parent_bone
        for constraint in node.constraints:
            subtarget = getattr(constraint, "subtarget", "")
            if (
                constraint.enabled
                and getattr(constraint, "target", None) == obj
                and subtarget in obj.pose.bones
            ):
                return subtarget
        driven_by = _driver_bone(obj, node)
        if driven_by is not None:
            return driven_by
        node = parent
    return None


def _driver_bone(obj: bpy.types.Object, node: bpy.types.Object) -> str | None:
    """A bone of obj that one of node's drivers reads (a bone transform, or a pose.bones path)."""
    animation = node.animation_data
    if animation is None:
        return None
    for fcurve in animation.drivers:
        if fcurve.mute:
            continue
        for variable in fcurve.driver.variables:
            for driver_target in variable.targets:
                if driver_target.id != obj:
                    continue
                path = driver_target.data_path
                bone = (
                    driver_target.bone_target
                    if variable.type != "SINGLE_PROP"
                    else (
                        path.split('"')[1] if path.startswith('pose.bones["') and path.count('"') >= 2 else ""
                    )
                )
                if bone in obj.pose.bones:
                    return bone
    return None


def pin_errors(obj: bpy.types.Object, result: SolveResult) -> dict[str, tuple[float, float]]:
    """{pinned bone: (position error in armature units, orientation error in degrees)} of a solve."""
    rig = cached_rig(obj)
    bones = [bone for bone, _ in rig.pins] if rig is not None else []
    return {
        bone: (float(position), float(orientation))
        for bone, position, orientation in zip(bones, result.position_errors, result.orientation_errors_deg)
    }


def pin_distances(obj: bpy.types.Object, result: SolveResult) -> np.ndarray:
    """Each pin's distance from its target in the scene after a solve (`result` in pose.bones order,
    its pins as `read_pins` last gave them). Under a uniform scale the solver's errors times it;
    under a non-uniform one a miss's length depends on its direction, so each is measured between
    the pinned bone's solved head and its target (rotation-only and aim pins keep the solver's own)."""
    scale = armature_scale(obj)
    axes = [abs(s) for s in obj.matrix_world.to_scale()]
    rig = cached_rig(obj)
    if max(axes) - min(axes) <= 1e-6 * max(axes) or rig is None or rig.checked_pins is None:
        return result.position_errors * scale
    chains = rig.chains
    _, heads = chains.skeleton.forward(result.rotations[chains.rows], result.locations[chains.rows])
    pins = rig.checked_pins.pins
    misses = np.array([pin.target[:3, 3] - heads[chains.skeleton.index[pin.bone]] for pin in pins])
    linear = np.array(obj.matrix_world.to_3x3())
    distances = np.linalg.norm(misses @ linear.T, axis=1)
    rotation_only = np.array([not kind.reaches_place for kind in rig.checked_pins.kinds])
    return np.where(rotation_only, result.position_errors * scale, distances)


def pinned_targets(obj: bpy.types.Object, *, rescan: bool = True) -> list[bpy.types.Object]:
    """The target objects of the armature's pins (cached; rescan re-reads the bones' settings)."""
    return [target for _, target in rig_for(obj, rescan).pins]


def pole_objects(obj: bpy.types.Object) -> list[bpy.types.Object]:
    """The pole objects of the armature's pins as the last scan found them (a moved pole, like a
    moved target, makes a live solve due)."""
    rig = cached_rig(obj)
    return [] if rig is None else [pole for pole in rig.poles if pole is not None]


def pins_elsewhere(obj: bpy.types.Object, result: SolveResult) -> dict[str, float]:
    """{pinned bone: evaluated distance (scene units)} for the pins whose bone, as Blender evaluated
    it, is farther from the target than the solve left it (something else poses it); call after
    `view_layer.update()`."""
    scale = armature_scale(obj)
    solved = pin_errors(obj, result)
    return {
        bone: distance
        for bone, (distance, _) in evaluated_pin_errors(obj).items()
        if distance - solved.get(bone, (0.0, 0.0))[0] * scale
        > FOLLOW_TOLERANCE * obj.data.bones[bone].length * scale
    }


def pins_summary(obj: bpy.types.Object, result: SolveResult) -> str:
    """'5 pins reached', or which pins stop short of their targets, by how much in the scene's
    length unit (`pin_distances`), and why: '4 pins reached; hand.L 0.42 m short, out
    of reach with the other pins held'. An aim pin misses by an angle: 'head 3° off its aim'."""
    rig = cached_rig(obj)
    checked = rig.checked_pins if rig is not None else None
    errors = pin_distances(obj, result).tolist()
    bones = checked.bones if checked is not None and len(checked.bones) == len(errors) else None
    aims = [kind.aims for kind in checked.kinds] if bones else [False] * len(errors)
    if bones is None:
        bones = [f"pin {k + 1}" for k in range(len(errors))]
    tolerance = obj.ewbik.tolerance * (1.0 + 1e-6) + 1e-12
    angles = np.radians(result.orientation_errors_deg).tolist()
    aimed_within = tolerance / _rig_size(obj, rig) if any(aims) else math.inf
    short = [
        angle > aimed_within if aim else error > tolerance for aim, angle, error in zip(aims, angles, errors)
    ]
    reached = short.count(False)
    parts = [count(reached, "pin") + " reached"] if reached else []
    for k in [k for k, missed in enumerate(short) if missed]:
        miss = (
            f"{bones[k]} {degrees(angles[k])} off its aim"
            if aims[k]
            else f"{bones[k]} {distance(bpy.context.scene, errors[k])} short"
        )
        parts.append(f"{miss}, {_why_short(result, k)}")
    parts.extend(
        f"{obj.pose.bones[i].name} {math.degrees(result.limits_exceeded[i]):.0f}° beyond its limits"
        for i in np.flatnonzero(result.limits_exceeded > BEYOND_TOLERANCE).tolist()
    )
    return "; ".join(parts)


def _rig_size(obj: bpy.types.Object, rig: Rig) -> float:
    """The rig's size in the scene (`Skeleton.unit` scaled): the arc over which an aimed axis's
    miss counts as a distance, as in the solver's tolerance."""
    return rig.chains.skeleton.unit * armature_scale(obj)


def _why_short(result: SolveResult, pin: int) -> str:
    if result.yielded[pin]:
        return "out of reach with the other pins held"
    if result.beyond_reach[pin]:
        return "beyond the reach of its chain"
    return "within reach but held back by joint limits, locked bones or its turn"
