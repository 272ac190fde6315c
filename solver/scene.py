"""Scene and pose documents (version 1): the solver's file format and batch interface.

Parsing validates everything up front and names the offending bone, pin or
field, so a bad document never reaches the solver and never yields NaN.
"""

import math
from dataclasses import dataclass

import numpy as np

from .kusudama import JointLimits, Kusudama
from .pins import Pin
from .settings import SolverSettings
from .skeleton import Skeleton
from .solve import solve

_TOP_KEYS = {"format", "version", "bones", "pins", "settings"}
_BONE_KEYS = {"name", "parent", "rest", "length", "rotation", "location", "stiffness", "limits"}
_PIN_KEYS = {"bone", "target", "weight", "orientation_weights", "falloff"}
_SETTING_KEYS = {
    "iterations",
    "time_budget_ms",
    "tolerance",
    "dampening",
    "stabilization_passes",
    "translate_root",
    "exact",
    "relaxation",
    "acceleration",
    "analytic_limbs",
}


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


def parse_scene(doc):
    """Validate a scene document and build the solver objects."""
    if not isinstance(doc, dict):
        raise ValueError("scene: the document must be a JSON object")
    if doc.get("format") != "ewbik-scene":
        raise ValueError(f"format: expected 'ewbik-scene', got {doc.get('format')!r}")
    if doc.get("version") != 1:
        raise ValueError(f"version: expected 1, got {doc.get('version')!r}")
    _no_unknown_keys(doc, _TOP_KEYS, "scene")
    bones = doc.get("bones")
    if not isinstance(bones, list) or not bones:
        raise ValueError("bones: expected a non-empty list of bones")
    names, parents, rests, lengths = [], [], [], []
    for i, bone in enumerate(bones):
        if not isinstance(bone, dict):
            raise ValueError(f"bones[{i}]: expected an object")
        name = bone.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"bones[{i}].name: expected a non-empty string")
        _no_unknown_keys(bone, _BONE_KEYS, f"bone '{name}'")
        parent = bone.get("parent")
        if parent is not None and not isinstance(parent, str):
            raise ValueError(f"bone '{name}': parent must be a bone name or null")
        if "rest" not in bone:
            raise ValueError(f"bone '{name}': rest is missing")
        names.append(name)
        parents.append(parent)
        rests.append(_matrix(bone["rest"], f"bone '{name}': rest"))
        lengths.append(_number(bone.get("length"), f"bone '{name}': length"))
    skeleton = Skeleton(names, parents, rests, lengths)

    n = len(skeleton)
    rotations = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
    locations = np.zeros((n, 3))
    stiffness = np.zeros(n)
    kusudamas = {}
    for bone in bones:
        name = bone["name"]
        i = skeleton.index[name]
        if "rotation" in bone:
            q = _vector(bone["rotation"], 4, f"bone '{name}': rotation")
            if np.linalg.norm(q) < 1e-9:
                raise ValueError(f"bone '{name}': rotation is a zero quaternion")
            rotations[i] = q / np.linalg.norm(q)
        if "location" in bone:
            locations[i] = _vector(bone["location"], 3, f"bone '{name}': location")
        if "stiffness" in bone:
            stiffness[i] = _number(bone["stiffness"], f"bone '{name}': stiffness")
            if not 0.0 <= stiffness[i] <= 1.0:
                raise ValueError(f"bone '{name}': stiffness must lie in [0, 1], got {stiffness[i]}")
        if bone.get("limits") is not None:
            kusudamas[i] = Kusudama.from_dict(bone["limits"], bone=name)
    limits = JointLimits(kusudamas, n) if kusudamas else None

    pins = []
    raw_pins = doc.get("pins", [])
    if not isinstance(raw_pins, list):
        raise ValueError("pins: expected a list")
    for i, raw in enumerate(raw_pins):
        if not isinstance(raw, dict) or not isinstance(raw.get("bone"), str):
            raise ValueError(f"pins[{i}].bone: expected a bone name")
        label = f"pin '{raw['bone']}'"
        _no_unknown_keys(raw, _PIN_KEYS, label)
        if raw["bone"] not in skeleton.index:
            raise ValueError(f"{label}: bone '{raw['bone']}' is not in the scene")
        if "target" not in raw:
            raise ValueError(f"{label}: target is missing")
        pins.append(
            Pin(
                bone=raw["bone"],
                target=_matrix(raw["target"], f"{label}: target"),
                weight=_number(raw.get("weight", 1.0), f"{label}: weight"),
                orientation_weights=tuple(
                    _vector(raw.get("orientation_weights", [1.0, 1.0, 1.0]), 3, f"{label}: orientation_weights")
                ),
                falloff=_number(raw.get("falloff", 0.0), f"{label}: falloff"),
            )
        )
    return Scene(skeleton, pins, rotations, locations, stiffness, limits, _settings(doc.get("settings", {})))


def solve_scene(doc):
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
    )
    return pose_document(scene, result)


def pose_document(scene, result):
    """The pose document of a solve: every bone's local pose plus statistics."""
    names = scene.skeleton.names
    return {
        "format": "ewbik-pose",
        "version": 1,
        "bones": {
            name: {"rotation": result.rotations[i].tolist(), "location": result.locations[i].tolist()}
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


def _settings(raw):
    if not isinstance(raw, dict):
        raise ValueError("settings: expected an object")
    _no_unknown_keys(raw, _SETTING_KEYS, "settings")
    values = {}
    for key in ("iterations", "stabilization_passes", "acceleration"):
        if key in raw:
            v = raw[key]
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError(f"settings: {key} must be a whole number, got {v!r}")
            values[key] = v
    for key in ("tolerance", "dampening", "relaxation"):
        if key in raw:
            values[key] = _number(raw[key], f"settings: {key}")
    if raw.get("time_budget_ms") is not None:
        values["time_budget_ms"] = _number(raw["time_budget_ms"], "settings: time_budget_ms")
    for key in ("translate_root", "exact", "analytic_limbs"):
        if key in raw:
            if not isinstance(raw[key], bool):
                raise ValueError(f"settings: {key} must be true or false, got {raw[key]!r}")
            values[key] = raw[key]
    return SolverSettings(**values)


def _no_unknown_keys(obj, allowed, label):
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise ValueError(f"{label}: unknown field '{unknown[0]}'")


def _number(value, field):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{field} must be a finite number, got {value!r}")
    return float(value)


def _vector(value, size, field):
    if not isinstance(value, (list, tuple)) or len(value) != size:
        raise ValueError(f"{field} must be a list of {size} numbers")
    return np.array([_number(v, field) for v in value])


def _matrix(value, field):
    if not isinstance(value, (list, tuple)) or len(value) != 4:
        raise ValueError(f"{field} must be a 4x4 matrix (4 rows of 4 numbers)")
    return np.array([_vector(row, 4, field) for row in value])
