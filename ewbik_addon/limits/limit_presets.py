"""Humanoid presets onto an armature: where the body is read from, and what the preset writes.

Shared by Presets > Humanoid and by pinning (Humanoid Limits on Pin), so both read the body and
store limits and stiffness the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ...solver import presets
from ..com import limit_settings
from ..com.armature_checks import limits_lock
from ..com.limit_settings import scene_bones, set_limits
from ..com.messages import count
from ..com.stored_settings import batched_updates, bone_setting, stored_bone_limits
from ..rigs.production_checks import preset_overrides

if TYPE_CHECKING:
    import bpy


def current_pose(obj: bpy.types.Object) -> dict[str, dict[str, list[float]]]:
    """The armature's current pose as a preset pose: {bone: {rotation, location}} local to rest."""
    return {
        pose_bone.name: {
            "rotation": list(pose_bone.matrix_basis.to_quaternion()),
            "location": list(pose_bone.matrix_basis.to_translation()),
        }
        for pose_bone in obj.pose.bones
    }


@dataclasses.dataclass
class FittedPreset:
    """A preset worked out for one armature: what `store_preset` writes and `preset_report` tells."""

    limits: dict  # {bone: scene-document limits dict}
    stiffness: dict  # {bone: stiffness} of the recognised bones whose role is stiff
    roles: dict  # {bone: body role} as the preset recognised them
    source: str  # where the body was read: "from the rest pose", "from the current pose (frame 12)"


def fitted_preset(
    obj: bpy.types.Object, preset: str, frame: int, overrides: dict[str, str] | None = None
) -> FittedPreset:
    """The preset fitted to the armature, the body read from the rest pose, else from the current
    pose. `overrides`: `preset_overrides(obj)` when the caller has it already.

    Raises presets.PresetError when neither pose shows a standing body; its message says why.
    """
    bones = scene_bones(obj)
    overrides = preset_overrides(obj) if overrides is None else overrides
    try:
        limits, source = presets.preset_limits(bones, preset, overrides=overrides), "from the rest pose"
    except presets.PresetError as rest_error:
        try:
            limits = presets.preset_limits(bones, preset, pose=current_pose(obj), overrides=overrides)
        except presets.PresetError as pose_error:
            why = f"rest pose: {rest_error.why}; current pose (frame {frame}): {pose_error.why}"
            raise presets.PresetError(
                "pose",
                f"neither the rest pose nor the current pose shows a standing body ({why}); "
                "pose the armature standing, limbs not folded, and try again",
                why,
            ) from None
        source = f"from the current pose (frame {frame})"
    stiffness = presets.preset_stiffness(bones, preset, overrides)
    roles = presets.bone_roles([bone["name"] for bone in bones], overrides)
    return FittedPreset(limits, stiffness, roles, source)


def has_limits(obj: bpy.types.Object) -> bool:
    """True when any bone of the armature has a cone or a twist limit."""
    return any(limit_settings.has_limits(stored_bone_limits(bone)) for bone in obj.data.bones)


def set_humanoid_limits_if_none(obj: bpy.types.Object, frame: int) -> str:
    """Humanoid limits on an armature that has none and whose limbs the preset recognises.

    Returns a sentence for the caller's report ("" when nothing applied), so knees and elbows
    bend the right way from the first drag; `Object.ewbik.auto_limits` turns this off.
    """
    if not obj.ewbik.auto_limits or has_limits(obj):
        return ""
    locked = limits_lock(obj)
    if locked is not None:
        return f"; no humanoid limits set: {locked}"
    overrides = preset_overrides(obj)
    if not presets.has_humanoid_limbs(obj.data.bones.keys(), overrides):
        return ""
    try:
        fitted = fitted_preset(obj, "humanoid", frame, overrides)
    except presets.PresetError as error:
        return f"; no humanoid limits set: {error.reason}"
    store_preset(obj, [pose_bone for pose_bone in obj.pose.bones if pose_bone.name in fitted.limits], fitted)
    return f"; humanoid limits set on {count(len(fitted.limits), 'bone')} {fitted.source} (Humanoid Limits on Pin)"


def store_preset(
    obj: bpy.types.Object, pose_bones: Iterable[bpy.types.PoseBone], fitted: FittedPreset
) -> None:
    """Write a preset's limits onto these pose bones' bones, and the stiffness it gives some roles
    onto the pose bones.

    A stiffness the user set (non-zero) is kept: the preset only fills in bones left at 0. The
    armature is tagged for the live solve once, not once per setting written.
    """
    with batched_updates(obj):
        for pose_bone in pose_bones:
            set_limits(pose_bone.bone.ewbik, fitted.limits[pose_bone.name])
            if pose_bone.name in fitted.stiffness and bone_setting(pose_bone, "stiffness") == 0.0:
                pose_bone.ewbik.stiffness = fitted.stiffness[pose_bone.name]


_BODY_PARTS = (  # (part, role bases), sided parts get "left"/"right" before them
    ("spine and head", ("hips", "spine", "chest", "neck", "head")),
    ("arm", ("clavicle", "upper_arm", "upper_arm_twist", "forearm", "forearm_twist", "wrist", "hand")),
    (
        "fingers",
        ("palm", "thumb", "thumb_1", "thumb_2", "thumb_3", "fingers", "finger_1", "finger_2", "finger_3"),
    ),
    ("leg", ("pelvis_side", "thigh", "thigh_twist", "shin", "shin_twist", "foot", "toes")),
)
_PART_OF_ROLE = {role: part for part, roles in _BODY_PARTS for role in roles}
_SIDE_WORD = {"L": "left", "R": "right"}


def body_part(role: str) -> str | None:
    """'left arm', 'right fingers', 'spine and head' for a preset role ('forearm.L'); None if unknown."""
    base, _, side = role.partition(".")
    part = _PART_OF_ROLE.get(base)
    if part is None or not side:
        return part
    return f"{_SIDE_WORD[side]} {part}"


def preset_report(bones: Sequence[bpy.types.PoseBone], fitted: FittedPreset) -> str:
    """What a preset did to these pose bones, to follow a report's first words (with its own
    leading space or semicolon): counts by body part, then the bones it recognised but could not
    place. Roots (their rotation is the whole body's) and bones it does
    not recognise (face, tail, props) are counted, not listed."""
    roles, limits = fitted.roles, fitted.limits
    parts: dict[str, int] = {}
    for pose_bone in bones:
        if pose_bone.name in limits:
            part = body_part(roles[pose_bone.name]) or "other"
            parts[part] = parts.get(part, 0) + 1
    by_part = ", ".join(f"{part} {n}" for part, n in parts.items())
    unplaced = [
        pose_bone.name
        for pose_bone in bones
        if pose_bone.name in roles and pose_bone.name not in limits and pose_bone.parent is not None
    ]
    free = sum(1 for pose_bone in bones if pose_bone.name not in roles)
    report = f" ({by_part})" if by_part else ""
    if unplaced:
        report += f"; could not place {', '.join(unplaced[:8])}{' and more' if len(unplaced) > 8 else ''}"
    if free:
        report += f"; {count(free, 'other bone')} left free (not a body part the preset knows)"
    return report
