"""Scene documents into Blender: bug reports, CLI scenes, and exports reproduced.

Everything is validated and planned before the file changes: the solver's parser, Blender's
63-byte bone names, and which armature receives the document. A document lands on the active
armature only when its bones are the document's (same names); an armature with other bones is
refused with what differs, unless the user asks for a new armature. The pose, pins, limits,
stiffness, locks, rotation modes and settings are then written; values Blender's properties
clamp, settings the rig cannot keep and a rest pose that differs from the document's are
reported as warnings.
"""

from __future__ import annotations

import json
import math
import pathlib
import re
from typing import Any

import bpy
import numpy as np
from mathutils import Euler, Matrix, Quaternion, Vector

from ...solver import SolverSettings
from ...solver.scene import POSE_BONE_FIELDS, SETTINGS_FIELDS, parse_scene
from ...solver.validation import SceneError
from ..bridge.targets import new_pole, new_target
from ..com.armature_checks import RigError, armature_scale, check_writable, limits_lock
from ..com.limit_settings import has_limits, limits_dict, same_limits, set_limits
from ..com.pin_kinds import AIM_PIN_KIND, DEFAULT_PIN_KIND, pin_kind
from ..com.rotation_channels import rotation_channel
from ..com.stored_settings import (
    batched_updates,
    bone_setting,
    bone_target,
    stored_bone_limits,
    stored_solver_settings,
)

MAX_NAME_BYTES = 63  # Blender truncates longer bone names
REST_TOLERANCE = 1e-4  # of the rig's size: float32 rest matrices of an exported rig match within this

Assignment = tuple[bpy.types.bpy_struct, str, Any]  # (owner, property name, value) the import sets
PlannedPin = tuple[bpy.types.PoseBone, Matrix, bpy.types.Object | None]  # (bone, world target, its target)


def read_document(path: str) -> dict[str, Any]:
    """The scene document in `path`, validated; RigError with a message for the user otherwise."""
    name = pathlib.Path(path).name
    try:
        with open(path, encoding="utf-8") as stream:
            document = json.load(stream)
    except OSError as error:
        reason = error.strerror or str(error)
        raise RigError(path, reason, f"Could not read {path}: {reason}") from None
    except RecursionError:
        reason = "is not a scene document: its JSON is nested too deeply"
        raise RigError(name, reason, f"{name} {reason}") from None
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError, over-long integers
        raise RigError(name, f"is not JSON: {error}", f"{name} is not JSON: {error}") from None
    try:
        parse_scene(document)
        for index, bone in enumerate(document["bones"]):
            if len(bone["name"].encode("utf-8")) > MAX_NAME_BYTES:
                raise SceneError(
                    f"bones[{index}].name",
                    f"'{bone['name'][:20]}...' is longer than Blender's {MAX_NAME_BYTES} bytes",
                )
    except SceneError as error:
        raise RigError.told_after("Invalid scene document: ", error) from None
    return document


def receiving_armature(
    active: bpy.types.Object | None, document: dict[str, Any], as_new: bool
) -> bpy.types.Object | None:
    """The armature the document lands on, or None for a new one; refuses an armature with other
    bones, and one whose pose cannot be written (linked, in Edit Mode: `check_writable`)."""
    if active is None or as_new:
        return None
    check_writable(active)
    names = {bone["name"] for bone in document["bones"]}
    have = {bone.name for bone in active.data.bones}
    if have == names:
        return active
    missing, extra = sorted(names - have), sorted(have - names)
    parts = [
        f"{len(missing)} missing (e.g. '{missing[0]}')" if missing else "",
        f"{len(extra)} not in the document (e.g. '{extra[0]}')" if extra else "",
    ]
    raise RigError.about(
        active.name,
        "bones",
        f"has other bones than the document: {', '.join(p for p in parts if p)}. "
        "Select no armature, or import with As New Armature",
    )


def rest_differences(obj: bpy.types.Object, document: dict[str, Any]) -> list[str]:
    """Names of bones whose parent, length or rest matrix differ from the document's."""
    bones = obj.data.bones
    size = max(max(abs(v) for row in bone["rest"][:3] for v in row[3:]) for bone in document["bones"])
    tolerance = REST_TOLERANCE * max(size, max(bone["length"] for bone in document["bones"]))
    differ = []
    for bone in document["bones"]:
        have = bones[bone["name"]]
        rest = np.array(bone["rest"])
        rest[:3, :3] /= np.linalg.norm(rest[:3, :3], axis=0)
        if (
            (have.parent.name if have.parent else None) != bone.get("parent")
            or abs(have.length - bone["length"]) > tolerance
            or np.abs(np.array(have.matrix_local) - rest).max() > max(tolerance, REST_TOLERANCE)
        ):
            differ.append(bone["name"])
    return differ


def build_armature(context: bpy.types.Context, document: dict[str, Any], name: str) -> bpy.types.Object:
    """A new armature object with the document's bones at their rest matrices, active, in object mode.

    Connect flags and bone collections come from each bone's `blender` field. Live solving
    starts off, so the recorded pose is what the animator sees first.
    """
    data = bpy.data.armatures.new(name)
    obj = bpy.data.objects.new(name, data)
    obj.ewbik.live = False
    context.collection.objects.link(obj)
    for other in context.view_layer.objects:
        other.select_set(False)
    obj.select_set(True)
    context.view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    edit_bones = {}
    for bone in document["bones"]:
        edit_bone = data.edit_bones.new(bone["name"])
        edit_bone.head = (0.0, 0.0, 0.0)
        edit_bone.tail = (0.0, bone["length"], 0.0)
        edit_bone.matrix = Matrix(bone["rest"])
        edit_bones[bone["name"]] = edit_bone
    for bone in document["bones"]:
        blender = bone.get("blender") or {}
        edit_bone = edit_bones[bone["name"]]
        if bone.get("parent") is not None:
            edit_bone.parent = edit_bones[bone["parent"]]
            edit_bone.use_connect = bool(blender.get("connected", False))
        for collection_name in blender.get("collections", ()):
            collection = data.collections.get(collection_name) or data.collections.new(collection_name)
            collection.assign(edit_bone)
    bpy.ops.object.mode_set(mode="OBJECT")
    return obj


def rotation_values(mode: str, quaternion: Quaternion, euler: Euler) -> tuple[str, Any]:
    """(property name, value) that gives a pose bone in `mode` this local rotation."""
    channel = rotation_channel(mode)
    if channel == "rotation_quaternion":
        return channel, quaternion
    if channel == "rotation_axis_angle":
        axis, angle = quaternion.to_axis_angle()
        return channel, (angle, *axis)
    return channel, quaternion.to_euler(mode, euler)


def bone_assignments(pose_bone: bpy.types.PoseBone, bone: dict[str, Any]) -> list[Assignment]:
    """(owner, property, value) for one bone: rotation mode and locks first, then the pose,
    stiffness and stretch; a setting the bone has already is left alone, so a bone that stores
    no settings is given none (`stored_settings`)."""
    blender = bone.get("blender") or {}
    assignments = [
        (pose_bone, key, tuple(blender[key]) if isinstance(blender[key], list) else blender[key])
        for key in POSE_BONE_FIELDS
        if key in blender
    ]
    mode = blender.get("rotation_mode", pose_bone.rotation_mode)
    rotation = Quaternion(bone.get("rotation", (1.0, 0.0, 0.0, 0.0))).normalized()
    assignments.append((pose_bone, *rotation_values(mode, rotation, pose_bone.rotation_euler)))
    assignments.append((pose_bone, "location", tuple(bone.get("location", (0.0, 0.0, 0.0)))))
    settings = []
    stiffness = float(bone.get("stiffness", 0.0))
    locked = blender.get("lock_rotation", pose_bone.lock_rotation)
    if not (stiffness == 1.0 and all(locked)):
        # Export writes 1 for fully locked bones; the locks already freeze them here,
        # and storing 1 would keep them frozen after the animator unlocks them.
        settings.append(("stiffness", stiffness))
    if "stretch" in bone:
        settings.append(("stretch", float(bone["stretch"])))
    return assignments + [
        (pose_bone.ewbik, name, value) for name, value in settings if value != bone_setting(pose_bone, name)
    ]


def settings_assignments(
    obj: bpy.types.Object, settings: dict[str, Any]
) -> tuple[list[Assignment], list[str]]:
    """(owner, property, value) for the settings the rig stores, and notes on those it cannot keep."""
    assignments, notes = [], []
    defaults = SolverSettings()
    for field in SETTINGS_FIELDS:
        if field not in settings:
            continue
        value = settings[field]
        if field == "tolerance":
            assignments.append((obj.ewbik, field, value * armature_scale(obj)))
        elif field == "time_budget_ms":
            assignments.append((obj.ewbik, field, value or 0.0))
        elif field in stored_solver_settings():
            assignments.append((obj.ewbik, field, value))
        elif value != getattr(defaults, field):
            notes.append(f"the rig solves with {field} {getattr(defaults, field)}, not {value}")
    return assignments, notes


def pose_plan(
    obj: bpy.types.Object, document: dict[str, Any]
) -> tuple[list[Assignment], list[PlannedPin], list[str]]:
    """Every property assignment the import makes on `obj`, computed before any is made.

    Returns a list of (owner, property name, value), the pins as (pose bone, world target
    matrix, existing target or None), and notes on settings the rig cannot keep.
    """
    bones = obj.pose.bones
    assignments = []
    for bone in document["bones"]:
        assignments += bone_assignments(bones[bone["name"]], bone)
    settings, notes = settings_assignments(obj, document.get("settings", {}))
    assignments += settings
    pins = []
    for entry in document.get("pins", ()):
        pose_bone = bones[entry["bone"]]
        props = pose_bone.ewbik
        pins.append((pose_bone, obj.matrix_world @ Matrix(entry["target"]), props.target))
        assignments.append((props, "weight", float(entry.get("weight", 1.0))))
        assignments.append(
            (props, "orientation_weights", tuple(entry.get("orientation_weights", (1.0, 1.0, 1.0))))
        )
        assignments.append((props, "falloff", float(entry.get("falloff", 0.0))))
        assignments.append((props, "priority", float(entry.get("priority", 0.0))))
        assignments += _aim_assignments(props, entry.get("aim"))
    return assignments, pins, notes


def _aim_assignments(props: bpy.types.PropertyGroup, aim: str | None) -> list[Assignment]:
    """An aim pin's kind and axis; a pin without aim on a bone that aimed becomes an ordinary one
    (the document's axis weights say what it holds)."""
    if aim is not None:
        return [(props, "pin_kind", AIM_PIN_KIND), (props, "aim_axis", aim)]
    return [(props, "pin_kind", DEFAULT_PIN_KIND)] if pin_kind(props.pin_kind).aims else []


def apply_document(context: bpy.types.Context, obj: bpy.types.Object, document: dict[str, Any]) -> list[str]:
    """Give `obj` the document's pose, pins, limits, stiffness, locks and settings.

    Returns notes for the user: values Blender clamped to its properties' ranges and settings
    the rig cannot keep.
    """
    if _limits_change(obj, document):
        reason = limits_lock(obj)
        if reason is not None:
            raise RigError("limits", reason, f"The document's joint limits cannot be set: {reason}")
    with batched_updates(obj):
        return _apply_plan(context, obj, document)


def _limits_change(obj: bpy.types.Object, document: dict[str, Any]) -> bool:
    """Whether the document gives some bone of `obj` other joint limits than it has."""
    wanted = {bone["name"]: bone.get("limits") for bone in document["bones"]}
    for bone in obj.data.bones:
        stored = stored_bone_limits(bone)
        if not same_limits(wanted.get(bone.name), limits_dict(stored) if has_limits(stored) else None):
            return True
    return False


def _apply_plan(context: bpy.types.Context, obj: bpy.types.Object, document: dict[str, Any]) -> list[str]:
    assignments, pins, notes = pose_plan(obj, document)
    poles = [
        (pose_bone, entry.get("pole")) for (pose_bone, _, _), entry in zip(pins, document.get("pins", ()))
    ]
    limits = {bone["name"]: bone.get("limits") for bone in document["bones"]}
    pinned = {pose_bone.name for pose_bone, _matrix, _target in pins}
    for owner, name, value in assignments:
        setattr(owner, name, value)
        if _clamped(getattr(owner, name), value):
            notes.append(
                f"{_label(owner)}{name} {_shown(value)} was clamped to {_shown(getattr(owner, name))}"
            )
    for pose_bone in obj.pose.bones:
        if pose_bone.name not in pinned and bone_target(pose_bone) is not None:
            pose_bone.ewbik.target = None
        wanted = limits.get(pose_bone.name) or {}
        if wanted or stored_bone_limits(pose_bone.bone) is not None:
            set_limits(pose_bone.bone.ewbik, wanted)
            notes += _clamped_limits(pose_bone.bone, wanted)
    for pose_bone, matrix, existing in pins:
        movable = existing is not None and existing.type != "ARMATURE"  # never move a rig a pin follows
        target = existing if movable else new_target(context, obj, pose_bone)
        target.matrix_world = matrix
        pose_bone.ewbik.target = target
    for pose_bone, pole in poles:
        _place_pole(context, obj, pose_bone, pole)
    return notes


def _place_pole(
    context: bpy.types.Context, obj: bpy.types.Object, pose_bone: bpy.types.PoseBone, pole: list[float] | None
) -> None:
    """The pin's pole at `pole` (armature space; None: no pole), its pole object moved there or
    a new one made."""
    if pole is None:
        pose_bone.ewbik.pole = None
        return
    place = obj.matrix_world @ Vector(pole)
    existing = pose_bone.ewbik.pole
    if existing is None or existing.type == "ARMATURE":
        pose_bone.ewbik.pole = new_pole(context, obj, pose_bone, place)
    else:
        matrix = existing.matrix_world.copy()
        matrix.translation = place
        existing.matrix_world = matrix


def _clamped(stored: Any, wanted: Any) -> bool:
    """Whether Blender stored a different number than asked (beyond float32 rounding)."""
    if isinstance(wanted, (bool, str)) or not isinstance(wanted, (int, float, tuple, list)):
        return False
    stored = np.atleast_1d(np.array(tuple(stored) if hasattr(stored, "__len__") else stored, dtype=float))
    wanted = np.atleast_1d(np.array(wanted, dtype=float))
    return stored.shape == wanted.shape and not np.allclose(stored, wanted, rtol=1e-6, atol=1e-9)


def _clamped_limits(bone: bpy.types.Bone, limits: dict[str, Any]) -> list[str]:
    """Notes on the cone radii Blender clamped (to a half turn, which allows every direction); a
    twist range always fits, the twist properties take the solver's whole range."""
    wanted = [cone["radius"] for cone in limits.get("cones", ())]
    stored = [cone.radius for cone in bone.ewbik.cones]
    return [
        f"bone '{bone.name}': cone {i + 1} radius {math.degrees(w):.1f} deg was clamped to "
        f"{math.degrees(s):.1f} deg"
        for i, (w, s) in enumerate(zip(wanted, stored))
        if _clamped(s, w)
    ]


def _label(owner: bpy.types.bpy_struct) -> str:
    """The prefix naming the bone of a pose bone or its settings; none for the armature's settings."""
    bone = re.match(r'pose\.bones\["(.*?)"\]', owner.path_from_id())
    return f"bone '{bone.group(1)}': " if bone else ""


def _shown(value: Any) -> str:
    if hasattr(value, "__len__") and not isinstance(value, str):
        return "(" + ", ".join(f"{v:g}" for v in value) + ")"
    return f"{value:g}" if isinstance(value, (int, float)) else str(value)
