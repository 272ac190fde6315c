"""Reading a bone's EWBIK settings without storing them on bones that have none, and moving the
joint limits of files saved by earlier versions from the pose bones to the armature's bones.

Asking for `pose_bone.ewbik` stores an empty group on a bone that had none, and Blender copies
every pose bone's groups each time it evaluates the pose: on every live update, ~0.3 ms at 1000
bones (Blender 5.2). Code that reads every bone of a rig (scans, sidebar lists, overlay, checks)
asks here first, so only the bones a user set something on carry a group. Limits live on the
armature data's bones (`Bone.ewbik`), which that evaluation does not copy; they are read the
same way, so a scan stores nothing on bones without limits.

Every stored setting asks the live handler to solve its armature again when it changes
(`settings_changed`); an import sets many at once inside `batched_updates`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import bpy

from ...solver import EwbikError, SolverSettings
from .limit_settings import has_limits, limits_dict, same_limits, set_limits

if TYPE_CHECKING:
    from idprop.types import IDPropertyGroup

_batching = [0]  # > 0 inside `batched_updates`


def settings_changed(self: bpy.types.PropertyGroup, context: bpy.types.Context) -> None:
    """Ask the live handler to solve the owning armature again."""
    owner = self.id_data
    if owner is not None and not _batching[0]:
        owner.update_tag()


@contextlib.contextmanager
def batched_updates(owner: bpy.types.ID) -> Iterator[None]:
    """Set many settings of `owner` (an import), tagging it once at the end: each tag costs time in
    proportion to the rig's bones, so a tag per setting made an import quadratic in them."""
    _batching[0] += 1
    try:
        yield
    finally:
        _batching[0] -= 1
        owner.update_tag()


@functools.cache
def stored_solver_settings() -> tuple[str, ...]:
    """The `SolverSettings` fields an armature object stores (`Object.ewbik`), as its registered
    property group defines them; the others keep the solver's defaults."""
    stored = bpy.types.Object.bl_rna.properties["ewbik"].fixed_type.bl_rna.properties
    return tuple(field.name for field in dataclasses.fields(SolverSettings) if field.name in stored)


class LimitsNotMoved(EwbikError):
    """An earlier version's limits on a pose bone could not be moved to the bone; they stay there.
    `field` is the bone as the message names it ("bone 'thigh.L'")."""


def _stored(struct: bpy.types.bpy_struct) -> bpy.types.bpy_struct | IDPropertyGroup | None:
    """Where Blender keeps the bpy.props values of `struct`, or None: Blender 5 keeps them apart
    from custom properties (`bl_system_properties_get`), earlier versions among them."""
    system_properties = getattr(struct, "bl_system_properties_get", None)
    return struct if system_properties is None else system_properties()


def _stored_group(struct: bpy.types.bpy_struct) -> bpy.types.PropertyGroup | None:
    """`struct.ewbik` when `struct` stores any of its values, else None (every one at its default)."""
    store = _stored(struct)
    if store is None or "ewbik" not in store:
        return None
    return struct.ewbik


def stored_bone_settings(pose_bone: bpy.types.PoseBone) -> bpy.types.PropertyGroup | None:
    """The pose bone's pin settings (`PoseBone.ewbik`) when it stores any, else None."""
    return _stored_group(pose_bone)


def stored_bone_limits(bone: bpy.types.Bone) -> bpy.types.PropertyGroup | None:
    """The Bone's joint limits (`Bone.ewbik`) when it stores any, else None (no limits)."""
    return _stored_group(bone)


def stored_object(props: bpy.types.PropertyGroup, name: str) -> bpy.types.Object | None:
    """The object an object property of `props` points to, or None; asked without storing it:
    reading one through Blender stores an empty value on a group that had none."""
    store = _stored(props)
    return getattr(props, name) if store is not None and name in store else None


def bone_target(pose_bone: bpy.types.PoseBone) -> bpy.types.Object | None:
    """The bone's pin target, or None (asked without storing settings on the bone)."""
    props = stored_bone_settings(pose_bone)
    return None if props is None else stored_object(props, "target")


def bone_setting(pose_bone: bpy.types.PoseBone, name: str) -> Any:
    """The bone's `PoseBone.ewbik` setting `name` (stiffness, stretch, ...), asked without storing
    settings: its default on a bone that stores none (`bone_setting_default`)."""
    props = stored_bone_settings(pose_bone)
    return bone_setting_default(name) if props is None else getattr(props, name)


def bone_setting_default(name: str) -> Any:
    """What a bone that stores no settings has for `PoseBone.ewbik` setting `name`: its default."""
    return bpy.types.PoseBone.bl_rna.properties["ewbik"].fixed_type.properties[name].default


def pinned_bones(obj: bpy.types.Object) -> list[bpy.types.PoseBone]:
    """The armature's pose bones that have a pin target, in pose.bones order."""
    return [pose_bone for pose_bone in obj.pose.bones if bone_target(pose_bone) is not None]


def move_limits_to_bones(obj: bpy.types.Object) -> list[str]:
    """Move the joint limits that earlier versions stored on the armature's pose bones to its bones
    (`Bone.ewbik`), and delete them from the pose bones.

    An armature whose object or data is linked is left as its library holds it (one message says
    which file to save again). A bone whose limits cannot be moved keeps them on its pose bone
    (unused until moved); returns what went wrong, one message per such bone.
    """
    if obj.type != "ARMATURE" or obj.pose is None:
        return []
    stored = [(pose_bone, _old_limits(pose_bone)) for pose_bone in obj.pose.bones]
    stored = [(pose_bone, old) for pose_bone, old in stored if old is not None]
    library = obj.library or obj.data.library
    if stored and library is not None:
        return [
            f"{obj.name}: linked from '{library.filepath}', which stores them as earlier versions did; "
            "open and save that file with this version to use them"
        ]
    problems = []
    for pose_bone, old in stored:
        try:
            _move_limits(old, pose_bone.bone)
        except LimitsNotMoved as error:
            problems.append(f"{obj.name}: {error}")
            continue
        if not old.keys():
            del _stored(pose_bone)["ewbik"]
    return problems


def _old_limits(pose_bone: bpy.types.PoseBone) -> IDPropertyGroup | None:
    """The pose bone's raw `ewbik` group when it holds joint limits (an earlier version's), else None."""
    store = _stored(pose_bone)
    old = store.get("ewbik") if store is not None else None
    return old if old is not None and any(name in old for name in _limit_names()) else None


def _limit_names() -> list[str]:
    """The names `Bone.ewbik` stores its limits under (earlier versions used the same on pose bones)."""
    return [name for name in _limit_properties().keys() if name not in ("rna_type", "name")]


def _limit_properties() -> bpy.types.bpy_prop_collection:
    return bpy.types.Bone.bl_rna.properties["ewbik"].fixed_type.properties


def _move_limits(old: IDPropertyGroup, bone: bpy.types.Bone) -> None:
    """Store the limits of `old` (a pose bone's raw `ewbik` group) on `bone`, then delete them from
    `old`; raises LimitsNotMoved, both left as they were, when they cannot be stored or the bone
    (shared by another armature object) already has other limits."""
    limits, active_cone = _raw_limits(old, bone.name)
    had = stored_bone_limits(bone)
    before = limits_dict(had) if has_limits(had) else None
    if before is not None and not same_limits(before, limits):
        raise LimitsNotMoved(
            f"bone '{bone.name}'", "cones, twist or comfort differ from those the bone already has"
        )
    try:
        set_limits(bone.ewbik, limits)
        bone.ewbik.active_cone_index = active_cone if 0 <= active_cone < len(bone.ewbik.cones) else 0
    except (TypeError, ValueError, OverflowError) as error:
        if had is None:
            del _stored(bone)["ewbik"]
        else:
            set_limits(had, before or {})
        raise LimitsNotMoved(f"bone '{bone.name}'", str(error)) from None
    for name in _limit_names():
        if name in old:
            del old[name]


def _raw_limits(old: IDPropertyGroup, bone_name: str) -> tuple[dict[str, Any], int]:
    """(scene-document limits dict, active cone index) of a pose bone's raw `ewbik` group, with
    `Bone.ewbik`'s defaults for what it does not store (Blender stores only values set)."""
    properties = _limit_properties()
    cone_properties = properties["cones"].fixed_type.properties

    def read(
        group: IDPropertyGroup,
        props: bpy.types.bpy_prop_collection,
        name: str,
        convert: Callable[[Any], Any],
        field: str,
    ) -> Any:
        stored = group.get(name)
        if stored is None:
            return tuple(props[name].default_array) if props[name].is_array else props[name].default
        try:
            return convert(stored)
        except (TypeError, ValueError) as error:
            raise LimitsNotMoved(f"bone '{bone_name}'", f"{field} unreadable: {stored!r} ({error})") from None

    cones = read(old, properties, "cones", list, "cones")
    limits = {
        "cones": [
            {
                "direction": read(cone, cone_properties, "direction", _axis, f"cone {i + 1} direction"),
                "radius": read(cone, cone_properties, "radius", float, f"cone {i + 1} radius"),
            }
            for i, cone in enumerate(cones)
        ]
    }
    if read(old, properties, "use_twist_limit", bool, "use_twist_limit"):
        limits["twist"] = {
            "min": read(old, properties, "twist_min", float, "twist_min"),
            "max": read(old, properties, "twist_max", float, "twist_max"),
        }
    comfort = read(old, properties, "comfort", float, "comfort")
    if comfort:
        limits["comfort"] = comfort
    return limits, read(old, properties, "active_cone_index", int, "active_cone_index")


def _axis(stored: Iterable[float]) -> tuple[float, ...]:
    """Three floats of a stored cone axis (ValueError otherwise)."""
    axis = tuple(float(c) for c in stored)
    if len(axis) != 3:
        raise ValueError(f"{len(axis)} components, not 3")
    return axis
