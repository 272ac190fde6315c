"""The empties pins are dragged by: made at the bone's pose, gathered per armature, named after
their bone, and either left in the world or parented so they move with the character.

An empty shows its axes (ARROWS, drawn in front of the mesh) because a pin holds rotation as
well as position, and it is at least a few percent of the rig's size so its arrows reach out
of a hand or a foot where the user can grab them. A pole is a small sphere: only its place
counts.
"""

from __future__ import annotations

from collections.abc import Iterable

import bpy
import mathutils
import numpy as np

from ...solver import poles
from ..com.armature_checks import RigError
from ..com.messages import deleted_targets
from ..com.stored_settings import bone_target
from ..com.target_names import TARGET_BONE, TARGET_MARK, target_collection_name, target_name
from .rig_cache import rig_for

MIN_SIZE_OF_RIG = 0.06  # smallest empty, as a share of the armature's largest dimension


class TargetFollowError(RigError):
    """Targets cannot follow the chosen parent; `field` names the armature setting, which the
    message, its reason alone, leaves unsaid."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(field, reason, reason)


def _target_collection(context: bpy.types.Context, obj: bpy.types.Object) -> bpy.types.Collection:
    """The armature's target collection, created and linked to the scene when missing."""
    name = target_collection_name(obj)
    collection = bpy.data.collections.get(name)
    if collection is None or collection.library is not None:
        collection = bpy.data.collections.new(name)
    if not any(child == collection for child in context.scene.collection.children_recursive):
        context.scene.collection.children.link(collection)
    return collection


def root_bone(obj: bpy.types.Object) -> bpy.types.PoseBone:
    """The armature's first bone without a parent (the one that carries the whole body)."""
    return next(pose_bone for pose_bone in obj.pose.bones if pose_bone.parent is None)


def check_follow(obj: bpy.types.Object) -> None:
    """Raise TargetFollowError when targets cannot follow the armature's chosen parent.

    A target parented to a bone the solver moves would move with every solve (a feedback
    loop), so the root bone must be one no solve turns (`Rig.solve_stiffness`: fully stiff,
    rotation-locked or held), and not translated. RigError when the rig cannot be read.
    """
    if obj.ewbik.target_follow != "ROOT_BONE":
        return
    root = root_bone(obj)
    rig = rig_for(obj, True)
    held = rig.solve_stiffness(rig.buffers.locks, [rig.index[root.name]])[0] >= 1.0
    moved = obj.ewbik.translate_root and not all(root.lock_location)
    if not held or moved:
        raise TargetFollowError(
            "target_follow",
            f"targets cannot follow the root bone '{root.name}': the solver moves it; lock its rotation "
            "(and location, with Move Root on) or let targets follow the armature object",
        )


def new_target(
    context: bpy.types.Context, obj: bpy.types.Object, pose_bone: bpy.types.PoseBone
) -> bpy.types.Object:
    """An empty at the bone's current pose (world) in the armature's collection, parented as the
    armature's `target_follow` says (call check_follow first)."""
    world = obj.matrix_world @ pose_bone.matrix
    location, rotation, _ = world.decompose()
    empty = bpy.data.objects.new(target_name(obj, pose_bone.name), None)
    empty.empty_display_type = "ARROWS"
    empty.empty_display_size = display_size(obj, pose_bone)
    empty.show_in_front = True
    empty[TARGET_MARK] = obj.name
    empty[TARGET_BONE] = pose_bone.name
    _follow(empty, obj)
    empty.matrix_world = mathutils.Matrix.LocRotScale(location, rotation, None)
    _target_collection(context, obj).objects.link(empty)
    return empty


def pole_place(obj: bpy.types.Object, pose_bone: bpy.types.PoseBone) -> mathutils.Vector:
    """World point where the limb above the pinned `pose_bone` already bends (`solver.poles`),
    one limb's length from its middle joint: a pole there leaves the pose as it is. RigError
    where the pinned bone has not two bones above it."""
    lower = pose_bone.parent
    upper = lower.parent if lower is not None else None
    if upper is None:
        raise RigError(f"pin '{pose_bone.name}'", "a pole needs two bones above the pinned bone (a limb)")
    joints = [np.array(bone.head) for bone in (upper, lower, pose_bone)]
    rest = [np.array(bone.bone.head_local) for bone in (upper, lower, pose_bone)]
    own = poles.own_bend(*rest, np.array(lower.bone.matrix_local.to_3x3()))
    turned = np.array(lower.matrix.to_quaternion().to_matrix()) @ own
    bend = poles.bend_direction(*joints, turned)
    if bend is None:
        raise RigError(f"pin '{pose_bone.name}'", "the limb is folded onto its root joint; bend it first")
    return obj.matrix_world @ mathutils.Vector(joints[1] + bend * (upper.bone.length + lower.bone.length))


def new_pole(
    context: bpy.types.Context,
    obj: bpy.types.Object,
    pose_bone: bpy.types.PoseBone,
    place: mathutils.Vector,
) -> bpy.types.Object:
    """A pole empty at world point `place` for the pinned `pose_bone`, in the collection of the
    pin's target, parented as targets are (call check_follow first)."""
    empty = bpy.data.objects.new(f"{obj.name} {pose_bone.name} pole", None)
    empty.empty_display_type = "SPHERE"
    empty.empty_display_size = 0.5 * display_size(obj, pose_bone)
    empty.show_in_front = True
    _follow(empty, obj)
    empty.matrix_world = mathutils.Matrix.Translation(place)
    target = bone_target(pose_bone)
    collections = [] if target is None else list(target.users_collection)
    (collections[0] if collections else _target_collection(context, obj)).objects.link(empty)
    return empty


def _follow(empty: bpy.types.Object, obj: bpy.types.Object) -> None:
    """Parent an empty we make as the armature's `target_follow` says (call check_follow first)."""
    follow = obj.ewbik.target_follow
    if follow != "WORLD":
        empty.parent = obj
        if follow == "ROOT_BONE":
            empty.parent_type = "BONE"
            empty.parent_bone = root_bone(obj).name
        empty.matrix_parent_inverse = _parent_matrix(obj, follow).inverted_safe()


def _parent_matrix(obj: bpy.types.Object, follow: str) -> mathutils.Matrix:
    """The world matrix a child of the armature (or of its root bone's tail) is placed relative to."""
    if follow == "OBJECT":
        return obj.matrix_world.copy()
    root = root_bone(obj)
    return obj.matrix_world @ root.matrix @ mathutils.Matrix.Translation((0.0, root.length, 0.0))


def display_size(obj: bpy.types.Object, pose_bone: bpy.types.PoseBone) -> float:
    """The bone's length in the scene, at least MIN_SIZE_OF_RIG of the rig, so the arrows stick out."""
    scale = max(abs(s) for s in obj.matrix_world.to_scale())
    return max(pose_bone.bone.length * scale, MIN_SIZE_OF_RIG * max(obj.dimensions), 1e-3)


def is_deleted(target: bpy.types.Object, view_layer: bpy.types.ViewLayer | None = None) -> bool:
    """True when the user deleted the empty: it lingers, held by the pin, but is in no collection.

    A target found in `view_layer` is there at once; only the others are looked for in every
    collection (`users_collection` walks all of them: tens of microseconds per target in a scene
    with a few hundred objects, on every live update).
    """
    try:
        if view_layer is not None and view_layer.objects.get(target.name) == target:
            return False
        return not target.users_collection
    except ReferenceError:
        return True


def unpin_deleted(
    obj: bpy.types.Object, pinned: Iterable[bpy.types.Object], view_layer: bpy.types.ViewLayer | None = None
) -> str:
    """Unpin the bones of obj whose target (among pinned) the user deleted; `view_layer`, where
    the targets usually are, makes the check cheap (`is_deleted`).

    Returns what to tell the user ("" when every target is still there).
    """
    deleted = {target for target in pinned if is_deleted(target, view_layer)}
    if not deleted:
        return ""
    bones = [pose_bone for pose_bone in obj.pose.bones if bone_target(pose_bone) in deleted]
    for pose_bone in bones:
        pose_bone.ewbik.target = None
    return deleted_targets([pose_bone.name for pose_bone in bones])


def follow_bone_renames(obj: bpy.types.Object, pinned: Iterable[bpy.types.Object]) -> None:
    """Give the empties we made for bones of obj that were renamed since the bone's new name."""
    bones = obj.pose.bones
    renamed = [
        target
        for target in pinned
        if target.get(TARGET_BONE, "") not in bones
        and target.get(TARGET_MARK) is not None
        and target.library is None
    ]
    for target in renamed:
        bone = next((pose_bone.name for pose_bone in bones if bone_target(pose_bone) == target), None)
        if bone is None:
            continue
        if target.name == target_name(obj, target.get(TARGET_BONE, "")):
            target.name = target_name(obj, bone)
        target[TARGET_BONE] = bone
