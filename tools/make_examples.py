"""Write the example scene documents in examples/ (run from anywhere: `python tools/make_examples.py`).

The scenes are built from head/tail positions like an armature in Blender's edit mode, so they
stay readable and reproducible; tests/solver/test_scene.py checks the files match this script.

- whole_chain_reference.json: the whole-chain reference case (root + b1..b3 along +Y,
  root pinned in place, b3 pinned at (1.2, 2.5, 0.7), 5 degrees dampening, 15 iterations).
- humanoid_reach.json: a 21-bone humanoid (Blender axes: Z up, facing -Y), hands and feet pinned
  where they rest, the left hand's target moved forward and up.
- two_arms.json: a torso with two arms, both hands pinned with new positions and orientations.
"""

import json
import math
import pathlib
import sys

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from solver.scene import scene_bone, scene_document  # noqa: E402

EXAMPLES = REPO / "examples"
DIGITS = 10


def rest_matrix(head, tail):
    """Armature-space rest matrix of a bone from head to tail with zero roll (Y = head -> tail)."""
    head = np.asarray(head, dtype=float)
    y = np.asarray(tail, dtype=float) - head
    y /= np.linalg.norm(y)
    up = np.array([0.0, 0.0, 1.0]) if abs(y[2]) < 0.9 else np.array([0.0, -1.0, 0.0])
    x = np.cross(y, up)
    x /= np.linalg.norm(x)
    z = np.cross(x, y)
    m = np.eye(4)
    m[:3, 0], m[:3, 1], m[:3, 2], m[:3, 3] = x, y, z, head
    return m


def axis_angle_matrix(axis, angle):
    """3x3 rotation by `angle` radians about `axis` (Rodrigues)."""
    k = np.asarray(axis, dtype=float)
    k /= np.linalg.norm(k)
    cross = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + math.sin(angle) * cross + (1 - math.cos(angle)) * cross @ cross


def as_list(m):
    return [[round(float(v), DIGITS) for v in row] for row in m]


def bone(name, parent, head, tail):
    length = float(np.linalg.norm(np.subtract(tail, head)))
    return scene_bone(name, parent, as_list(rest_matrix(head, tail)), round(length, DIGITS))


def pin_at(bones, name, offset=(0.0, 0.0, 0.0), turn=None, **extra):
    """A pin on `name` at its rest matrix, moved by `offset` and turned by the 3x3 `turn`."""
    rest = np.array(next(b["rest"] for b in bones if b["name"] == name))
    target = rest.copy()
    if turn is not None:
        target[:3, :3] = turn @ rest[:3, :3]
    target[:3, 3] += offset
    return {"bone": name, "target": as_list(target), **extra}


def whole_chain_reference():
    bones = [bone("root", None, (0, 0, 0), (0, 1, 0))]
    for i in range(1, 4):
        bones.append(bone(f"b{i}", bones[-1]["name"], (0, i, 0), (0, i + 1, 0)))
    pins = [
        pin_at(bones, "root"),
        {
            "bone": "b3",
            "target": as_list(np.eye(4) + np.pad(np.array([[1.2], [2.5], [0.7]]), ((0, 1), (3, 0)))),
            "orientation_weights": [1, 1, 1],
        },
    ]
    settings = {
        "iterations": 15,
        "tolerance": 0.0,
        "dampening": round(math.radians(5), DIGITS),
        "stabilization_passes": 1,
        "translate_root": False,
    }
    return scene_document(bones, pins, settings)


def humanoid_bones():
    """Hips at 1 m, spine x3, neck, head, shoulders, arms, legs, feet: 21 bones."""
    b = [
        bone("hips", None, (0, 0, 1.0), (0, 0, 1.12)),
        bone("spine", "hips", (0, 0, 1.12), (0, 0, 1.25)),
        bone("spine.001", "spine", (0, 0, 1.25), (0, 0, 1.38)),
        bone("spine.002", "spine.001", (0, 0, 1.38), (0, 0, 1.5)),
        bone("neck", "spine.002", (0, 0, 1.5), (0, -0.01, 1.6)),
        bone("head", "neck", (0, -0.01, 1.6), (0, -0.01, 1.8)),
    ]
    for side, sx in (("L", 1.0), ("R", -1.0)):
        b += [
            bone(f"shoulder.{side}", "spine.002", (sx * 0.02, -0.02, 1.45), (sx * 0.17, 0.0, 1.47)),
            bone(f"upper_arm.{side}", f"shoulder.{side}", (sx * 0.18, 0.0, 1.46), (sx * 0.45, 0.02, 1.45)),
            bone(f"forearm.{side}", f"upper_arm.{side}", (sx * 0.45, 0.02, 1.45), (sx * 0.70, 0.0, 1.44)),
            bone(f"hand.{side}", f"forearm.{side}", (sx * 0.70, 0.0, 1.44), (sx * 0.80, 0.0, 1.44)),
            bone(f"thigh.{side}", "hips", (sx * 0.1, 0.0, 1.0), (sx * 0.1, -0.02, 0.55)),
            bone(f"shin.{side}", f"thigh.{side}", (sx * 0.1, -0.02, 0.55), (sx * 0.1, 0.02, 0.1)),
            bone(f"foot.{side}", f"shin.{side}", (sx * 0.1, 0.02, 0.1), (sx * 0.1, -0.12, 0.02)),
        ]
    return b


def humanoid_reach():
    bones = humanoid_bones()
    pins = [
        pin_at(bones, "hand.L", offset=(-0.1, -0.3, 0.15)),
        pin_at(bones, "hand.R"),
        pin_at(bones, "foot.L"),
        pin_at(bones, "foot.R"),
    ]
    settings = {
        "iterations": 60,
        "tolerance": 1e-4,
        "dampening": 0.0873,
        "stabilization_passes": 1,
        "translate_root": False,
    }
    return scene_document(bones, pins, settings)


def two_arms():
    bones = [
        b for b in humanoid_bones() if not b["name"].startswith(("thigh", "shin", "foot", "neck", "head"))
    ]
    for b in bones:
        if b["name"].startswith("spine"):
            b["stiffness"] = 0.5
    pins = [
        pin_at(bones, "hand.L", offset=(-0.15, -0.25, -0.2), turn=axis_angle_matrix((0, 1, 0), 0.6)),
        pin_at(
            bones,
            "hand.R",
            offset=(0.2, -0.2, 0.1),
            turn=axis_angle_matrix((1, 0, 0), -0.4),
            weight=2.0,
            orientation_weights=[0.5, 1.0, 0.5],
        ),
    ]
    settings = {
        "iterations": 40,
        "tolerance": 1e-4,
        "dampening": 0.0873,
        "stabilization_passes": 1,
        "translate_root": False,
    }
    return scene_document(bones, pins, settings)


SCENES = {
    "whole_chain_reference.json": whole_chain_reference,
    "humanoid_reach.json": humanoid_reach,
    "two_arms.json": two_arms,
}


def main():
    EXAMPLES.mkdir(exist_ok=True)
    for filename, build in SCENES.items():
        path = EXAMPLES / filename
        path.write_text(json.dumps(build(), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
