"""The humanoid preset's clinical ranges of motion as local rotations of a rig's bones.

Each role of solver/data/humanoid.json that has a `range` (the active range of motion the tables
in docs/LIMITS.md give) is moved the way a goniometer measures it: from the anatomical zero,
flexion/extension and abduction/adduction turn the segment in their planes, axial rotation turns
it about its own axis there. The rigs these tests use stand with Z up and face -Y, the
character's left on +X (the synthetic test rigs, the Rigify metarig, CMU clips as tests/support/mocap.py
loads them), so the body's directions are known here without reading them from the rig.

Anatomical zero: a hanging limb ("down"), the straight joint ("parent": the parent's direction),
or the rig's own standing pose ("own", and "level" for feet and toes: a standing rig's foot is
flat). Flexion moves the segment toward the role's flex direction (forward, backward, up, or the
palm), abduction toward L = side * (F x zero) (outward for a hanging limb, toward the thumb for
the hand and fingers, up for a clavicle, to the right for the spine), and positive axial rotation
turns the front of a left limb inward (pronation for the hand, eversion for the foot), mirrored on
the right. A region shared by several bones (the spine's trunk and neck) is swept evenly split
over the rig's bones in it.
"""

import json
import pathlib

import numpy as np

from solver import quat
from solver.presets import bone_roles

TABLE = json.loads((pathlib.Path(__file__).resolve().parents[2] / "solver/data/humanoid.json").read_text())
UP, FORWARD = np.array([0.0, 0.0, 1.0]), np.array([0.0, -1.0, 0.0])
STEPS = 13  # angles per motion, ends included


def role_spec(base):
    """A role's row with its region's cones, twist and range merged in (the spine's roles)."""
    spec = TABLE["roles"][base]
    return spec if "region" not in spec else {**TABLE["regions"][spec["region"]], **spec}


def _unit(v):
    return v / np.linalg.norm(v)


def _across(v, axis):
    """v made perpendicular to the unit axis, unit."""
    return _unit(v - np.dot(v, axis) * axis)


class Body:
    """A rig's bones in the rest pose, with each recognised bone's role and side."""

    def __init__(self, bones):
        self.bones = {b["name"]: b for b in bones}
        self.roles = bone_roles(list(self.bones))
        self.rest = {n: np.array(b["rest"], dtype=float) for n, b in self.bones.items()}

    def direction(self, name):
        return self.rest[name][:3, 1]

    def base(self, name):
        return self.roles[name].partition(".")[0]

    def side(self, name):
        return -1.0 if self.roles[name].endswith(".R") else 1.0

    def sharing(self, name):
        """How many of the rig's bones share this bone's region (1 for a joint of its own)."""
        region = role_spec(self.base(name)).get("region")
        if region is None:
            return 1
        return sum(
            1
            for other in self.roles
            if self.bones[other].get("parent") is not None
            and self.base(other) in TABLE["roles"]
            and role_spec(self.base(other)).get("region") == region
        )

    def palm(self, name):
        """The palm's normal: down for a hand held out (T or A pose), inward for a hanging one."""
        hand = name
        while hand is not None and self.roles.get(hand, "").partition(".")[0] not in ("hand", "wrist"):
            hand = self.bones[hand].get("parent")
        along = self.direction(hand if hand is not None else name)
        facing = -UP if abs(np.dot(along, UP)) < 0.7 else np.array([-self.side(name), 0.0, 0.0])
        return _across(facing, along)

    def carries_roll(self, name):
        """False for a hand below a bone that carries the forearm's roll (CMU's wrist, a twist bone)."""
        parent = self.bones[name].get("parent")
        while parent is not None and self.roles.get(parent, "").partition(".")[0] != "forearm":
            if self.roles.get(parent, "").partition(".")[0] in TABLE["roll_roles"]:
                return False
            parent = self.bones[parent].get("parent")
        return True

    def axes(self, name):
        """(anatomical zero, flexion direction, abduction direction) of the bone's segment."""
        spec = TABLE["roles"][self.base(name)]
        parent = self.bones[name].get("parent")
        zero = {
            "down": -UP,
            "parent": self.direction(parent),
            "own": self.direction(name),
            "level": self.direction(name),
        }[spec["reference"]]
        flex = {
            "forward": FORWARD,
            "bend_forward": FORWARD,
            "backward": -FORWARD,
            "bend_backward": -FORWARD,
            "up": UP,
            "palm": self.palm(name),
        }[spec["flex"]]
        flex = _across(flex, zero)
        return zero, flex, self.side(name) * np.cross(flex, zero)

    def motions(self, name):
        """{motion: (angles (k,) radians, local rotations (k, 4))} of the bone through its role's
        clinical range, its parent at rest."""
        spec = role_spec(self.base(name))["range"]
        zero, flex, abduct = self.axes(name)
        world = quat.from_matrix(self.rest[name][:3, :3])
        to_zero = quat.shortest_arc(self.direction(name), zero)
        axes = {
            "flex": np.cross(zero, flex),
            "abduct": np.cross(zero, abduct),
            "twist": self.side(name) * zero,
        }
        share = 1.0 / self.sharing(name)
        out = {}
        for motion, axis in axes.items():
            low, high = spec.get(motion, (0.0, 0.0))
            if motion == "twist" and self.base(name) == "hand" and not self.carries_roll(name):
                low, high = 0.0, 0.0  # the roll bone above turns the hand
            angles = np.radians(np.linspace(low, high, STEPS)) * share
            turn = quat.from_axis_angle(np.broadcast_to(_unit(axis), (STEPS, 3)), angles)
            if motion == "twist":
                turn = quat.multiply(self._measured_at(spec, axes), turn)
            rotations = quat.multiply(
                quat.multiply(quat.conjugate(world), quat.multiply(turn, to_zero)), world
            )
            out[motion] = (angles, quat.normalize(rotations))
        return out

    @staticmethod
    def _measured_at(spec, axes):
        """The turn from the anatomical zero to where the tables measure axial rotation: the
        shoulder's at 90 degrees of abduction, the hip's at 90 degrees of flexion (Norkin & White)."""
        turn = quat.IDENTITY
        for motion, degrees in spec.get("twist_at", {}).items():
            turn = quat.multiply(quat.from_axis_angle(_unit(axes[motion]), np.radians(degrees)), turn)
        return turn

    def swept(self):
        """The bones the clinical sweeps move: recognised, not roots, their role with a range."""
        return [
            name
            for name in self.roles
            if self.bones[name].get("parent") is not None
            and self.base(name) in TABLE["roles"]
            and "range" in role_spec(self.base(name))
        ]
