"""Analytic two-bone IK: the sphere-intersection geometry, the bend side, and degenerate input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solver.two_bone import two_bone_ik

coordinates = st.floats(-3, 3, allow_nan=False)
points = st.tuples(coordinates, coordinates, coordinates).map(np.array)
lengths = st.floats(0.05, 2.0)


def perpendicular_part(v, direction):
    d = direction / np.linalg.norm(direction)
    return v - np.dot(v, d) * d


@settings(max_examples=150, deadline=None)
@given(points, points, lengths, lengths, points)
def test_joint_and_end_keep_the_bone_lengths(root, target, r1, r2, bend):
    joint, end = two_bone_ik(root, target, r1, r2, bend)
    assert np.all(np.isfinite(joint)) and np.all(np.isfinite(end))
    assert np.linalg.norm(joint - root) == pytest.approx(r1, abs=1e-9)
    assert np.linalg.norm(end - joint) == pytest.approx(r2, abs=1e-7)
    dist = np.linalg.norm(target - root)
    if abs(r1 - r2) + 1e-9 < dist < r1 + r2 - 1e-9:
        np.testing.assert_allclose(end, target, atol=1e-9)
    elif dist > 1e-9:
        direction = (target - root) / dist
        reach = np.clip(dist, abs(r1 - r2), r1 + r2)
        np.testing.assert_allclose(end, root + reach * direction, atol=1e-9)


@settings(max_examples=150, deadline=None)
@given(points, points, lengths, lengths, points)
def test_joint_bends_toward_the_bend_direction(root, target, r1, r2, bend):
    line = target - root
    dist = np.linalg.norm(line)
    side = perpendicular_part(bend, line) if dist > 1e-6 else bend
    if (
        not (abs(r1 - r2) + 1e-3 < dist < r1 + r2 - 1e-3)
        or np.linalg.norm(side) < 1e-3 * np.linalg.norm(bend)
        or np.linalg.norm(bend) < 1e-6
    ):
        return
    joint, _ = two_bone_ik(root, target, r1, r2, bend)
    offset = perpendicular_part(joint - root, line)
    assert np.dot(offset, side) > 0
    # the joint lies in the plane of the root-target line and the bend direction
    normal = np.cross(line, side)
    assert abs(np.dot(joint - root, normal / np.linalg.norm(normal))) < 1e-9


def test_a_right_angle_elbow():
    """r1 = r2 = 1, target at (sqrt2, 0, 0) from the root: the elbow sits at (sqrt2/2, +-sqrt2/2, 0)."""
    joint, end = two_bone_ik([0, 0, 0], [np.sqrt(2), 0, 0], 1.0, 1.0, [0, 1, 0])
    np.testing.assert_allclose(joint, [np.sqrt(2) / 2, np.sqrt(2) / 2, 0], atol=1e-12)
    np.testing.assert_allclose(end, [np.sqrt(2), 0, 0], atol=1e-12)
    joint, _ = two_bone_ik([0, 0, 0], [np.sqrt(2), 0, 0], 1.0, 1.0, [0, -5, 0])
    np.testing.assert_allclose(joint, [np.sqrt(2) / 2, -np.sqrt(2) / 2, 0], atol=1e-12)


def test_the_notes_formula_for_a_345_triangle():
    """q = p(1/2 + (r1^2 - r2^2) / (2|p|^2)), s = sqrt(r1^2/|q|^2 - 1): joint = q + s |q| side."""
    p = np.array([5.0, 0, 0])
    joint, _ = two_bone_ik([0, 0, 0], p, 4.0, 3.0, [0, 0, 1])
    q = p * (0.5 + 0.5 * (16 - 9) / 25)
    s = np.sqrt(16 / (q @ q) - 1)
    np.testing.assert_allclose(joint, q + s * np.linalg.norm(q) * np.array([0, 0, 1]), atol=1e-12)
    np.testing.assert_allclose(joint, [3.2, 0, 2.4], atol=1e-12)


@pytest.mark.parametrize("target", [(10.0, 0, 0), (0, -7, 0), (3, 4, 12)])
def test_unreachable_targets_straighten_the_limb_toward_them(target):
    root = np.array([0.5, -0.2, 0.1])
    target = np.array(target)
    joint, end = two_bone_ik(root, target, 1.0, 0.7, [0, 0, 1])
    direction = (target - root) / np.linalg.norm(target - root)
    np.testing.assert_allclose(joint, root + direction, atol=1e-9)
    np.testing.assert_allclose(end, root + 1.7 * direction, atol=1e-9)


def test_too_close_targets_fold_the_limb():
    joint, end = two_bone_ik([0, 0, 0], [0.1, 0, 0], 1.0, 0.6, [0, 1, 0])
    np.testing.assert_allclose(joint, [1.0, 0, 0], atol=1e-9)
    np.testing.assert_allclose(end, [0.4, 0, 0], atol=1e-9)


@pytest.mark.parametrize("r1, r2", [(1.0, 1.0), (1.0, 0.6)])
@pytest.mark.parametrize("bend", [(0, 1, 0), (0, 0, 0)])
def test_target_at_the_root_is_finite(r1, r2, bend):
    joint, end = two_bone_ik([1, 2, 3], [1, 2, 3], r1, r2, bend)
    assert np.all(np.isfinite(joint)) and np.all(np.isfinite(end))
    assert np.linalg.norm(joint - [1, 2, 3]) == pytest.approx(r1, abs=1e-9)
    assert np.linalg.norm(end - joint) == pytest.approx(r2, abs=1e-9)


@pytest.mark.parametrize("bend", [(0, 0, 0), (1, 0, 0), (-3, 0, 0)])
def test_zero_or_parallel_bend_direction_is_finite(bend):
    joint, end = two_bone_ik([0, 0, 0], [1.2, 0, 0], 1.0, 0.7, bend)
    assert np.all(np.isfinite(joint))
    np.testing.assert_allclose(end, [1.2, 0, 0], atol=1e-12)
    assert np.linalg.norm(joint) == pytest.approx(1.0, abs=1e-12)
    assert np.linalg.norm(end - joint) == pytest.approx(0.7, abs=1e-12)


def test_batches_match_single_calls():
    rng = np.random.default_rng(4)
    root = rng.normal(size=(20, 3))
    target = root + rng.normal(size=(20, 3))
    r1, r2 = rng.uniform(0.3, 1.2, 20), rng.uniform(0.3, 1.2, 20)
    bend = rng.normal(size=(20, 3))
    bend[3] = 0.0
    target[5] = root[5]
    joints, ends = two_bone_ik(root, target, r1, r2, bend)
    assert joints.shape == ends.shape == (20, 3)
    for i in range(20):
        joint, end = two_bone_ik(root[i], target[i], r1[i], r2[i], bend[i])
        np.testing.assert_allclose(joints[i], joint, atol=1e-12)
        np.testing.assert_allclose(ends[i], end, atol=1e-12)
