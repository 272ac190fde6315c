"""The naturalness measures (tests/support/natural_measures.py, read by bench/bench_natural.py) on
explicit poses with known answers."""

import numpy as np
import pytest

from tests.support import natural_measures as natural
from tests.support.mocap import CLIPS
from tests.support.mocap_frames import EFFECTORS, load_clip

LIMB = np.array([[0, 1, 2]])


def limb(bend_deg, normal_sign=1.0):
    """Heads (1, 3, 3) of a limb from the origin along +X, bent by `bend_deg` toward +Y (or -Y)."""
    angle = np.radians(bend_deg)
    end = np.array([1.0 + np.cos(angle), normal_sign * np.sin(angle), 0.0])
    return np.array([[[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], end]])


@pytest.fixture(scope="module")
def clip():
    return load_clip(CLIPS[0], 64)


def test_free_joints_are_the_unpinned_bones_between_hips_and_pins(clip):
    body = natural.body_of(clip.skeleton)
    free = {body.joints[k] for k in body.free}
    assert free == {
        "LeftHip",
        "LeftKnee",
        "RightHip",
        "RightKnee",
        "Chest",
        "Chest2",
        "lowerneck",
        "Neck",
        "LeftCollar",
        "LeftShoulder",
        "LeftElbow",
        "LeftWrist",
        "RightCollar",
        "RightShoulder",
        "RightElbow",
        "RightWrist",
    }
    bends = {tuple(body.joints[k] for k in row) for row in body.bends}
    assert bends == {
        ("LeftShoulder", "LeftElbow", "LeftWrist"),
        ("RightShoulder", "RightElbow", "RightWrist"),
        ("LeftHip", "LeftKnee", "LeftAnkle"),
        ("RightHip", "RightKnee", "RightAnkle"),
    }


def test_bend_planes_give_the_bend_angle():
    assert natural.bend_planes(limb(37.0), LIMB)[1][0, 0] == pytest.approx(37.0)


@pytest.mark.parametrize(
    "solved, captured, expected",
    [
        (limb(60.0), limb(60.0), (0, 1)),
        (limb(60.0, -1.0), limb(60.0), (1, 1)),
        (limb(30.0, -1.0), limb(80.0), (1, 1)),
        (limb(5.0, -1.0), limb(60.0), (0, 0)),
        (limb(60.0, -1.0), limb(5.0), (0, 0)),
    ],
)
def test_wrong_way_frames_count_flipped_bend_planes_of_bent_limbs(solved, captured, expected):
    assert natural.wrong_way_frames(solved, captured, LIMB) == expected


def test_second_differences_vanish_for_steady_motion_and_measure_a_zigzag():
    t = np.arange(6, dtype=float)[:, None, None]
    steady = np.concatenate([t, 2 * t, 0 * t], axis=2)
    assert np.allclose(natural.second_differences(steady), 0.0)
    zigzag = steady + np.array([0.0, 0.0, 1.0]) * (np.arange(6) % 2)[:, None, None]
    assert np.allclose(natural.second_differences(zigzag), 2.0)


def test_the_captured_motion_measures_as_perfectly_natural(clip):
    body = natural.body_of(clip.skeleton)
    truth = natural.captured_heads(clip, body)
    zeros = np.zeros((len(truth), len(EFFECTORS)))
    m = natural.measure([natural.Solved(truth, truth, zeros, zeros, np.ones(len(truth)))], body)
    assert (m.free_mm, m.flip_share, m.jitter_mm) == (0.0, 0.0, 0.0)
    assert m.flip_frames > 0


def test_a_mirrored_elbow_is_measured_as_distance_and_a_flip(clip):
    body = natural.body_of(clip.skeleton)
    truth = natural.captured_heads(clip, body)[:3]
    shoulder, elbow, wrist = body.bends[0]
    heads = truth.copy()
    axis = (truth[:, wrist] - truth[:, shoulder]) / np.linalg.norm(
        truth[:, wrist] - truth[:, shoulder], axis=-1, keepdims=True
    )
    offset = truth[:, elbow] - truth[:, shoulder]
    along = np.sum(offset * axis, axis=-1, keepdims=True) * axis
    heads[:, elbow] = truth[:, shoulder] + 2 * along - offset
    zeros = np.zeros((3, len(EFFECTORS)))
    m = natural.measure([natural.Solved(heads, truth, zeros, zeros, np.ones(3))], body)
    moved = np.linalg.norm(heads[:, elbow] - truth[:, elbow], axis=-1)
    assert m.free_mm == pytest.approx(1e3 * moved.sum() / (3 * len(body.free)))
    bent = natural.bend_planes(truth, body.bends[:1])[1][:, 0] >= natural.BEND_MIN_DEG
    assert bent.any()
    assert m.flip_share * m.flip_frames == pytest.approx(bent.sum())
