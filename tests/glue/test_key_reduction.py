"""ewbik_addon/bake/key_reduction.py without Blender: which keys a bake keeps within a tolerance,
played back here by linear interpolation (the bake asks Blender's F-curves instead) and checked
frame by frame with the solver's forward kinematics."""

import importlib
import math
import pathlib
import subprocess
import sys
import types

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = (
    "ewbik_repository"  # the repository as the package it is inside Blender (relative imports reach solver/)
)


def repository_module(name):
    if PACKAGE not in sys.modules:
        package = types.ModuleType(PACKAGE)
        package.__path__ = [str(REPO)]
        sys.modules[PACKAGE] = package
    return importlib.import_module(f"{PACKAGE}.{name}")


key_reduction = repository_module("ewbik_addon.bake.key_reduction")
quat = repository_module("solver.quat")
Skeleton = repository_module("solver").Skeleton

FRAMES = np.arange(1.0, 41.0)
MAX_ANGLE = math.radians(1.0)
MAX_DISTANCE = 0.001


def linear_player(row, name, kept, values):
    return np.column_stack([np.interp(FRAMES, FRAMES[kept], values[kept, k]) for k in range(values.shape[1])])


def arm():
    """Upper arm and forearm along +Y, 0.3 m each; the forearm pinned."""
    rest = np.tile(np.eye(4), (2, 1, 1))
    rest[1, 1, 3] = 0.3
    return Skeleton(["upper", "fore"], [None, "upper"], rest, [0.3, 0.3])


def swing(angles):
    """(F, 4) continuous quaternions turning about Z by `angles`."""
    return quat.from_axis_angle(np.broadcast_to((0.0, 0.0, 1.0), (len(angles), 3)), angles)


def baked(upper_angles, fore_angles):
    skeleton = arm()
    rotations = np.stack([swing(upper_angles), swing(fore_angles)], axis=1)
    poses = key_reduction.PinnedPoses(
        skeleton=skeleton,
        pinned=np.array([1]),
        rotations=rotations,
        locations=np.zeros((len(FRAMES), 2, 3)),
        scales=None,
    )
    bones = {
        row: key_reduction.BakedBone({"rotation_quaternion": rotations[:, row]}, "QUATERNION", row)
        for row in (0, 1)
    }
    return bones, poses


def played_misses(bones, poses, kept):
    """(largest bone turn in radians, largest pinned head miss) of the kept keys played back."""
    played = {
        row: linear_player(row, "", kept[row], bone.channels["rotation_quaternion"])
        for row, bone in bones.items()
    }
    turns = max(
        key_reduction.rotation_angles(bone.channels["rotation_quaternion"], played[row]).max()
        for row, bone in bones.items()
    )
    rotations = np.stack([played[0], played[1]], axis=1)
    rotations /= np.linalg.norm(rotations, axis=-1, keepdims=True)
    skeleton = poses.skeleton
    misses = [
        np.linalg.norm(
            skeleton.forward(rotations[f], poses.locations[f])[1][1]
            - skeleton.forward(poses.rotations[f], poses.locations[f])[1][1]
        )
        for f in range(len(FRAMES))
    ]
    return turns, max(misses)


def test_a_still_pose_keeps_only_its_first_and_last_key():
    bones, poses = baked(np.full(len(FRAMES), 0.4), np.full(len(FRAMES), -0.2))
    kept = key_reduction.reduce_keys(FRAMES, bones, poses, MAX_ANGLE, MAX_DISTANCE, linear_player)
    assert {row: frames.tolist() for row, frames in kept.items()} == {0: [0, 39], 1: [0, 39]}


@pytest.mark.parametrize("max_angle, max_distance", [(MAX_ANGLE, MAX_DISTANCE), (math.radians(5.0), 1.0)])
def test_what_is_kept_plays_within_both_tolerances_on_every_frame(max_angle, max_distance):
    t = (FRAMES - 1.0) / 39.0
    bones, poses = baked(1.2 * np.sin(3.0 * t), 0.8 * t**2 - 0.5)
    kept = key_reduction.reduce_keys(FRAMES, bones, poses, max_angle, max_distance, linear_player)
    turn, miss = played_misses(bones, poses, kept)
    assert turn <= max_angle and miss <= max_distance
    assert all(frames[0] == 0 and frames[-1] == 39 for frames in kept.values())
    assert sum(len(frames) for frames in kept.values()) < 2 * len(FRAMES)


def test_the_pinned_head_asks_for_keys_the_angle_alone_would_not():
    t = (FRAMES - 1.0) / 39.0
    bones, poses = baked(1.2 * np.sin(3.0 * t), 0.8 * t**2 - 0.5)
    by_angle = key_reduction.reduce_keys(FRAMES, bones, poses, MAX_ANGLE, 1.0, linear_player)
    by_both = key_reduction.reduce_keys(FRAMES, bones, poses, MAX_ANGLE, 1e-4, linear_player)
    assert played_misses(bones, poses, by_angle)[1] > 1e-4
    assert sum(map(len, by_both.values())) > sum(map(len, by_angle.values()))


def test_rotations_are_compared_as_angles_whichever_the_sign():
    q = swing(np.array([0.3, 1.0]))
    assert key_reduction.rotation_angles(q, -q) == pytest.approx([0.0, 0.0], abs=1e-6)
    assert key_reduction.rotation_angles(q[:1], q[1:]) == pytest.approx([0.7])


def test_euler_and_axis_angle_channels_turn_as_their_quaternions():
    euler = np.array([[0.3, -0.2, 0.5]])
    from_euler = key_reduction.bone_quaternions("ZXY", {"rotation_euler": euler})
    assert key_reduction.rotation_angles(from_euler, quat.from_euler(euler, "ZXY")) == pytest.approx(
        [0.0], abs=1e-6
    )
    axis_angle = np.array([[0.6, 0.0, 0.0, 2.0]])
    from_axis_angle = key_reduction.bone_quaternions("AXIS_ANGLE", {"rotation_axis_angle": axis_angle})
    assert key_reduction.rotation_angles(from_axis_angle, swing(np.array([0.6]))) == pytest.approx(
        [0.0], abs=1e-6
    )


def test_loads_neither_bpy_nor_mathutils():
    check = (
        f"import sys, types; p = types.ModuleType({PACKAGE!r}); p.__path__ = [{str(REPO)!r}]; "
        f"sys.modules[{PACKAGE!r}] = p; import {PACKAGE}.ewbik_addon.bake.key_reduction; "
        "print(sorted({'bpy', 'mathutils'} & set(sys.modules)))"
    )
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]", result.stdout + result.stderr
