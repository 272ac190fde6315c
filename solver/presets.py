"""Joint-limit presets as data: bone-name roles and anatomical ranges oriented by the body.

The ranges (solver/data/humanoid.json) are written in body terms (flex forward, abduct outward,
twist about the bone) so one table serves every rig. They are turned into cones in each bone's
rest frame using the body frame read from the skeleton itself: up from the hips to the head,
left from the right to the left thigh/shoulder. Bone roll and the armature's up axis therefore
do not matter; the names only decide which table row a bone gets.
"""

import copy
import json
import math
import os
import re

import numpy as np

from .kusudama import Kusudama, LimitCone

_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
_PRESETS = ("humanoid",)
_SIDE_SUFFIX = re.compile(r"^(.*?)[._\- ]([LlRr])((?:\.\d+)?)$")
_SIDE_WORD = re.compile(r"^(Left|Right|left|right|LEFT|RIGHT)[_\- ]?(.+)$")
_SIDE_LETTER = re.compile(r"^([LR])[_ ](.+)$")
_FINGER = re.compile(r"^(?:hand|f)?(thumb|index|middle|ring|pinky|little)"
                     r"(\d+|metacarpal|proximal|intermediate|distal)$")
_BEND_MIN = math.radians(2.0)
_REST_MARGIN = math.radians(1.0)


def _load(name):
    with open(os.path.join(_DATA, name + ".json"), encoding="utf-8") as f:
        return json.load(f)


_NAMES = _load("bone_names")


def available_presets():
    """[(id, label, description)] of the presets shipped in solver/data."""
    out = []
    for preset in _PRESETS:
        data = _load(preset)
        out.append((data["id"], data["label"], data["description"]))
    return out


def _split(name):
    """(core, side, segment) of a bone name: core lower-case without separators, side 'L'/'R'/None."""
    base = name.rsplit(":", 1)[-1]
    for prefix in _NAMES["strip_prefixes"]:
        if base.startswith(prefix):
            base = base[len(prefix):]
    side, segment = None, False
    match = _SIDE_SUFFIX.match(base)
    if match:
        base, side, segment = match.group(1), match.group(2).upper(), bool(match.group(3))
    else:
        for pattern in (_SIDE_WORD, _SIDE_LETTER):
            match = pattern.match(base)
            if match:
                side, base = match.group(1)[0].upper(), match.group(2)
                break
    core = re.sub(r"[^a-z0-9]", "", base.lower())
    if side is None and core not in _NAMES["centre"] and core[:1] in ("l", "r"):
        if core[1:] in _NAMES["sided"] or _FINGER.match(core[1:]):
            side, core = core[0].upper(), core[1:]
    return core, side, segment


def bone_roles(names):
    """{bone name: role} for the names this module recognises ("upper_arm.L", "spine", ...)."""
    split = {name: _split(name) for name in names}
    sided_cores = {core for core, side, _ in split.values() if side}
    all_cores = {core for core, _, _ in split.values()}
    rule = _NAMES["shoulder_is_upper_arm"]
    shoulder_is_upper_arm = (any(c in sided_cores for c in rule["when_present"])
                             and not any(c in sided_cores for c in rule["unless_present"]))
    rigify_root = _NAMES["rigify_root"]
    has_metacarpal = any(c.endswith("metacarpal") for c in all_cores)
    roles = {}
    for name, (core, side, segment) in split.items():
        role = None
        if side is None:
            role = _NAMES["centre"].get(core)
            if core == rigify_root["name"] and rigify_root["when_present"] in all_cores:
                role = rigify_root["role"]
        else:
            finger = _FINGER.match(core)
            if finger:
                role = _finger_role(finger.group(1), finger.group(2), has_metacarpal)
            elif re.fullmatch(r"palm\d*", core):
                role = "palm"
            else:
                role = _NAMES["sided"].get(core)
                if core == "shoulder" and shoulder_is_upper_arm:
                    role = "upper_arm"
                if segment:
                    role = _NAMES["segments"].get(role)
        if role is not None:
            roles[name] = role if side is None else f"{role}.{side}"
    return roles


def _finger_role(finger, segment, has_metacarpal):
    if segment.isdigit():
        number = int(segment)
    elif segment == "proximal" and finger == "thumb" and has_metacarpal:
        number = 2
    else:
        number = _NAMES["finger_segments"][segment]
    if not 1 <= number <= 3:
        return None
    return f"thumb_{number}" if finger == "thumb" else f"finger_{number}"


def _unit(v, fallback):
    n = float(np.linalg.norm(v))
    return v / n if n > 1e-9 else np.asarray(fallback, dtype=float)


def _orthogonal(v, axis, fallback):
    """v made perpendicular to the unit `axis`; `fallback` (also made perpendicular) if v || axis."""
    out = v - np.dot(v, axis) * axis
    if np.linalg.norm(out) < 1e-6:
        out = fallback - np.dot(fallback, axis) * axis
    return _unit(out, _any_perpendicular(axis))


def _any_perpendicular(axis):
    other = np.array([1.0, 0.0, 0.0]) if abs(axis[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    return _unit(np.cross(axis, other), [0.0, 0.0, 1.0])


class _Rig:
    """Rest directions and body frame of a skeleton given as scene-document bone dicts."""

    def __init__(self, bones, roles):
        self.bones = {b["name"]: b for b in bones}
        self.roles = roles
        self.rotation = {}
        self.head = {}
        for b in bones:
            m = np.asarray(b["rest"], dtype=float)
            basis = m[:3, :3] / np.linalg.norm(m[:3, :3], axis=0)
            self.rotation[b["name"]] = basis
            self.head[b["name"]] = m[:3, 3]
        self.by_role = {}
        for name, role in roles.items():
            self.by_role.setdefault(role, name)
        self.up, self.left = self._body_frame()
        self.forward = np.cross(self.left, self.up)

    def direction(self, name):
        return self.rotation[name][:, 1]

    def _position(self, *roles):
        for role in roles:
            if role in self.by_role:
                return self.head[self.by_role[role]]
        return None

    def _body_frame(self):
        bottom = self._position("hips", "spine")
        thighs = [self._position(f"thigh.{s}") for s in "LR"]
        if all(t is not None for t in thighs):
            bottom = 0.5 * (thighs[0] + thighs[1])
        top = self._position("head", "neck")
        up = np.array([0.0, 0.0, 1.0])
        if bottom is not None and top is not None:
            up = _unit(top - bottom, up)
        across = np.zeros(3)
        for role in ("thigh", "upper_arm", "clavicle", "hand"):
            left, right = self._position(f"{role}.L"), self._position(f"{role}.R")
            if left is not None and right is not None:
                across += _unit(left - right, np.zeros(3))
        left = _orthogonal(across, up, np.array([1.0, 0.0, 0.0]))
        return up, left

    def palm_normal(self, name, side_sign):
        """Palm normal of the hand this bone belongs to: down for a hand held out sideways
        (T/A pose), toward the body for a hand hanging down."""
        hand = self._ancestor_hand(name)
        along = self.direction(hand)
        if abs(float(np.dot(along, self.up))) < 0.7:
            return _orthogonal(-self.up, along, self.forward)
        return _orthogonal(-side_sign * self.left, along, self.forward)

    def _ancestor_hand(self, name):
        current = name
        while current is not None:
            role = self.roles.get(current, "").split(".")[0]
            if role in ("hand", "wrist"):
                return current
            current = self.bones[current]["parent"]
        return name


def _cones_world(rig, name, spec, side_sign):
    parent = rig.bones[name]["parent"]
    own = rig.direction(name)
    parent_dir = rig.direction(parent) if parent in rig.bones else own
    reference = {"own": own, "parent": parent_dir, "down": -rig.up}[spec["reference"]]
    flex = spec["flex"]
    if flex == "forward":
        wanted = rig.forward
    elif flex == "backward":
        wanted = -rig.forward
    elif flex == "up":
        wanted = rig.up
    elif flex == "palm":
        wanted = rig.palm_normal(name, side_sign)
    else:
        default = rig.forward if flex == "bend_forward" else -rig.forward
        bend = own - np.dot(own, reference) * reference
        wanted = bend if np.linalg.norm(bend) > math.sin(_BEND_MIN) else default
    f_axis = _orthogonal(wanted, reference, rig.up)
    l_axis = side_sign * np.cross(f_axis, reference)
    out = []
    for a, b, radius in spec["cones"]:
        a, b = math.radians(a), math.radians(b)
        theta = math.hypot(a, b)
        direction = reference.copy()
        if theta > 0.0:
            direction = math.cos(theta) * reference + math.sin(theta) * (a * f_axis + b * l_axis) / theta
        out.append((_unit(direction, reference), math.radians(radius)))
    return out


def _include_rest(cones):
    """Cone dicts (bone frame) whose region contains the rest direction +Y.

    The rest pose is a pose the character can take; when a rig models a bone slightly off the
    anatomical range (a thumb splayed sideways, a finger curled at rest), the nearest cone grows
    just enough to include it, so applying a preset never snaps the rest pose.
    """
    rest = np.array([0.0, 1.0, 0.0])
    kusudama = Kusudama([LimitCone(d, r) for d, r in cones])
    if not kusudama.allows(rest):
        gaps = [math.acos(max(-1.0, min(1.0, float(d[1])))) - r for d, r in cones]
        nearest = int(np.argmin(gaps))
        direction, radius = cones[nearest]
        cones[nearest] = (direction, radius + gaps[nearest] + _REST_MARGIN)
    return [{"direction": [float(c) for c in d], "radius": float(r)} for d, r in cones]


def preset_limits(bones, preset="humanoid"):
    """{bone name: scene-document limits dict} for the bones whose names the preset recognises.

    `bones`: scene-document bone dicts (name, parent, rest 4x4 row-major armature space, length).
    Root bones get no limits (their rotation is the whole body's).
    """
    if preset not in _PRESETS:
        raise ValueError(f"preset: unknown preset {preset!r} (available: {', '.join(_PRESETS)})")
    table = _load(preset)["roles"]
    names = [b["name"] for b in bones]
    roles = bone_roles(names)
    rig = _Rig(bones, roles)
    limits = {}
    for name, role in roles.items():
        base, _, side = role.partition(".")
        spec = table.get(base)
        if spec is None or rig.bones[name].get("parent") is None:
            continue
        side_sign = -1.0 if side == "R" else 1.0
        local = rig.rotation[name].T
        cones = _include_rest([(local @ d, r) for d, r in _cones_world(rig, name, spec, side_sign)])
        low, high = (math.radians(t) for t in spec["twist"])
        if side == "R":
            low, high = -high, -low
        limits[name] = {"cones": cones, "twist": {"min": low, "max": high}}
    return limits


def apply_limit_preset(scene, preset="humanoid"):
    """A copy of the scene document with preset limits set on the bones it recognises."""
    out = copy.deepcopy(scene)
    limits = preset_limits(out["bones"], preset)
    for bone in out["bones"]:
        if bone["name"] in limits:
            bone["limits"] = limits[bone["name"]]
    return out
