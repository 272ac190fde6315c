"""The BVH loader against plain BVH maths done independently (scipy rotations, 4x4 matrices)."""

import os

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from tests.support.mocap import CLIPS, effector_targets, forward_kinematics, load_bvh


def plain_bvh_positions(path, frames):
    """World joint positions in BVH space: G_j = G_parent * T(offset) * R(channels in file order)."""
    with open(path) as f:
        text = f.read()
    header, motion = text.split("MOTION")
    names, parents, offsets, channels, stack = [], [], [], [], []
    in_end = False
    for line in header.splitlines():
        words = line.split()
        if not words:
            continue
        if words[0] in ("ROOT", "JOINT"):
            names.append(words[1])
            parents.append(stack[-1] if stack else -1)
        elif words[0] == "End":
            in_end = True
        elif words[0] == "{":
            stack.append(None if in_end else len(names) - 1)
        elif words[0] == "}":
            in_end = stack.pop() is None and False
        elif words[0] == "OFFSET" and not in_end:
            offsets.append(np.array(words[1:4], dtype=float))
        elif words[0] == "CHANNELS":
            channels.append(words[2:])
    rows = [r for r in motion.splitlines()[3:] if r.strip()]
    result = []
    for frame in frames:
        values = np.array(rows[frame].split(), dtype=float)
        column, world = 0, []
        for j in range(len(names)):
            ch = channels[j]
            vals = values[column : column + len(ch)]
            column += len(ch)
            rot_axes = "".join(c[0] for c in ch if c.endswith("rotation"))
            angles = [v for c, v in zip(ch, vals) if c.endswith("rotation")]
            m = np.eye(4)
            m[:3, :3] = Rotation.from_euler(rot_axes.upper(), angles, degrees=True).as_matrix()
            m[:3, 3] = offsets[j] + np.array([dict(zip(ch, vals)).get(a + "position", 0.0) for a in "XYZ"])
            world.append(m if parents[j] < 0 else world[parents[j]] @ m)
        result.append(np.array([w[:3, 3] for w in world]))
    return names, np.array(result)


@pytest.fixture(scope="module", params=CLIPS, ids=os.path.basename)
def clip(request):
    return request.param, load_bvh(request.param)


def test_joint_positions_match_plain_bvh_maths(clip):
    path, mocap = clip
    frames = list(range(0, len(mocap.rotations), 97))
    names, bvh = plain_bvh_positions(path, frames)
    assert names == mocap.names
    to_blender = np.array([[1, 0, 0], [0, 0, -1], [0, 1, 0]], dtype=float)
    expected = bvh @ to_blender.T * mocap.scale
    for k, frame in enumerate(frames):
        pose = forward_kinematics(mocap, frame)
        np.testing.assert_allclose(pose[:, :3, 3], expected[k], atol=1e-9)
        tails = (
            pose[:, :3, :3]
            @ np.array([0.0, 1.0, 0.0])
            * np.array([b["length"] for b in mocap.bones])[:, None]
        )
        tails += pose[:, :3, 3]
        for j, bone in enumerate(mocap.bones):
            kids = [c for c, b in enumerate(mocap.bones) if b["parent"] == bone["name"]]
            heads = [c for c in kids if np.linalg.norm(expected[k][c] - expected[k][j]) > 1e-9]
            if len(kids) == 1 and heads:
                np.testing.assert_allclose(tails[j], expected[k][kids[0]], atol=1e-9)


def test_rest_skeleton_conventions(clip):
    _, mocap = clip
    rest = np.array([b["rest"] for b in mocap.bones])
    heads = rest[:, :3, 3]
    lengths = np.array([b["length"] for b in mocap.bones])
    assert np.all(lengths > 1e-3)
    np.testing.assert_allclose(
        rest[:, :3, :3] @ rest[:, :3, :3].transpose(0, 2, 1),
        np.tile(np.eye(3), (len(rest), 1, 1)),
        atol=1e-12,
    )
    tails = heads + rest[:, :3, 1] * lengths[:, None]
    height = np.ptp(np.concatenate((heads, tails))[:, 2])
    assert abs(height - 1.75) < 1e-9
    index = {n: i for i, n in enumerate(mocap.names)}
    assert heads[index["Head"], 2] > heads[index["Hips"], 2] > heads[index["LeftAnkle"], 2]
    assert heads[index["LeftShoulder"], 0] > 0 > heads[index["RightShoulder"], 0]
    assert tails[index["LeftToe"], 1] < heads[index["LeftAnkle"], 1], "faces -Y like Blender rigs"
    np.testing.assert_allclose(np.linalg.norm(mocap.rotations, axis=-1), 1.0, atol=1e-12)
    assert np.all(mocap.locations[:, 1:] == 0.0)
    assert mocap.frame_time == pytest.approx(1 / 120, rel=1e-3)


def test_effector_targets_are_pose_matrices(clip):
    _, mocap = clip
    targets = effector_targets(mocap, 10, ["LeftWrist", "Head"])
    pose = forward_kinematics(mocap, 10)
    np.testing.assert_array_equal(targets["Head"], pose[mocap.names.index("Head")])
    assert set(targets) == {"LeftWrist", "Head"}
