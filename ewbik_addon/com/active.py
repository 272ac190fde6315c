"""Which armature the UI works on (the active armature, or the armature whose pin target is the
active object), and which of its bones are selected.

While the user drags a target empty, the empty is the active object; the panels and the cones
stay those of the armature it pins, so the status, Solve and the pin's weight stay in reach.
"""

from __future__ import annotations

import bpy

from .armature_checks import limits_lock
from .stored_settings import bone_target
from .target_names import TARGET_MARK

_POSE_BONE_HAS_SELECT = "select" in bpy.types.PoseBone.bl_rna.properties  # moved from Bone in Blender 5.0


def active_armature(context: bpy.types.Context) -> bpy.types.Object | None:
    """The active object when it is an armature, else the armature its active pin target pins."""
    obj = context.active_object
    if obj is None:
        return None
    if obj.type == "ARMATURE":
        return obj
    pinned = pin_of_target(obj)
    return pinned.id_data if pinned is not None else None


def pin_of_target(target: bpy.types.Object) -> bpy.types.PoseBone | None:
    """The pose bone pinned to this object (the first one, if several are), else None."""
    if target.users <= len(target.users_collection):
        return None  # nothing but collections uses it: no pin points at it (the common case, cheap)
    marked = bpy.data.objects.get(target.get(TARGET_MARK, "")) if TARGET_MARK in target else None
    candidates = [marked] if marked is not None and marked.type == "ARMATURE" else []
    candidates += [obj for obj in bpy.data.objects if obj.type == "ARMATURE" and obj != marked]
    for obj in candidates:
        for pose_bone in obj.pose.bones:
            if bone_target(pose_bone) == target:
                return pose_bone
    return None


def active_target_pin(context: bpy.types.Context) -> bpy.types.PoseBone | None:
    """The pose bone pinned to the active object, when that object is a pin target, else None.
    A context without an active object (Blender reads the pin list's row while it saves a file
    with a library override) has none."""
    obj = getattr(context, "active_object", None)
    if obj is None or obj.type == "ARMATURE":
        return None
    return pin_of_target(obj)


def posed_armature(context: bpy.types.Context) -> bpy.types.Object | None:
    """The active armature when it is in pose mode (where pins and limits are edited), else None."""
    obj = active_armature(context)
    return obj if obj is not None and obj.mode == "POSE" and obj == context.active_object else None


def pinning_armature(context: bpy.types.Context) -> bpy.types.Object | None:
    """The armature whose pins the Pins panel shows: the posed armature, or the one the active
    target pins (in Object or Pose Mode alike)."""
    pinned = active_target_pin(context)
    return pinned.id_data if pinned is not None else posed_armature(context)


def editable_posing_armature(cls: type[bpy.types.Operator], context: bpy.types.Context) -> bool:
    """Operator poll of pinning: the context's object is an editable armature in Pose Mode (pins
    are made from selected pose bones); otherwise say why."""
    obj = context.object
    if obj is None or obj.type != "ARMATURE":
        cls.poll_message_set("Select an armature")
        return False
    if obj.mode != "POSE":
        cls.poll_message_set("Switch the armature to Pose Mode and select bones")
        return False
    if obj.library is not None or not obj.is_editable:
        cls.poll_message_set("The armature is linked or read-only")
        return False
    return True


def limits_editable(cls: type[bpy.types.Operator], obj: bpy.types.Object | None) -> bool:
    """Operator poll of everything that changes joint limits: `obj`'s limits may be changed
    (`armature_checks.limits_lock`); otherwise say why."""
    if obj is None:
        return False
    reason = limits_lock(obj)
    if reason is not None:
        cls.poll_message_set(reason)
    return reason is None


def armature_to_step_through(cls: type[bpy.types.Operator], context: bpy.types.Context, hint: str) -> bool:
    """Operator poll of Bake and Limits from Action: the context's object is an armature in Pose or
    Object Mode (they step through frames, so not in Edit Mode); otherwise say why."""
    obj = context.object
    if obj is None or obj.type != "ARMATURE":
        cls.poll_message_set(hint)
        return False
    if obj.mode not in {"POSE", "OBJECT"}:
        cls.poll_message_set("Switch the armature to Pose or Object Mode")
        return False
    return True


def shown_pin(context: bpy.types.Context, obj: bpy.types.Object) -> bpy.types.PoseBone | None:
    """The pin the Pins panel edits and its list highlights: the pin of the active target empty,
    else the armature's active bone when it is pinned, else None.

    The details follow the selection as Blender's Bone properties do, so they never edit a pin
    other than the one the viewport and the Joint Limits panel show."""
    dragged = active_target_pin(context)
    if dragged is not None and dragged.id_data == obj:
        return dragged
    active = obj.data.bones.active
    pose_bone = obj.pose.bones.get(active.name) if active is not None else None
    return pose_bone if pose_bone is not None and bone_target(pose_bone) is not None else None


def show_pin(context: bpy.types.Context, obj: bpy.types.Object, pose_bone: bpy.types.PoseBone) -> None:
    """A click on a pin's row: its bone becomes the active and only selected bone, as a click in
    the Outliner does; while one of the armature's target empties is active, that pin's target
    empty becomes the active object instead, so the user steps from target to target."""
    dragged = active_target_pin(context)
    target = bone_target(pose_bone)
    objects = context.view_layer.objects
    stepping = dragged is not None and dragged.id_data == obj and target is not None
    if stepping and target.type != "ARMATURE" and target.name in objects:
        for other in objects:
            other.select_set(False)
        target.select_set(True)
        objects.active = target
        return
    for other in obj.pose.bones:
        set_selected(other, other == pose_bone)
    obj.data.bones.active = pose_bone.bone


def active_limit_bone(context: bpy.types.Context) -> bpy.types.PoseBone | None:
    """The active pose bone of the active armature in pose mode, else the bone the active target
    pins, else None."""
    pinned = active_target_pin(context)
    if pinned is not None:
        return pinned
    obj = posed_armature(context)
    pose_bone = context.active_pose_bone
    if obj is None or pose_bone is None or pose_bone.id_data != obj:
        return None
    return pose_bone


def editable_limit_bone(
    cls: type[bpy.types.Operator], context: bpy.types.Context
) -> bpy.types.PoseBone | None:
    """Operator poll of edits of the active bone's limits: that bone (`active_limit_bone`) when its
    armature's limits may be changed (`limits_editable`, which says why not), else None."""
    pose_bone = active_limit_bone(context)
    return pose_bone if pose_bone is not None and limits_editable(cls, pose_bone.id_data) else None


def show_object(context: bpy.types.Context, obj: bpy.types.Object) -> None:
    """Make `obj` the active and only selected object, unhidden, in Object Mode (Select Target,
    Jump to a target empty)."""
    if context.object is not None and context.object.mode != "OBJECT":
        bpy.ops.object.mode_set(mode="OBJECT")
    for other in context.view_layer.objects:
        other.select_set(False)
    obj.hide_set(False)
    obj.select_set(True)
    context.view_layer.objects.active = obj


def is_selected(pose_bone: bpy.types.PoseBone) -> bool:
    """Selection of a pose bone, wherever this Blender keeps it."""
    owner = pose_bone if _POSE_BONE_HAS_SELECT else pose_bone.bone
    return owner.select and not pose_bone.bone.hide


def set_selected(pose_bone: bpy.types.PoseBone, state: bool) -> None:
    """Select or deselect a pose bone, wherever this Blender keeps the flag."""
    (pose_bone if _POSE_BONE_HAS_SELECT else pose_bone.bone).select = state


def selected_pose_bones(obj: bpy.types.Object) -> list[bpy.types.PoseBone]:
    return [pose_bone for pose_bone in obj.pose.bones if is_selected(pose_bone)]
