"""Joint-limit presets as data: bone-name roles and anatomical ranges oriented by the body.

The ranges (solver/data/humanoid.json) are written in body terms (flex forward, abduct outward,
twist about the bone) so one table serves every rig. They are turned into cones in each bone's
rest frame using the body frame read from the skeleton itself: up from the hips to the head,
left from the right to the left thigh/shoulder. Bone roll and the armature's up axis therefore
do not matter; the names only decide which table row a bone gets.

The body is read from a reference pose: the rest pose, or a standing pose the caller gives
when the rest is not one (LAFAN-style rigs whose rest is a straight line). Directions and
neutrals come from that pose, while the cones stay in each bone's rest frame, so the same
local rotations are judged whichever rest the rig was built with.
"""

import copy
import json
import math
import os
import re
from collections.abc import Mapping

import numpy as np

from . import quat
from .kusudama import Kusudama, LimitCone
from .skeleton import Skeleton

_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
_PRESETS = ("humanoid",)
_SIDE_SUFFIX = re.compile(r"^(.*?)[._\- ]([LlRr])((?:\.\d+)?)$")
_SIDE_WORD = re.compile(r"^(Left|Right|left|right|LEFT|RIGHT)[_\- ]?(.+)$")
_SIDE_LETTER = re.compile(r"^([LRlr])[_ ](.+)$")
_CENTRE_MARK = re.compile(r"^(.+)[._]x$")
_FINGER = re.compile(
    r"^(?:hand|f)?(thumb|index|middle|ring|pinky|little)"
    r"(\d+|metacarpal|proximal|intermediate|distal)$"
)
_BEND_MIN = math.radians(2.0)
_REFERENCE_MARGIN = math.radians(1.0)
_Y = np.array([0.0, 1.0, 0.0])
_STUB_FRACTION = 0.15
_SEPARATION = 0.02
_LEGS_DOWN = 0.5


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
            base = base[len(prefix) :]
    side, segment = None, False
    centre = _CENTRE_MARK.match(base)
    if centre:
        base = centre.group(1)
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
    if (
        side is None
        and core not in _NAMES["centre"]
        and core[:1] in ("l", "r")
        and (core[1:] in _NAMES["sided"] or _FINGER.match(core[1:]))
    ):
        side, core = core[0].upper(), core[1:]
    return core, side, segment


def body_roles():
    """Every role a bone can have ("hips", "upper_arm.L", ...): what a name mapping may assign."""
    centre = sorted(set(_NAMES["centre"].values()))
    sided = sorted({role for role in _load("humanoid")["roles"]} - set(centre))
    return centre + [f"{role}.{side}" for role in sided for side in "LR"]


def bone_roles(names, overrides=None):
    """{bone name: role} for the names this module recognises ("upper_arm.L", "spine", ...).

    overrides: {bone name: role, or "" for none} that the user mapped by hand; they win over the
    names. Raises PresetError (field "overrides.<bone>") for a role `body_roles` does not list.
    """
    roles = _roles_from_names(names)
    known, present = set(body_roles()), set(names)
    for name, role in (overrides or {}).items():
        if role and role not in known:
            raise PresetError(f"overrides.{name}", f"unknown role {role!r}")
        if name not in present:
            continue
        if role:
            roles[name] = role
        else:
            roles.pop(name, None)
    return roles


def _roles_from_names(names):
    split = {name: _split(name) for name in names}
    sided_cores = {core for core, side, _ in split.values() if side}
    all_cores = {core for core, _, _ in split.values()}
    rule = _NAMES["shoulder_is_upper_arm"]
    shoulder_is_upper_arm = any(c in sided_cores for c in rule["when_present"]) and not any(
        c in sided_cores for c in rule["unless_present"]
    )
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


def has_humanoid_limbs(names, overrides=None):
    """True when both legs (thigh and shin) or both arms (upper arm and forearm) are recognised:
    enough of a body for the humanoid preset to be worth applying unasked."""
    found = set(bone_roles(names, overrides).values())
    return any(
        all(f"{role}.{side}" in found for role in limb for side in "LR")
        for limb in (("thigh", "shin"), ("upper_arm", "forearm"))
    )


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


class PresetError(ValueError):
    """A preset cannot be fitted to these bones or this pose; `field` names the input at fault
    ("preset", "rest", "pose" or "pose.<bone>"), `message` says what is wrong with it and `why`
    is the short reason a reference pose cannot be read."""

    def __init__(self, field, message, why=None):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
        self.why = why or message


def _unreadable(field, why):
    pose = "the rest pose" if field == "rest" else "the given pose"
    return PresetError(
        field,
        f"{pose} cannot be read as a standing body ({why}); pass a standing "
        "pose (limbs not folded) to read the body from",
        why,
    )


class _Rig:
    """Body frame, bone axes and reference frames of a skeleton in its reference pose.

    The reference pose is the rest pose or a given standing pose. Directions are read from it,
    while limits are expressed in each bone's rest frame: `frame[name]` is the armature-space
    rotation the bone would have with an identity local rotation and its parent as posed, so a
    world direction d is the local swing direction frame.T @ d.
    """

    def __init__(self, bones, roles, table, pose=None):
        self.bones = {b["name"]: b for b in bones}
        self.roles = roles
        skeleton = Skeleton(
            [b["name"] for b in bones],
            [b.get("parent") for b in bones],
            [b["rest"] for b in bones],
            [b["length"] for b in bones],
        )
        local = _pose_arrays(skeleton, pose)
        world, heads = skeleton.forward(*local)
        world = quat.to_matrix(world)
        frames = world @ np.swapaxes(quat.to_matrix(local[0]), -1, -2)
        self.order = skeleton.names
        self.rotation = dict(zip(self.order, world))
        self.frame = dict(zip(self.order, frames))
        self.reference = dict(zip(self.order, local[0]))
        self.head = dict(zip(self.order, heads))
        self.length = dict(zip(self.order, skeleton.lengths))
        self.by_role = {}
        for name, role in roles.items():
            self.by_role.setdefault(role, name)
        self.up, self.left = self._body_frame("rest" if pose is None else "pose")
        self.forward = np.cross(self.left, self.up)
        self.axis, self.reversed = self._axes(table)

    def direction(self, name):
        return self.rotation[name][:, 1]

    def _position(self, *roles):
        for role in roles:
            if role in self.by_role:
                return self.head[self.by_role[role]]
        return None

    def _body_frame(self, field):
        """(up, left) read from where the body parts are; PresetError when they do not tell."""
        bottom = self._position("hips", "spine")
        thighs = [self._position(f"thigh.{s}") for s in "LR"]
        if all(t is not None for t in thighs):
            bottom = 0.5 * (thighs[0] + thighs[1])
        top = self._position("head", "neck")
        extent = float(np.ptp(np.array(list(self.head.values())), axis=0).max())
        up = np.array([0.0, 0.0, 1.0])
        if bottom is not None and top is not None:
            if np.linalg.norm(top - bottom) <= _SEPARATION * extent:
                raise _unreadable(field, "the head is not above the hips")
            up = _unit(top - bottom, up)
            self._check_legs_hang(up, field)
        across, pairs = np.zeros(3), 0
        for role in ("thigh", "upper_arm", "clavicle", "hand"):
            left, right = self._position(f"{role}.L"), self._position(f"{role}.R")
            if left is not None and right is not None:
                offset = left - right
                across += offset - np.dot(offset, up) * up
                pairs += 1
        if pairs and np.linalg.norm(across) <= _SEPARATION * extent * pairs:
            raise _unreadable(field, "the left and right sides are not apart across the body")
        left = _orthogonal(across, up, np.array([1.0, 0.0, 0.0]))
        return up, left

    def _check_legs_hang(self, up, field):
        for side in "LR":
            hip, ankle = self._position(f"thigh.{side}"), self._position(f"foot.{side}", f"shin.{side}")
            if hip is None or ankle is None or np.linalg.norm(ankle - hip) < 1e-9:
                continue
            if np.dot(_unit(ankle - hip, up), up) > -_LEGS_DOWN:
                raise _unreadable(field, "the legs do not hang below the hips")

    def _axes(self, table):
        """{name: world axis of the body segment}, {name: True where the bone points against it}.

        A bone's tail says where its segment points, except for stubs much shorter than their
        parent (a wrist or chest joint given a token tail) and for bones of a continuing chain
        that point back against it (a wrist stub aimed up the forearm): those follow their
        parent's axis, so the limits rest on how the bone turns, not on its tail.
        """
        axis, reversed_, reach = {}, {}, {}
        for name in self.order:
            own = self.direction(name)
            parent = self.bones[name].get("parent")
            axis[name], reversed_[name], reach[name] = own, False, self.length[name]
            if parent is None:
                continue
            spec = table.get(self.roles.get(name, "").partition(".")[0])
            reference = None if spec is None else spec["reference"]
            if reach[name] < _STUB_FRACTION * reach[parent] and reference != "down":
                axis[name], reach[name] = axis[parent], reach[parent]
            elif reference == "parent" and np.dot(own, axis[parent]) < 0.0:
                axis[name] = -own
            reversed_[name] = bool(np.dot(own, axis[name]) < 0.0)
        return axis, reversed_

    def to_local(self, name, directions):
        """World directions of the bone's segment axis -> swing directions of its rest frame.

        Where the tail is not the axis, the axis' directions are carried onto the tail by the
        turn between them in the reference pose (point-reflected for a reversed bone, which is
        exact when the tail runs straight back along the axis).
        """
        own, axis = self.direction(name), self.axis[name]
        sign = -1.0 if self.reversed[name] else 1.0
        carry = quat.to_matrix(quat.shortest_arc(axis, sign * own)) * sign
        return np.asarray(directions) @ (self.frame[name].T @ carry).T

    def palm_normal(self, name, side_sign):
        """Palm normal of the hand this bone belongs to: down for a hand held out sideways
        (T/A pose), toward the body for a hand hanging down."""
        hand = self._ancestor_hand(name)
        along = self.axis[hand]
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


def _pose_arrays(skeleton, pose):
    """(rotations (N, 4), locations (N, 3)) in skeleton order from a {bone: {rotation, location}}."""
    n = len(skeleton.names)
    rotations, locations = np.tile(quat.IDENTITY, (n, 1)), np.zeros((n, 3))
    if pose is not None and not isinstance(pose, Mapping):
        raise PresetError("pose", "must map bone names to {'rotation': [w, x, y, z], 'location': [x, y, z]}")
    for name, entry in (pose or {}).items():
        field = f"pose.{name}"
        if name not in skeleton.index:
            raise PresetError(field, "not a bone of the armature")
        try:
            rotation = np.asarray(entry.get("rotation", quat.IDENTITY), dtype=float)
            location = np.asarray(entry.get("location", (0.0, 0.0, 0.0)), dtype=float)
        except (AttributeError, TypeError, ValueError):
            raise PresetError(field, "needs 'rotation' [w, x, y, z] and 'location' [x, y, z]") from None
        if (
            rotation.shape != (4,)
            or location.shape != (3,)
            or not (np.isfinite(rotation).all() and np.isfinite(location).all())
        ):
            raise PresetError(field, "needs finite 'rotation' [w, x, y, z] and 'location' [x, y, z]")
        if np.linalg.norm(rotation) < 1e-9:
            raise PresetError(f"{field}.rotation", "is a zero quaternion")
        rotations[skeleton.index[name]] = rotation / np.linalg.norm(rotation)
        locations[skeleton.index[name]] = location
    return rotations, locations


def _cones_world(rig, name, spec, side_sign):
    parent = rig.bones[name]["parent"]
    own = rig.axis[name]
    parent_dir = rig.axis[parent] if parent in rig.bones else own
    level = _orthogonal(own, rig.up, rig.forward)
    reference = {"own": own, "parent": parent_dir, "down": -rig.up, "level": level}[spec["reference"]]
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


def _include_reference(cones, reference):
    """(cone dicts in the bone frame whose region contains the reference pose's swing direction,
    the Kusudama of those cones).

    The reference pose (rest, or the standing pose the body was read from) is a pose the
    character can take; when a rig models a bone slightly off the anatomical range (a thumb
    splayed sideways, a finger curled at rest), the nearest cone grows just enough to include
    it, so applying a preset never snaps that pose.
    """
    kusudama = Kusudama([LimitCone(d, r) for d, r in cones])
    if not kusudama.allows(reference):
        gaps = [math.acos(max(-1.0, min(1.0, float(np.dot(d, reference))))) - r for d, r in cones]
        nearest = int(np.argmin(gaps))
        direction, radius = cones[nearest]
        cones[nearest] = (direction, radius + gaps[nearest] + _REFERENCE_MARGIN)
        kusudama = Kusudama([LimitCone(d, r) for d, r in cones])
    return [{"direction": [float(c) for c in d], "radius": float(r)} for d, r in cones], kusudama


def _twist_range(centre, reference, low, high):
    """[min, max] twist centred like the table's range on the reference pose's own twist.

    The kusudama measures twist against a frame turned from +Y to its region's `centre`; the
    reference rotation's twist in that frame is where the table's zero belongs. The middle is
    kept within [-pi, pi], so the bounds stay within [-2 pi, 2 pi].
    """
    in_frame = quat.multiply(quat.conjugate(quat.shortest_arc(_Y, centre)), reference)
    _, _, offset = quat.swing_twist(in_frame)
    middle = float(offset) + 0.5 * (low + high)
    middle = (middle + math.pi) % (2.0 * math.pi) - math.pi
    return {"min": middle - 0.5 * (high - low), "max": middle + 0.5 * (high - low)}


def preset_limits(bones, preset="humanoid", pose=None, overrides=None):
    """{bone name: scene-document limits dict} for the bones whose names the preset recognises.

    `bones`: scene-document bone dicts (name, parent, rest 4x4 row-major armature space, length).
    `pose`: optional {bone name: {"rotation": [w, x, y, z], "location": [x, y, z]}}, local to
    rest as in scene documents, in which the body stands (limbs not folded). The body frame,
    bone directions and each joint's neutral are read from it, else from the rest pose; the
    limits are in each bone's rest frame either way, and allow that reference pose.
    `overrides`: {bone name: role or ""} as for `bone_roles` (a user's mapping; "" leaves a
    bone out, e.g. a deform bone that constraints move).
    Root bones get no limits (their rotation is the whole body's). Raises PresetError (field
    "rest" or "pose") when the reference pose does not show a standing body.
    """
    if preset not in _PRESETS:
        raise PresetError("preset", f"unknown preset {preset!r} (available: {', '.join(_PRESETS)})")
    table = _load(preset)["roles"]
    roles = bone_roles([b["name"] for b in bones], overrides)
    rig = _Rig(bones, roles, table, pose)
    limits = {}
    for name, role in roles.items():
        base, _, side = role.partition(".")
        spec = table.get(base)
        if spec is None or rig.bones[name].get("parent") is None:
            continue
        side_sign = -1.0 if side == "R" else 1.0
        world = _cones_world(rig, name, spec, side_sign)
        local = rig.to_local(name, np.array([d for d, _ in world]))
        reference = rig.reference[name]
        cones, kusudama = _include_reference(
            [(d / np.linalg.norm(d), r) for d, (_, r) in zip(local, world)], quat.rotate(reference, _Y)
        )
        low, high = (math.radians(t) for t in spec["twist"])
        if side == "R":
            low, high = -high, -low
        if rig.reversed[name]:
            low, high = -high, -low
        limits[name] = {"cones": cones, "twist": _twist_range(kusudama.centre, reference, low, high)}
    return limits


def preset_stiffness(bones, preset="humanoid", overrides=None):
    """{bone name: stiffness} for the recognised bones whose role the preset makes stiff.

    Stiffness is not a limit: it shapes how the solver shares a move between bones (a
    clavicle barely moves while the arm reaches), so the preset sets it beside the limits.
    """
    if preset not in _PRESETS:
        raise PresetError("preset", f"unknown preset {preset!r} (available: {', '.join(_PRESETS)})")
    table = _load(preset)["roles"]
    parents = {b["name"]: b.get("parent") for b in bones}
    out = {}
    for name, role in bone_roles(list(parents), overrides).items():
        spec = table.get(role.partition(".")[0])
        if spec is not None and "stiffness" in spec and parents[name] is not None:
            out[name] = float(spec["stiffness"])
    return out


def apply_limit_preset(scene, preset="humanoid", pose=None, overrides=None):
    """A copy of the scene document with preset limits (and stiffness) on the bones it recognises.

    `pose` and `overrides` as for `preset_limits`; the scene's own bone rotations are not used.
    """
    out = copy.deepcopy(scene)
    limits = preset_limits(out["bones"], preset, pose, overrides)
    stiffness = preset_stiffness(out["bones"], preset, overrides)
    for bone in out["bones"]:
        if bone["name"] in limits:
            bone["limits"] = limits[bone["name"]]
        if bone["name"] in stiffness:
            bone["stiffness"] = stiffness[bone["name"]]
    return out
