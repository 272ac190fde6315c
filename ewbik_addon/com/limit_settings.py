"""Joint limits between scene-document dicts and `Bone.ewbik`, the limits stored on the armature's
bones (presets, import, fitting, the overlay and its handles, mirror and copy)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from ...solver.kusudama import Kusudama, LimitCone, TwistLimit, cone_direction
from ...solver.scene import scene_bone

if TYPE_CHECKING:
    import bpy


def scene_bones(obj: bpy.types.Object) -> list[dict[str, Any]]:
    """The armature's bones as scene-document bone dicts (name, parent, rest, length).

    Matrices and lengths are read for all bones at once (foreach_get): presets, pinning, export
    and fitting read every bone of rigs that may carry a thousand.
    """
    bones = obj.data.bones
    rest, lengths = np.empty(16 * len(bones)), np.empty(len(bones))
    bones.foreach_get("matrix_local", rest)
    bones.foreach_get("length", lengths)
    matrices = rest.reshape(-1, 4, 4).transpose(0, 2, 1).tolist()  # Blender hands matrices column by column
    return [
        scene_bone(bone.name, bone.parent.name if bone.parent else None, matrix, length)
        for bone, matrix, length in zip(bones, matrices, lengths.tolist())
    ]


def set_limits(settings: bpy.types.PropertyGroup, limits: dict[str, Any]) -> None:
    """Store one bone's scene-document limits dict (cones, optional twist and comfort) in its
    `Bone.ewbik`; {} clears them. The first cone becomes the active one."""
    settings.cones.clear()
    for cone in limits.get("cones", ()):
        item = settings.cones.add()
        item.direction = cone["direction"]
        item.radius = cone["radius"]
    settings.active_cone_index = 0
    twist = limits.get("twist")
    settings.use_twist_limit = twist is not None
    if twist is not None:
        settings.twist_min = twist["min"]
        settings.twist_max = twist["max"]
    settings.comfort = limits.get("comfort", 0.0)


def limits_dict(settings: bpy.types.PropertyGroup) -> dict[str, Any]:
    """One bone's stored limits as a scene-document limits dict: the inverse of `set_limits`.

    Directions are stored as the panel left them (any length); `kusudama_of` makes them usable.
    """
    limits: dict[str, Any] = {
        "cones": [{"direction": tuple(cone.direction), "radius": cone.radius} for cone in settings.cones]
    }
    if settings.use_twist_limit:
        limits["twist"] = {"min": settings.twist_min, "max": settings.twist_max}
    if settings.comfort:
        limits["comfort"] = settings.comfort
    return limits


def same_limits(first: dict[str, Any] | None, second: dict[str, Any] | None) -> bool:
    """Whether two scene-document limits dicts ({} or None: no limits) store the same limits: cone
    directions compared as unit vectors, every value as Blender keeps it (float32)."""
    return _as_stored(first or {}) == _as_stored(second or {})


def _as_stored(limits: dict[str, Any]) -> tuple:
    """(cones, twist, comfort) of a limits dict as Blender stores them: float32, unit cone axes."""

    def stored(*values: float) -> tuple[float, ...]:
        return tuple(np.asarray(values, dtype=np.float32).tolist())

    def unit(direction: Sequence[float]) -> Sequence[float] | np.ndarray:
        axis = cone_direction(direction)
        return direction if axis is None else axis

    twist = limits.get("twist")
    return (
        tuple(stored(*unit(cone["direction"]), cone["radius"]) for cone in limits.get("cones", ())),
        None if twist is None else stored(twist["min"], twist["max"]),
        stored(limits.get("comfort", 0.0)),
    )


def has_limits(settings: bpy.types.PropertyGroup | None) -> bool:
    """Whether bone settings (or None: a bone that stores none) hold a cone or a twist limit."""
    return settings is not None and bool(len(settings.cones) or settings.use_twist_limit)


def limits_key(settings: bpy.types.PropertyGroup) -> tuple:
    """A hashable fingerprint of one bone's stored limits (changes whenever a limit is edited)."""
    cones = tuple((*cone.direction, cone.radius) for cone in settings.cones)
    twist = (settings.twist_min, settings.twist_max) if settings.use_twist_limit else None
    return cones, twist


def kusudama_of(settings: bpy.types.PropertyGroup) -> Kusudama:
    """The solver's Kusudama for a bone's stored limits, for drawing and editing.

    Forgiving where the panel is: cones without a direction and an inverted twist range are
    left out (the solver refuses them with a message when it runs). Built once per distinct
    limits, since the overlay asks on every pose change.
    """
    return kusudama_from_key(limits_key(settings))


@lru_cache(maxsize=1024)
def kusudama_from_key(key: tuple) -> Kusudama:
    """The Kusudama of a `limits_key` (shared: equal limits give the same object)."""
    cone_rows, twist_range = key
    cones = []
    for *direction, radius in cone_rows:
        axis = cone_direction(direction)
        if axis is not None and np.isfinite(radius):
            cones.append(LimitCone(tuple(axis), max(0.0, float(radius))))
    twist = None
    if twist_range is not None and twist_range[0] <= twist_range[1]:
        twist = TwistLimit(*twist_range)
    return Kusudama(cones, twist)
