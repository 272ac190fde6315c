"""Joint-limit presets as data: bone-name roles and anatomical ranges oriented by the body.

The ranges (solver/data/humanoid.json) are a person's whole active range of motion
(docs/limits/humanoid.md gives the clinical tables), written in body terms (flex forward, abduct
outward, twist about the bone from the joint's anatomical zero) so one table serves every rig.
They are turned into cones in each bone's rest frame using the body frame read from the
skeleton itself: up from the hips to the head, left from the right to the left thigh/shoulder. Bone roll and the armature's up axis therefore
do not matter; the names only decide which table row a bone gets.

The body is read from a reference pose: the rest pose, or a standing pose the caller gives
when the rest is not one (LAFAN-style rigs whose rest is a straight line). Directions and
neutrals come from that pose, while the cones stay in each bone's rest frame, so the same
local rotations are judged whichever rest the rig was built with.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import os
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from . import quat
from .errors import EwbikError
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


@functools.cache
def _load(name: str) -> dict[str, Any]:
    """A data file, read once (shared: callers never change it)."""
    with open(os.path.join(_DATA, name + ".json"), encoding="utf-8") as f:
        return json.load(f)


_NAMES = _load("bone_names")


def available_presets() -> list[tuple[str, str, str]]:
    """[(id, label, description)] of the presets shipped in solver/data."""
    out = []
    for preset in _PRESETS:
        data = _load(preset)
        out.append((data["id"], data["label"], data["description"]))
    return out


@functools.lru_cache(maxsize=4096)
def _split(name: str) -> tuple[str, str | None, bool]:
    """(core, side, segment) of a bone name: core lower-case without separators, side 'L'/'R'/None.
    A namespace before ':' (an FBX or Mixamo rig's) or '/' (an armature's place in a crowd) is
    not part of the name."""
    base = re.split("[:/]", name)[-1]
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


@functools.cache
def body_roles() -> tuple[str, ...]:
    """Every role a bone can have ("hips", "upper_arm.L", ...): what a name mapping may assign."""
    centre = sorted(set(_NAMES["centre"].values()))
    sided = sorted({role for role in _load("humanoid")["roles"]} - set(centre))
    return tuple(centre + [f"{role}.{side}" for role in sided for side in "LR"])


def bone_roles(names: Iterable[str], overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """{bone name: role} for the names this module recognises ("upper_arm.L", "spine", ...).

    overrides: {bone name: role, or "" for none} that the user mapped by hand; they win over the
    names. Raises PresetError (field "overrides.<bone>") for a role `body_roles` does not list.
    """
    names = tuple(names)
    roles = dict(_roles_from_names(names))
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


@functools.lru_cache(maxsize=16)
def _roles_from_names(names: tuple[str, ...]) -> dict[str, str]:
    """{name: role} of a rig's bone names (a tuple); kept for the last rigs asked about, since
    applying a preset asks several times (shared: callers copy before changing it)."""
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


def has_humanoid_limbs(names: Iterable[str], overrides: Mapping[str, str] | None = None) -> bool:
    """True when both legs (thigh and shin) or both arms (upper arm and forearm) are recognised:
    enough of a body for the humanoid preset to be worth applying unasked."""
    found = set(bone_roles(names, overrides).values())
    return any(
        all(f"{role}.{side}" in found for role in limb for side in "LR")
        for limb in (("thigh", "shin"), ("upper_arm", "forearm"))
    )


def _finger_role(finger: str, segment: str, has_metacarpal: bool) -> str | None:
    if segment.isdigit():
        number = int(segment)
    elif segment == "proximal" and finger == "thumb" and has_metacarpal:
        number = 2
    else:
        number = _NAMES["finger_segments"][segment]
    if not 1 <= number <= 3:
        return None
    return f"thumb_{number}" if finger == "thumb" else f"finger_{number}"


def _units(v: np.ndarray, fallback: ArrayLike) -> np.ndarray:
    """Rows of v made unit; `fallback` rows (as given) where a row has no length."""
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return np.where(n > 1e-9, v / np.where(n > 1e-9, n, 1.0), fallback)


def _orthogonals(v: np.ndarray, axis: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """Rows of v made perpendicular to the unit rows of `axis`, unit; `fallback` (also made
    perpendicular) where v is parallel to its axis."""
    out = v - _dots(v, axis) * axis
    out = np.where(
        np.linalg.norm(out, axis=-1, keepdims=True) < 1e-6, fallback - _dots(fallback, axis) * axis, out
    )
    return _units(out, _any_perpendiculars(axis))


def _any_perpendiculars(axis: np.ndarray) -> np.ndarray:
    other = np.where(np.abs(axis[..., :1]) < 0.9, [1.0, 0.0, 0.0], [0.0, 1.0, 0.0])
    return _units(np.cross(axis, other), [0.0, 0.0, 1.0])


def _dots(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=-1, keepdims=True)


def _unit(v: ArrayLike, fallback: ArrayLike) -> np.ndarray:
    return _units(np.asarray(v, dtype=float)[None], np.asarray(fallback, dtype=float))[0]


def _orthogonal(v: ArrayLike, axis: np.ndarray, fallback: ArrayLike) -> np.ndarray:
    return _orthogonals(
        np.asarray(v, dtype=float)[None], axis[None], np.asarray(fallback, dtype=float)[None]
    )[0]


class PresetError(EwbikError):
    """A preset cannot be fitted to these bones or this pose; `field` names the input at fault
    ("preset", "rest", "pose" or "pose.<bone>"), `reason` says what is wrong with it and `why`
    is the short reason a reference pose cannot be read."""

    def __init__(self, field: str, reason: str, why: str | None = None) -> None:
        super().__init__(field, reason)
        self.why = why or reason


def _unreadable(field: str, why: str) -> PresetError:
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
    while limits are expressed in each bone's rest frame: `frames[i]` is the armature-space
    rotation bone i would have with an identity local rotation and its parent as posed, so a
    world direction d is the local swing direction frames[i].T @ d.
    """

    def __init__(
        self,
        bones: Sequence[Mapping[str, Any]],
        roles: Mapping[str, str],
        table: Mapping[str, Any],
        pose: Mapping[str, Any] | None = None,
    ) -> None:
        self.parent: dict[str, str | None] = {b["name"]: b.get("parent") for b in bones}
        self.roles = roles
        self.table = table
        skeleton = Skeleton(
            [b["name"] for b in bones],
            [b.get("parent") for b in bones],
            _rest_matrices(bones),
            [b["length"] for b in bones],
        )
        self.index = skeleton.index
        rotations, locations = _pose_arrays(skeleton, pose)
        world, self.heads = skeleton.forward(rotations, locations)
        self.world = quat.to_matrix(world)
        self.frames = self.world @ np.swapaxes(quat.to_matrix(rotations), -1, -2)
        self.reference = rotations
        self.lengths = skeleton.lengths
        self.by_role: dict[str, str] = {}
        for name, role in roles.items():
            self.by_role.setdefault(role, name)
        self.up, self.left = self._body_frame("rest" if pose is None else "pose")
        self.forward = np.cross(self.left, self.up)
        self._segments: dict[str, tuple[np.ndarray, float, bool]] = {}

    def direction(self, name: str) -> np.ndarray:
        return self.world[self.index[name]][:, 1]

    def _position(self, *roles: str) -> np.ndarray | None:
        for role in roles:
            if role in self.by_role:
                return self.heads[self.index[self.by_role[role]]]
        return None

    def _body_frame(self, field: str) -> tuple[np.ndarray, np.ndarray]:
        """(up, left) read from where the body parts are; PresetError when they do not tell."""
        bottom = self._position("hips", "spine")
        left_thigh, right_thigh = (self._position(f"thigh.{s}") for s in "LR")
        if left_thigh is not None and right_thigh is not None:
            bottom = 0.5 * (left_thigh + right_thigh)
        top = self._position("head", "neck")
        extent = float(np.ptp(self.heads, axis=0).max())
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

    def _check_legs_hang(self, up: np.ndarray, field: str) -> None:
        for side in "LR":
            hip, ankle = self._position(f"thigh.{side}"), self._position(f"foot.{side}", f"shin.{side}")
            if hip is None or ankle is None or np.linalg.norm(ankle - hip) < 1e-9:
                continue
            if np.dot(_unit(ankle - hip, up), up) > -_LEGS_DOWN:
                raise _unreadable(field, "the legs do not hang below the hips")

    def segment(self, name: str) -> tuple[np.ndarray, float, bool]:
        """(world axis of the bone's body segment, its reach, True where the bone points against it).

        A bone's tail says where its segment points, except for stubs much shorter than their
        parent (a wrist or chest joint given a token tail) and for bones of a continuing chain
        that point back against it (a wrist stub aimed up the forearm): those follow their
        parent's axis, so the limits rest on how the bone turns, not on its tail. Worked out
        for the bones asked about and their ancestors only (a rig's props and cloth never are).
        """
        chain = [name]
        while (parent := self.parent[chain[-1]]) is not None and parent not in self._segments:
            chain.append(parent)
        for bone in reversed(chain):
            if bone not in self._segments:
                self._segments[bone] = self._segment_of(bone)
        return self._segments[name]

    def _segment_of(self, name: str) -> tuple[np.ndarray, float, bool]:
        own, length = self.direction(name), self.lengths[self.index[name]]
        parent = self.parent[name]
        if parent is None:
            return own, length, False
        parent_axis, parent_reach, _ = self._segments[parent]
        spec = self.table.get(self.roles.get(name, "").partition(".")[0])
        reference = None if spec is None else spec["reference"]
        axis, reach = own, length
        if reach < _STUB_FRACTION * parent_reach and reference != "down":
            axis, reach = parent_axis, parent_reach
        elif reference == "parent" and np.dot(own, parent_axis) < 0.0:
            axis = -own
        return axis, reach, bool(np.dot(own, axis) < 0.0)

    def below_roll(self, name: str, roll_roles: Collection[str]) -> bool:
        """True when a bone with one of `roll_roles` lies between this bone and its forearm."""
        current = self.parent[name]
        while current is not None and self.roles.get(current, "").partition(".")[0] != "forearm":
            if self.roles.get(current, "").partition(".")[0] in roll_roles:
                return True
            current = self.parent[current]
        return False

    def hand_axis(self, name: str) -> np.ndarray:
        """The segment axis of the hand this bone belongs to (the bone's own without one)."""
        current: str | None = name
        while current is not None:
            if self.roles.get(current, "").split(".")[0] in ("hand", "wrist"):
                return self.segment(current)[0]
            current = self.parent[current]
        return self.segment(name)[0]


def _rest_matrices(bones: Sequence[Mapping[str, Any]]) -> np.ndarray | list[Any]:
    """The bones' rest matrices as one (N, 4, 4) array when they are numbers (the Skeleton's quick
    path); as given otherwise, so the Skeleton names the bad one."""
    rest = [b["rest"] for b in bones]
    try:
        array = np.array(rest)
    except (TypeError, ValueError):
        return rest
    return array if array.dtype.kind in "fiu" else rest


def _pose_arrays(skeleton: Skeleton, pose: Mapping[str, Any] | None) -> tuple[np.ndarray, np.ndarray]:
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


def _placements(rig: _Rig, placed: Sequence[tuple[str, Mapping[str, Any], float]]) -> np.ndarray:
    """(k, 3, 3) orthogonal matrices taking each placed bone's cones from the role's own frame
    (`_role_cones`: reference +Y, flex +Z, L +X) into the bone's rest frame, for (name, spec,
    side sign) rows; one batch for the whole body.

    The reference P, flex F and L = side * (F x P) axes are read in world space from the reference
    pose, then turned into the bone's rest frame; where the segment axis is not the tail, the
    turn between them in the reference pose carries it onto the tail (point-reflected for a
    reversed bone, which is exact when the tail runs straight back along the axis).
    """
    names = [name for name, _, _ in placed]
    own = np.array([rig.segment(name)[0] for name in names])
    parent_axes = []
    for name in names:
        parent_name = rig.parent[name]
        assert parent_name is not None  # `preset_limits` places no root bone
        parent_axes.append(rig.segment(parent_name)[0])
    parent = np.array(parent_axes)
    side = np.array([[sign] for _, _, sign in placed])
    up, forward = np.broadcast_to(rig.up, own.shape), np.broadcast_to(rig.forward, own.shape)
    choices = {"own": own, "parent": parent, "down": -up, "level": _orthogonals(own, up, forward)}
    reference = np.array([choices[spec["reference"]][k] for k, (_, spec, _) in enumerate(placed)])
    bend = own - _dots(own, reference) * reference
    bent = np.linalg.norm(bend, axis=-1, keepdims=True) > math.sin(_BEND_MIN)
    along = np.array([rig.hand_axis(name) for name in names])
    flat = np.abs(_dots(along, up)) < 0.7
    palm = np.where(flat, _orthogonals(-up, along, forward), _orthogonals(-side * rig.left, along, forward))
    choices = {
        "forward": forward,
        "backward": -forward,
        "up": up,
        "palm": palm,
        "bend_forward": np.where(bent, bend, forward),
        "bend_backward": np.where(bent, bend, -forward),
    }
    wanted = np.array([choices[spec["flex"]][k] for k, (_, spec, _) in enumerate(placed)])
    f_axis = _orthogonals(wanted, reference, up)
    world = np.stack((side * np.cross(f_axis, reference), reference, f_axis), axis=-1)
    tail = np.array([rig.direction(name) for name in names])
    sign = np.array([[-1.0 if rig.segment(name)[2] else 1.0] for name in names])
    carry = quat.to_matrix(quat.shortest_arc(own, sign * tail)) * sign[:, :, None]
    frames = rig.frames[[rig.index[name] for name in names]]
    return np.swapaxes(frames, -1, -2) @ carry @ world


@functools.cache
def _role(preset: str, base: str) -> dict[str, Any]:
    """A role's row of the preset, with the cones, twist and range of its region merged in for
    the roles that share one (the spine's bones share the trunk's and the neck's)."""
    data = _load(preset)
    spec = data["roles"][base]
    return spec if "region" not in spec else {**data["regions"][spec["region"]], **spec}


def _shares(preset: str, bases: Sequence[str]) -> list[float]:
    """Per placed bone the part of its region's range it may take (1 for a joint of its own).

    A region's range is the whole spine's (or neck's); each of the rig's n bones in it takes
    `spread` / n of it, at most all: rigs and captures bend the spine unevenly (a capture's
    lumbar bone takes 35 of the trunk's 80 degrees of flexion while the chest bones take 15),
    so a bone may take more than an even share, while the region stays a person's.
    """
    regions = [_role(preset, base).get("region") for base in bases]
    counts = {region: regions.count(region) for region in set(regions)}
    return [
        1.0 if region is None else min(1.0, _role(preset, base)["spread"] / counts[region])
        for base, region in zip(bases, regions)
    ]


@functools.cache
def _role_cones(preset: str, base: str, share: float = 1.0) -> tuple[np.ndarray, np.ndarray, Kusudama]:
    """(unit directions (k, 3), radii (k,), Kusudama) of a role's cones in the role's own frame
    (the reference direction +Y, the flex direction +Z, L +X), scaled by the bone's share of its
    region. The same for every rig, so they are built once; `_placements` turns them into each
    bone's rest frame."""
    direction_rows, radius_rows = [], []
    for a, b, radius in _role(preset, base)["cones"]:
        a, b = math.radians(a * share), math.radians(b * share)
        theta = math.hypot(a, b)
        scale = math.sin(theta) / theta if theta > 0.0 else 0.0
        direction_rows.append((b * scale, math.cos(theta), a * scale))
        radius_rows.append(math.radians(radius * share))
    directions, radii = _units(np.array(direction_rows), _Y), np.array(radius_rows)
    return directions, radii, _kusudama(directions, radii)


def _kusudama(directions: np.ndarray, radii: np.ndarray) -> Kusudama:
    return Kusudama([LimitCone(tuple(d), float(r)) for d, r in zip(directions, radii)])


def _region_centres(
    preset: str, kinds: Sequence[tuple[str, float]], reference: np.ndarray
) -> tuple[np.ndarray, list[np.ndarray]]:
    """(centres of the regions that hold each bone's reference swing direction, the radii of its
    cones), in the roles' own frames (k, 3), (k, cones); `kinds`: (role, share) per bone.

    The reference pose (rest, or the standing pose the body was read from) is a pose the
    character can take; when a rig models a bone slightly off the anatomical range (a thumb
    splayed sideways, a finger curled at rest), the nearest cone grows just enough to include
    it, so applying a preset never snaps that pose.
    """
    centres, radii = np.empty_like(reference), {}
    for kind in set(kinds):
        rows = [k for k, other in enumerate(kinds) if other == kind]
        directions, kind_radii, kusudama = _role_cones(preset, *kind)
        inside = kusudama.allows(reference[rows])
        for k, allowed in zip(rows, inside):
            radii[k], centres[k] = kind_radii, kusudama.centre
            if allowed:
                continue
            gaps = np.arccos(np.clip(directions @ reference[k], -1.0, 1.0)) - kind_radii
            nearest = int(np.argmin(gaps))
            grown = kind_radii.copy()
            grown[nearest] += gaps[nearest] + _REFERENCE_MARGIN
            radii[k], centres[k] = grown, _kusudama(directions, grown).centre
    return centres, [radii[k] for k in range(len(kinds))]


def _twists(
    preset: str, rig: _Rig, placed: Sequence[tuple[str, str, float]], shares: Sequence[float]
) -> np.ndarray:
    """(k, 2) radians: each placed bone's twist range in the table's terms (the right side and
    reversed bones mirrored, a shared region's scaled), before `_twist_ranges` places it.

    The forearm's roll (pronation) is the twist of the bone between the forearm and the hand
    that carries it (a forearm twist bone, CMU's wrist), else the hand's own: capture, BVH and
    Mixamo rigs store it on the hand. A hand below such a bone gets `twist_below_roll`.
    """
    out = []
    for (name, base, sign), share in zip(placed, shares):
        spec = _role(preset, base)
        low, high = spec["twist"]
        if "twist_below_roll" in spec and rig.below_roll(name, _load(preset)["roll_roles"]):
            low, high = spec["twist_below_roll"]
        if (sign < 0.0) != rig.segment(name)[2]:
            low, high = -high, -low
        out.append((low * share, high * share))
    return np.radians(out)


def _twist_ranges(
    centres: np.ndarray, zeros: np.ndarray, reference: np.ndarray, low: np.ndarray, high: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(min, max) twists centred like the table's ranges on the anatomical zeros' twists.

    The kusudama measures twist against a frame turned from +Y to its region's `centre`. The
    table's zero is the joint's anatomical zero: the reference pose swung, by the shortest arc,
    to the role's reference direction `zeros` (an arm held out in a T pose, lowered to hang:
    the goniometer's zero for the shoulder's rotation). Its twist in that frame is where the
    table's zero belongs. The middle is kept within [-pi, pi], so the bounds stay within
    [-2 pi, 2 pi].
    """
    zero = quat.multiply(quat.shortest_arc(quat.rotate(reference, _Y), zeros), reference)
    in_frame = quat.multiply(quat.conjugate(quat.shortest_arc(_Y, centres)), zero)
    _, _, offset = quat.swing_twist(in_frame)
    middle = offset + 0.5 * (low + high)
    middle = (middle + math.pi) % (2.0 * math.pi) - math.pi
    return middle - 0.5 * (high - low), middle + 0.5 * (high - low)


def preset_limits(
    bones: Sequence[Mapping[str, Any]],
    preset: str = "humanoid",
    pose: Mapping[str, Any] | None = None,
    overrides: Mapping[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
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
    table = _roles_table(preset)
    roles = bone_roles([b["name"] for b in bones], overrides)
    rig = _Rig(bones, roles, table, pose)
    placed = [
        (name, role.partition(".")[0], -1.0 if role.endswith(".R") else 1.0)
        for name, role in roles.items()
        if role.partition(".")[0] in table and rig.parent[name] is not None
    ]
    if not placed:
        return {}
    shares = _shares(preset, [base for _, base, _ in placed])
    kinds = [(base, share) for (_, base, _), share in zip(placed, shares)]
    to_bone = _placements(rig, [(name, table[base], sign) for name, base, sign in placed])
    reference = rig.reference[[rig.index[name] for name, _, _ in placed]]
    swing = np.einsum("kji,kj->ki", to_bone, quat.rotate(reference, _Y))
    centres, radii = _region_centres(preset, kinds, swing)
    twist = _twists(preset, rig, placed, shares)
    twist_min, twist_max = _twist_ranges(
        np.einsum("kij,kj->ki", to_bone, centres), to_bone[:, :, 1], reference, *twist.T
    )
    limits = {}
    for k, (name, _, _) in enumerate(placed):
        directions = _units(_role_cones(preset, *kinds[k])[0] @ to_bone[k].T, _Y)
        limits[name] = {
            "cones": [{"direction": d, "radius": r} for d, r in zip(directions.tolist(), radii[k].tolist())],
            "twist": {"min": float(twist_min[k]), "max": float(twist_max[k])},
        }
    return limits


def _roles_table(preset: str) -> dict[str, Any]:
    """The preset's role table; PresetError (field "preset") for a preset that is not shipped."""
    if preset not in _PRESETS:
        raise PresetError("preset", f"unknown preset {preset!r} (available: {', '.join(_PRESETS)})")
    return _load(preset)["roles"]


def preset_stiffness(
    bones: Sequence[Mapping[str, Any]], preset: str = "humanoid", overrides: Mapping[str, str] | None = None
) -> dict[str, float]:
    """{bone name: stiffness} for the recognised bones whose role the preset makes stiff.

    Stiffness is not a limit: it shapes how the solver shares a move between bones (a
    clavicle barely moves while the arm reaches), so the preset sets it beside the limits.
    """
    table = _roles_table(preset)
    parents = {b["name"]: b.get("parent") for b in bones}
    out = {}
    for name, role in bone_roles(list(parents), overrides).items():
        spec = table.get(role.partition(".")[0])
        if spec is not None and "stiffness" in spec and parents[name] is not None:
            out[name] = float(spec["stiffness"])
    return out


def apply_limit_preset(
    scene: dict[str, Any],
    preset: str = "humanoid",
    pose: Mapping[str, Any] | None = None,
    overrides: Mapping[str, str] | None = None,
) -> dict[str, Any]:
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
