"""ewbik_addon/com/rotation_channels.py: which channel a bone's rotation mode keys, and every
bone's channels as quaternions in one conversion, against mathutils' own."""

import math

import numpy as np
import pytest
from mathutils import Euler, Quaternion

from tests.support.blender_helpers import addon_module

ORDERS = ("XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")


@pytest.fixture
def rotation_channels():
    return addon_module("ewbik_addon.com.rotation_channels")


def same_rotation(a, b):
    return np.abs(np.sum(np.asarray(a) * np.asarray(b), axis=-1))


def test_each_mode_keys_its_own_channel(rotation_channels):
    assert rotation_channels.rotation_channel("QUATERNION") == "rotation_quaternion"
    assert rotation_channels.rotation_channel("AXIS_ANGLE") == "rotation_axis_angle"
    for order in ORDERS:
        assert rotation_channels.rotation_channel(order) == "rotation_euler"


def test_every_mode_converts_as_mathutils_does_over_frames(rotation_channels):
    rng = np.random.default_rng(3)
    modes = ["QUATERNION", "AXIS_ANGLE", *ORDERS]
    frames, n = 4, len(modes)
    quaternion = rng.normal(size=(frames, n, 4))
    quaternion /= np.linalg.norm(quaternion, axis=-1, keepdims=True)
    euler = rng.uniform(-math.pi, math.pi, size=(frames, n, 3))
    axis_angle = np.concatenate([rng.uniform(-3.0, 3.0, (frames, n, 1)), rng.normal(size=(frames, n, 3))], -1)
    axis_angle[..., 1:] /= np.linalg.norm(axis_angle[..., 1:], axis=-1, keepdims=True)
    got = rotation_channels.channels_to_quaternions(modes, quaternion, euler, axis_angle)
    assert got.shape == (frames, n, 4)
    for f in range(frames):
        expected = [quaternion[f, 0], Quaternion(axis_angle[f, 1, 1:], axis_angle[f, 1, 0])]
        expected += [Euler(euler[f, k], order).to_quaternion() for k, order in enumerate(ORDERS, start=2)]
        np.testing.assert_allclose(same_rotation(got[f], expected), 1.0, atol=1e-6)


def test_only_a_bones_own_channels_are_read(rotation_channels):
    nan3, nan4 = np.full((2, 3), np.nan), np.full((2, 4), np.nan)
    quaternion = np.array([[1.0, 0.0, 0.0, 0.0], [np.nan] * 4])
    euler = np.array([[np.nan] * 3, [0.0, 0.0, math.pi / 2]])
    got = rotation_channels.channels_to_quaternions(["QUATERNION", "ZYX"], quaternion, euler, nan4)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got[1], Euler((0.0, 0.0, math.pi / 2), "ZYX").to_quaternion(), atol=1e-7)
    unnormalized = rotation_channels.channels_to_quaternions(
        ["QUATERNION"], [[2.0, 0.0, 0.0, 0.0]], nan3[:1], nan4[:1]
    )
    np.testing.assert_array_equal(unnormalized, [[2.0, 0.0, 0.0, 0.0]])
