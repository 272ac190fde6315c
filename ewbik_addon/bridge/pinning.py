"""Pin and Unpin: give pose bones target empties to drag, or take them away and delete the
empties this extension made that nothing else needs.

Pinning picks the bone a production rig lets the solver pose (`production_rigs.bones_to_pin`),
switches Rigify limbs to FK, gives a humanoid without limits its preset and plants a standing
body's feet on its first pins.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import bpy

from ...solver import EwbikError
from ..com.armature_checks import RigError
from ..com.live_pause import suspended
from ..com.messages import count
from ..com.stored_settings import bone_target, pinned_bones
from ..com.target_names import TARGET_MARK, is_targets_collection
from ..limits import limit_presets
from ..rigs import production_checks, production_rigs
from . import pin_reading, standing_body
from .targets import TargetFollowError, check_follow, is_deleted, new_target


def pin_bones(context: bpy.types.Context, obj: bpy.types.Object, bones: Sequence[bpy.types.PoseBone]) -> str:
    """Pin `bones` (pose bones of `obj`); returns what to tell the user. Raises RigError, with
    nothing changed, when no bone can be pinned or the targets cannot follow their parent."""
    try:
        check_follow(obj)
    except TargetFollowError as error:
        raise RigError.told_after("Nothing pinned: ", error) from None
    names, remarks = production_rigs.bones_to_pin(
        obj, [pose_bone.name for pose_bone in bones], production_checks.fixed_bones(obj)
    )
    with suspended():
        switched = production_rigs.switch_to_fk(obj, names)
    if switched:
        remarks.append("limbs switched to FK (Rig > Restore IK/FK switches them back)")
    if not names:
        why = "; ".join(remarks)
        raise RigError("bones", why, why)
    bones = [obj.pose.bones[name] for name in names]
    pinned_before = any(not is_deleted(bone_target(pose_bone)) for pose_bone in pinned_bones(obj))
    created = 0
    for pose_bone in bones:
        target = bone_target(pose_bone)
        if target is not None and not is_deleted(target):
            continue
        pose_bone.ewbik.target = new_target(context, obj, pose_bone)
        created += 1
    auto_limits = limit_presets.set_humanoid_limits_if_none(obj, context.scene.frame_current)
    standing = standing_body.stand_on_pin(context, obj, pinned_before)
    remarks = "".join(f"; {remark}" for remark in remarks)
    return (
        f"Pinned {count(len(bones), 'bone')}, {count(created, 'new target')}{auto_limits}{standing}{remarks}"
    )


def unpin_bones(obj: bpy.types.Object, bones: Sequence[bpy.types.PoseBone]) -> str:
    """Unpin `bones` (pinned pose bones of `obj`) and delete their empties that nothing else
    needs; returns what to tell the user."""
    targets = {bone_target(pose_bone) for pose_bone in bones}
    for pose_bone in bones:
        pose_bone.ewbik.target = None
    try:
        pin_reading.pinned_targets(obj, rescan=True)  # the cached pins forget these before their empties go
    except EwbikError:
        pass  # the live status reports what else is wrong with the rig
    removed, kept = _remove_unused_targets(targets)
    message = f"Unpinned {count(len(bones), 'bone')}, removed {count(removed, 'target')}"
    if kept:
        message += f"; kept {', '.join(kept)}"
    return message


def _why_kept(target: bpy.types.Object, users: set[bpy.types.ID]) -> str:
    """Why an empty Pin made must stay when unpinned ("" when it can go): it carries the user's
    keys, NLA strips or drivers, constraints, has children, or something else (another pin, a
    constraint) uses it."""
    animation = target.animation_data
    if animation is not None and (animation.action or animation.nla_tracks or animation.drivers):
        return "it is animated"
    if target.constraints:
        return "it has constraints"
    if target.children:
        return "it has children"
    if any(not isinstance(user, (bpy.types.Collection, bpy.types.Scene)) for user in users):
        return "something else uses it"
    return ""


def _remove_unused_targets(targets: Iterable[bpy.types.Object]) -> tuple[int, list[str]]:
    """Delete the empties this extension created that nothing but collections (and scenes listing
    them) uses. Returns (how many were removed, ["'name' (why)"] of ours that were kept)."""
    ours = [target for target in targets if TARGET_MARK in target and target.library is None]
    users = bpy.data.user_map(subset=ours)
    removed, kept = 0, []
    collections = set()
    for target in ours:
        why = _why_kept(target, users[target]) if not is_deleted(target) else ""
        if why:
            kept.append(f"target '{target.name}' ({why})")
            continue
        collections.update(target.users_collection)
        bpy.data.objects.remove(target)
        removed += 1
    for collection in collections:
        if is_targets_collection(collection) and not collection.all_objects and not collection.children:
            bpy.data.collections.remove(collection)
    return removed, kept
