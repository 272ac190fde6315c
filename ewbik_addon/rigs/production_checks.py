"""Production rigs: the bones constraints and drivers pose, and the pins the solver cannot honour.

Production rigs pose many bones through constraints and drivers (a Rigify deform bone copies its
mechanism bone, which copies the FK or IK control). The solver cannot move those bones: their
channels are overwritten on evaluation. They are found before each solve (`fixed_bones`), held
still with everything above them on a pinned chain, handed to the solver in the pose Blender
evaluated for them, and a pin on one of them is an error that names the control to pin instead.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import bpy
import mathutils
import numpy as np

from ...solver import quat
from ...solver.aim import aim_angle
from ..com.armature_checks import MIN_BONE_LENGTH, RigError, armature_scale, scene_of
from ..com.messages import distance
from ..com.pin_kinds import pin_kind
from ..com.stored_settings import pinned_bones
from . import production_rigs

if TYPE_CHECKING:
    from ..bridge.rig_cache import Rig

# Constraint types that set a bone's rotation or location (limits and Copy Scale only clamp or scale).
_POSING_CONSTRAINTS = frozenset(
    {
        "COPY_TRANSFORMS",
        "COPY_ROTATION",
        "COPY_LOCATION",
        "CHILD_OF",
        "ARMATURE",
        "IK",
        "SPLINE_IK",
        "DAMPED_TRACK",
        "TRACK_TO",
        "LOCKED_TRACK",
        "STRETCH_TO",
        "ACTION",
        "TRANSFORM",
        "FOLLOW_PATH",
        "CLAMP_TO",
        "PIVOT",
        "SHRINKWRAP",
    }
)


_DRIVEN_CHANNEL = re.compile(r'^pose\.bones\["((?:[^"\\]|\\.)*)"\]\.(rotation_\w+|location)$')


def fixed_bones(obj: bpy.types.Object) -> dict[str, str]:
    """{bone name: why}: the bones the solver may not move.

    Bones whose evaluated pose constraints or drivers set (their channels are overwritten when
    Blender evaluates the rig), and a generated rig's mechanism bones (Rigify's ORG, MCH and DEF
    bones: the rig moves them, animators move the controls).
    """
    return with_mechanism(obj, posed_bones(obj))


def preset_overrides(obj: bpy.types.Object) -> dict[str, str]:
    """The role mapping a preset uses on this armature: the user's table, with the bones that
    constraints or drivers pose left out (limits there would never act; their controls get them)."""
    return {**production_rigs.role_overrides(obj), **{bone: "" for bone in fixed_bones(obj)}}


def with_mechanism(obj: bpy.types.Object, posed: Mapping[str, str]) -> dict[str, str]:
    fixed = dict(posed)
    for name in production_rigs.mechanism_bones(obj):
        fixed.setdefault(name, "it is a mechanism bone of the generated rig")
    return fixed


def posed_bones(obj: bpy.types.Object) -> dict[str, str]:
    """{bone name: why} of the bones whose evaluated pose constraints or drivers set.

    Muted constraints, constraints at zero influence (an IK/FK switch turned away) and invalid
    ones do not count; an IK constraint poses its whole chain.
    """
    fixed = {}
    for pose_bone in obj.pose.bones:
        for constraint in pose_bone.constraints:
            if (
                constraint.type in _POSING_CONSTRAINTS
                and constraint.enabled
                and constraint.is_valid
                and constraint.influence > 0.0
            ):
                fixed.setdefault(pose_bone.name, f"its constraint '{constraint.name}' poses it")
                if constraint.type == "IK":
                    _fix_ik_chain(pose_bone, constraint, fixed)
    animation = obj.animation_data
    for fcurve in animation.drivers if animation is not None else ():
        match = _DRIVEN_CHANNEL.match(fcurve.data_path)
        if match and not fcurve.mute:
            fixed.setdefault(
                bpy.utils.unescape_identifier(match.group(1)), f"a driver sets its {match.group(2)}"
            )
    return fixed


def _fix_ik_chain(
    pose_bone: bpy.types.PoseBone, constraint: bpy.types.KinematicConstraint, fixed: dict[str, str]
) -> None:
    chain = pose_bone.parent_recursive
    if constraint.chain_count > 0:
        chain = chain[: constraint.chain_count - 1]
    for parent in chain:
        fixed.setdefault(parent.name, f"the IK constraint of '{pose_bone.name}' poses it")


def place_ik_controls(obj: bpy.types.Object, rig: Rig) -> None:
    """Put each pinned IK control (Rigify's foot_ik, hand_ik) on its target, as a user would drag it.

    Such a control hangs under a mechanism bone the rig places, so no turn of the solver can bring
    it to its target; its location can, and the rig's own IK then bends the limb. The solver holds
    it; the solve reports and writes it with the bones it moved. Deleted targets are left to the
    pin checks that follow.
    """
    to_armature = obj.matrix_world.inverted_safe()
    for i in np.flatnonzero(rig.placed):
        pose_bone = obj.pose.bones[rig.names[i]]
        try:
            location, rotation, _ = (to_armature @ _evaluated_target(pose_bone.ewbik)).decompose()
        except (ReferenceError, AttributeError):
            continue
        pose_bone.matrix = mathutils.Matrix.LocRotScale(location, rotation, pose_bone.matrix.to_scale())


def placed_controls(obj: bpy.types.Object, pinned: Iterable[str] | None = None) -> np.ndarray:
    """pose.bones-order mask of the pinned IK controls the solve places (their location is keyed).

    pinned: the pinned bones' names, when the caller has read them already (a rescan).
    """
    bones = obj.pose.bones
    if pinned is None:
        pinned = [pose_bone.name for pose_bone in pinned_bones(obj)]
    placed = np.zeros(len(bones), bool)
    for name in pinned:
        if production_rigs.is_ik_control(obj, name):
            placed[bones.find(name)] = True
    return placed


def evaluated_locals(obj: bpy.types.Object, rig: Rig, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(rotations (k, 4), locations (k, 3)) of the masked bones as Blender last evaluated them.

    Each is the local transform that, under the parent's evaluated pose, gives the bone's
    evaluated matrix (scale removed), so the solver sees a fixed bone where the viewer does.
    """
    n = len(rig.names)
    flat = np.empty(n * 16, np.float32)
    obj.pose.bones.foreach_get("matrix", flat)
    posed = flat.reshape(n, 4, 4).transpose(0, 2, 1).astype(float)
    posed[:, :3, :3] /= np.maximum(np.linalg.norm(posed[:, :3, :3], axis=1, keepdims=True), 1e-12)
    bones = np.flatnonzero(mask)
    parents = np.array([-1 if rig.parents[i] is None else rig.index[rig.parents[i]] for i in bones])
    frames = rig.rest[bones].copy()
    has_parent = parents >= 0
    parent_rows = parents[has_parent]
    frames[has_parent] = (
        posed[parent_rows] @ np.linalg.inv(rig.rest[parent_rows]) @ rig.rest[bones[has_parent]]
    )
    local = np.linalg.inv(frames) @ posed[bones]
    return quat.from_matrix(local[:, :3, :3]), local[:, :3, 3]


def check_pins_movable(obj: bpy.types.Object, rig: Rig) -> None:
    """RigError for a pin the solver cannot honour on this rig, naming what to pin instead.

    A pinned bone that constraints or drivers pose cannot be moved. A pinned control whose deform
    bone (same body role, same rest place) is posed elsewhere does not move the mesh: Rigify's
    IK/FK switch set to IK, for instance. Both are judged on the pose Blender last evaluated.
    """
    for bone, _ in rig.pins:
        why = rig.fixed.get(bone)
        if why is not None:
            raise RigError(
                f"pin '{bone}'",
                f"{why}, so the solver cannot move it; "
                f"{production_rigs.pin_instead_hint(obj, bone, rig.fixed)}",
            )
        why = production_rigs.limb_switched_away(obj, bone)
        if why is not None:
            raise RigError(f"pin '{bone}'", why)
    pose_bones = obj.pose.bones
    for bone, deform in rig.counterparts:
        apart = (pose_bones[bone].head - pose_bones[deform].head).length
        if apart > FOLLOW_TOLERANCE * max(pose_bones[bone].bone.length, MIN_BONE_LENGTH):
            raise RigError(
                f"pin '{bone}'",
                f"the deform bone '{deform}' does not follow it "
                f"({distance(scene_of(obj), apart * armature_scale(obj))} apart); "
                "pin the control that moves it",
            )


FOLLOW_TOLERANCE = 0.01  # share of the control's length by which its deform bone may lag


def evaluated_pin_errors(obj: bpy.types.Object) -> dict[str, tuple[float, float]]:
    """{pinned bone: (distance in scene units, angle in degrees)} on the pose Blender evaluated.

    Measured on the pinned bone and on the deform bones that follow it, the worst of them, so a
    pin is only reported reached when what the viewer sees is at the target. Call after
    `view_layer.update()`.
    """
    pose_bones = obj.pose.bones
    pinned = [pose_bone.name for pose_bone in pinned_bones(obj)]
    fixed = fixed_bones(obj)
    followers = {bone: [bone] for bone in pinned}
    for bone, deform in production_rigs.deform_counterparts(obj, pinned, fixed):
        followers[bone].append(deform)
    errors = {}
    for bone in pinned:
        props = pose_bones[bone].ewbik
        target_location, target_rotation, _ = _evaluated_target(props).decompose()
        worst = (0.0, 0.0)
        for name in followers[bone]:
            location, rotation, _ = (obj.matrix_world @ pose_bones[name].matrix).decompose()
            kind = pin_kind(props.pin_kind)
            distance = (location - target_location).length if kind.reaches_place else 0.0
            if kind.aims:
                basis = np.array(rotation.to_matrix())
                angle = math.degrees(aim_angle(basis, location, target_location, props.aim_axis))
            elif not kind.turns_with_target:
                angle = 0.0
            else:
                angle = math.degrees(rotation.rotation_difference(target_rotation).angle)
            worst = max(worst, (distance, angle))
        errors[bone] = worst
    return errors


def _evaluated_target(props: bpy.types.PropertyGroup) -> mathutils.Matrix:
    """World matrix of a pin's target: the object, or its Target Bone when it is an armature."""
    target = props.target
    bone = target.pose.bones.get(props.target_bone) if target.type == "ARMATURE" else None
    return target.matrix_world @ bone.matrix if bone is not None else target.matrix_world
