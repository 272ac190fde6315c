"""Scene and pose documents (version 1): the solver's file format and batch interface.

Parsing validates everything up front and raises `SceneError` with the path of the offending
field (`bones[3].limits.cones[0].direction`), so a bad document never reaches the solver and
never yields NaN.
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .balance import body_of
from .kusudama import JointLimits, Kusudama
from .pins import Pin
from .presets import bone_roles
from .settings import FIELDS, SolverSettings
from .skeleton import Skeleton
from .solve import SolveResult, solve
from .stretch import MAX_STRETCH
from .validation import SceneError, flag, mapping, name, number, vector, whole

_TOP_KEYS = {"format", "version", "bones", "pins", "settings"}
_BONE_KEYS = {
    "name",
    "parent",
    "rest",
    "length",
    "rotation",
    "location",
    "stiffness",
    "stretch",
    "limits",
    "blender",
}
_PIN_KEYS = {"bone", "target", "weight", "orientation_weights", "falloff", "priority", "pole", "aim"}
SETTINGS_FIELDS = tuple(field for field in FIELDS if field != "backend")
"""The settings a scene document carries: every `SolverSettings` field but the choice of loop."""
ROTATION_MODES = ("QUATERNION", "AXIS_ANGLE", "XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")
_POSE_BONE_KEYS = {
    "rotation_mode": lambda v, f: _choice(v, f, ROTATION_MODES),
    "lock_rotation": lambda v, f: _flags(v, 3, f),
    "lock_rotation_w": flag,
    "lock_rotations_4d": flag,
    "lock_location": lambda v, f: _flags(v, 3, f),
}
POSE_BONE_FIELDS = tuple(_POSE_BONE_KEYS)
"""The `blender` fields that are the pose bone's properties of the same name: its rotation mode
and its rotation and location locks."""
_BLENDER_KEYS = {
    **_POSE_BONE_KEYS,
    "connected": flag,
    "collections": lambda v, f: [name(c, f"{f}[{k}]") for k, c in enumerate(_list(v, f))],
}
"""A bone's `blender` field: what Blender needs to rebuild and pose the rig as exported (the solver
ignores it): rotation mode, rotation and location locks, the connect flag, bone collection names."""


@dataclass
class Scene:
    """Everything `solve` needs, in the skeleton's bone order."""

    skeleton: Skeleton
    pins: list
    rotations: np.ndarray
    locations: np.ndarray
    stiffness: np.ndarray
    limits: JointLimits | None
    settings: SolverSettings
    stretch: np.ndarray  # (N,) each bone's maximum stretch (1 = none)


def parse_scene(doc: Mapping[str, Any]) -> Scene:
    """Validate a scene document and build the solver objects; bad input raises SceneError."""
    mapping(doc, "", _TOP_KEYS)
    if doc.get("format") != "ewbik-scene":
        raise SceneError("format", "expected 'ewbik-scene'")
    whole(doc.get("version"), "version", 1, 1)
    bones = doc.get("bones")
    if not isinstance(bones, list) or not bones:
        raise SceneError("bones", "expected a non-empty list of bones")
    skeleton = _skeleton(bones)
    rotations, locations, stiffness, limits = _pose(bones, skeleton)
    pins = _pins(doc.get("pins", []), skeleton)
    settings = _settings(doc.get("settings", {}))
    return Scene(skeleton, pins, rotations, locations, stiffness, limits, settings, _stretch(bones, skeleton))


def _stretch(bones: Sequence[Mapping[str, Any]], skeleton: Skeleton) -> np.ndarray:
    """(N,) the document's `bones[].stretch` (1 where absent), in skeleton order."""
    stretch = np.ones(len(skeleton))
    for k, bone in enumerate(bones):
        if "stretch" in bone:
            stretch[skeleton.index[bone["name"]]] = number(
                bone["stretch"], f"bones[{k}].stretch", 1.0, MAX_STRETCH
            )
    return stretch


def _skeleton(bones: Sequence[Mapping[str, Any]]) -> Skeleton:
    for i, bone in enumerate(bones):
        mapping(bone, f"bones[{i}]", _BONE_KEYS)
        name(bone.get("name"), f"bones[{i}].name")
        for key in ("rest", "length"):
            if key not in bone:
                raise SceneError(f"bones[{i}].{key}", f"is missing (bone '{bone['name']}')")
        if bone.get("blender") is not None:
            _blender_fields(bone["blender"], f"bones[{i}].blender")
    return Skeleton(
        [b["name"] for b in bones],
        [b.get("parent") for b in bones],
        [b["rest"] for b in bones],
        [b["length"] for b in bones],
    )


def _pose(
    bones: Sequence[Mapping[str, Any]], skeleton: Skeleton
) -> tuple[np.ndarray, np.ndarray, np.ndarray, JointLimits | None]:
    """(rotations, locations, stiffness, limits) of the document's bones, in skeleton order."""
    n = len(skeleton)
    rotations = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
    locations = np.zeros((n, 3))
    stiffness = np.zeros(n)
    kusudamas = {}
    for k, bone in enumerate(bones):
        i = skeleton.index[bone["name"]]
        where = f"bones[{k}]"
        if "rotation" in bone:
            q = vector(bone["rotation"], 4, f"{where}.rotation")
            norm = np.linalg.norm(q)
            if norm < 1e-9:
                raise SceneError(f"{where}.rotation", f"is a zero quaternion (bone '{bone['name']}')")
            rotations[i] = q / norm
        if "location" in bone:
            locations[i] = vector(bone["location"], 3, f"{where}.location")
        if "stiffness" in bone:
            stiffness[i] = number(bone["stiffness"], f"{where}.stiffness", 0.0, 1.0)
        if bone.get("limits") is not None:
            kusudamas[i] = Kusudama.from_dict(bone["limits"], bone=bone["name"], field=f"{where}.limits")
    return rotations, locations, stiffness, JointLimits(kusudamas, n) if kusudamas else None


def _pins(raw_pins: object, skeleton: Skeleton) -> list[Pin]:
    if not isinstance(raw_pins, list):
        raise SceneError("pins", "expected a list")
    pins, pinned = [], set()
    for k, raw in enumerate(raw_pins):
        where = f"pins[{k}]"
        mapping(raw, where, _PIN_KEYS)
        bone = name(raw.get("bone"), f"{where}.bone")
        if bone not in skeleton.index:
            raise SceneError(f"{where}.bone", f"'{bone}' is not a bone of the scene")
        if bone in pinned:
            raise SceneError(f"{where}.bone", f"'{bone}' is pinned twice")
        pinned.add(bone)
        if "target" not in raw:
            raise SceneError(f"{where}.target", f"is missing (pin '{bone}')")
        try:
            pins.append(
                Pin(
                    bone,
                    raw["target"],
                    raw.get("weight", 1.0),
                    raw.get("orientation_weights", (1.0, 1.0, 1.0)),
                    raw.get("falloff", 0.0),
                    raw.get("priority", 0.0),
                    raw.get("pole"),
                    raw.get("aim"),
                )
            )
        except SceneError as error:
            raise error.within(where) from None
    return pins


def solve_scene(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Solve a scene document; returns the pose document."""
    scene = parse_scene(doc)
    result = solve(
        scene.skeleton,
        scene.pins,
        scene.rotations,
        scene.locations,
        scene.settings,
        limits=scene.limits,
        stiffness=scene.stiffness,
        stretch=scene.stretch,
        body=body_of(scene.skeleton, bone_roles(scene.skeleton.names)) if scene.settings.balance else None,
    )
    return pose_document(scene, result)


def pose_document(scene: Scene, result: SolveResult) -> dict[str, Any]:
    """The pose document of a solve: every bone's local pose plus statistics."""
    names, scales = scene.skeleton.names, result.scales
    assert scales is not None  # `solve` gives every bone's scale
    return {
        "format": "ewbik-pose",
        "version": 1,
        "bones": {
            name: {
                "rotation": result.rotations[i].tolist(),
                "location": result.locations[i].tolist(),
                **({"stretch": float(scales[i])} if scales[i] != 1.0 else {}),
            }
            for i, name in enumerate(names)
        },
        "stats": {
            "iterations": int(result.iterations),
            "converged": bool(result.converged),
            "ms": float(result.ms),
            "pins": {
                pin.bone: {
                    "position_error": float(result.position_errors[k]),
                    "orientation_error_deg": float(result.orientation_errors_deg[k]),
                }
                for k, pin in enumerate(scene.pins)
            },
        },
    }


def scene_document(
    bones: Iterable[dict[str, Any]],
    pins: Iterable[dict[str, Any]] = (),
    settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A scene document (version 1) as `parse_scene` reads it.

    bones: `scene_bone` entries; pins: entries with some or all of a pin's fields (`scene_pin`
    writes a `Pin` whole); settings: a dict of settings fields (`scene_settings` writes a
    `SolverSettings` whole), or None for none (the solver's defaults).
    """
    document = {"format": "ewbik-scene", "version": 1, "bones": list(bones), "pins": list(pins)}
    if settings is not None:
        document["settings"] = dict(settings)
    return document


def scene_bone(
    name: str,
    parent: str | None,
    rest: ArrayLike,
    length: float,
    *,
    rotation: ArrayLike | None = None,
    location: ArrayLike | None = None,
    stiffness: float | None = None,
    stretch: float | None = None,
    limits: Mapping[str, Any] | None = None,
    blender: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A `bones` entry: name, parent (None: a root), rest matrix and length, then each of the
    other fields given (None: left to the parser's default); numpy values as plain lists and
    floats."""
    fields = {
        "rotation": rotation,
        "location": location,
        "stiffness": stiffness,
        "stretch": stretch,
        "limits": limits,
        "blender": blender,
    }
    return {
        "name": name,
        "parent": parent,
        "rest": _plain(rest),
        "length": _plain(length),
        **{key: _plain(value) for key, value in fields.items() if value is not None},
    }


def scene_pin(pin: Pin) -> dict[str, Any]:
    """A `Pin` as a `pins` entry, every field written (the pole where it has one)."""
    return {
        "bone": pin.bone,
        "target": _plain(pin.target),
        "weight": pin.weight,
        "orientation_weights": list(pin.orientation_weights),
        "falloff": pin.falloff,
        "priority": pin.priority,
        **({} if pin.pole is None else {"pole": _plain(pin.pole)}),
        "aim": pin.aim,
    }


def scene_settings(settings: SolverSettings) -> dict[str, Any]:
    """A `SolverSettings` as a document's `settings`: every field a document carries."""
    return {field: getattr(settings, field) for field in SETTINGS_FIELDS}


def _plain(value: Any) -> Any:
    """numpy arrays and numbers as the lists and floats JSON writes; anything else as it is."""
    return value.tolist() if isinstance(value, (np.ndarray, np.generic)) else value


def _settings(raw: Mapping[str, Any]) -> SolverSettings:
    mapping(raw, "settings", SETTINGS_FIELDS)
    return SolverSettings(**raw)


def _blender_fields(raw: Mapping[str, Any], field: str) -> None:
    mapping(raw, field, _BLENDER_KEYS)
    for key, check in _BLENDER_KEYS.items():
        if key in raw:
            check(raw[key], f"{field}.{key}")


def _list(value: object, field: str) -> list[Any]:
    if not isinstance(value, list):
        raise SceneError(field, "must be a list")
    return value


def _flags(value: object, size: int, field: str) -> list[bool]:
    if not isinstance(value, list) or len(value) != size:
        raise SceneError(field, f"must be a list of {size} true/false values")
    return [flag(v, f"{field}[{k}]") for k, v in enumerate(value)]


def _choice(value: object, field: str, choices: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise SceneError(field, f"must be one of {', '.join(choices)}")
    return value
