"""Soft reach: a limb straightens only asymptotically, so a target moving steadily through full
reach bends the elbow at a bounded rate, and pins short of the soft zone stay exact.

The elbow angle is measured from the joints of `pose_matrices` (4x4 products), independently of
the solver's forward kinematics.
"""

import numpy as np
import pytest

from solver import SceneError
from solver.pins import Pin
from solver.reach import soft_distance
from solver.settings import SolverSettings
from solver.solve import solve
from tests.solver.conftest import identity_pose, pose_matrices, translation

NAMES = ["body", "upper", "lower", "hand"]
PARENTS = [None, "body", "upper", "lower"]
HEADS = np.array([(0.0, 0.0, 0.0), (0.0, 0.5, 0.0), (0.0, 1.0, 0.05), (0.0, 1.5, 0.0)])  # a slight rest bend
LENGTH = np.linalg.norm(HEADS[2] - HEADS[1]) + np.linalg.norm(HEADS[3] - HEADS[2])
WAY = np.array([0.0, 1.0, 0.3]) / np.linalg.norm([0.0, 1.0, 0.3])
FRAMES = np.linspace(0.85, 1.15, 81) * LENGTH  # the hand's target from the shoulder, at constant speed


def arm():
    from solver import Skeleton

    return Skeleton(NAMES, PARENTS, [translation(h) for h in HEADS], [0.5, 0.5, 0.5, 0.2])


def sweep(soft):
    """(elbow angles in degrees, hand position errors) with the body pinned and the hand's target
    at each of `FRAMES` along `WAY`, every frame solved from the rest pose."""
    skeleton = arm()
    rotations, locations = identity_pose(len(skeleton))
    angles, errors = [], []
    for distance in FRAMES:
        pins = [
            Pin("body", translation(HEADS[0])),
            Pin("hand", translation(HEADS[1] + distance * WAY), orientation_weights=(0.0, 0.0, 0.0)),
        ]
        result = solve(skeleton, pins, rotations, locations, SolverSettings(soft_reach=soft))
        pose = pose_matrices(NAMES, PARENTS, skeleton.rest, result.rotations, result.locations)
        joints = [pose[skeleton.index[b]][:3, 3] for b in NAMES[1:]]
        upper, lower = joints[1] - joints[0], joints[2] - joints[1]
        cosine = upper @ lower / (np.linalg.norm(upper) * np.linalg.norm(lower))
        angles.append(np.degrees(np.arccos(np.clip(cosine, -1.0, 1.0))))
        hand = joints[2]
        assert result.position_errors[1] == pytest.approx(
            np.linalg.norm(hand - pins[1].target_position), abs=1e-9
        )
        errors.append(result.position_errors[1])
    return np.array(angles), np.array(errors)


def test_without_soft_reach_the_elbow_pops_straight():
    changes = np.abs(np.diff(sweep(0.0)[0]))
    assert changes.max() > 8.0 * changes.mean()


@pytest.mark.parametrize("soft", [0.02, 0.05])
def test_soft_reach_bounds_the_elbow_rate_and_keeps_pins_short_of_the_zone_exact(soft):
    angles, errors = sweep(soft)
    changes = np.abs(np.diff(angles))
    assert changes.max() < 3.0 * changes.mean()
    zone_start = (1.0 - soft) * LENGTH
    short = np.less_equal(FRAMES, zone_start)
    assert errors[short].max() < 1e-6
    assert (angles > 0.0).all()  # never quite straight
    within = ~short & (FRAMES <= LENGTH)
    expected = FRAMES[within] - [soft_distance(d, LENGTH, soft) for d in FRAMES[within]]
    np.testing.assert_allclose(errors[within], expected, atol=1e-6)  # the pins report their real miss


def test_the_soft_distance_is_continuous_and_stays_short_of_full_reach():
    soft, step = 0.05, 1e-7
    start = (1.0 - soft) * LENGTH
    assert soft_distance(start - step, LENGTH, soft) == pytest.approx(start - step)
    rate = (soft_distance(start + step, LENGTH, soft) - soft_distance(start, LENGTH, soft)) / step
    assert rate == pytest.approx(1.0, abs=1e-5)
    assert soft_distance(1.5 * LENGTH, LENGTH, soft) < LENGTH


def test_a_limb_straight_at_rest_is_not_softened():
    from solver import Skeleton

    heads = [(0.0, 0.0, 0.0), (0.0, 0.5, 0.0), (0.0, 1.0, 0.0), (0.0, 1.5, 0.0)]
    skeleton = Skeleton(NAMES, PARENTS, [translation(h) for h in heads], [0.5] * 4)
    rotations, locations = identity_pose(4)
    pins = [Pin("body", translation(heads[0])), Pin("hand", translation(heads[3]))]
    result = solve(skeleton, pins, rotations, locations, SolverSettings(soft_reach=0.05))
    assert result.position_errors.max() < 1e-9


@pytest.mark.parametrize("value", [-0.01, 0.6, float("nan")])
def test_a_bad_soft_reach_names_the_field(value):
    with pytest.raises(SceneError, match="settings.soft_reach"):
        SolverSettings(soft_reach=value)


def test_the_root_joint_is_where_the_body_takes_it():
    """A hand target beyond the arm's reach from the start's shoulder, reached by turning the
    body: the target is softened from the solved shoulder, so the hand misses by less than the
    soft zone's depth (not by the distance the body had to carry the shoulder)."""
    skeleton = arm()
    rotations, locations = identity_pose(len(skeleton))
    soft = 0.05
    shoulder = HEADS[1]
    target = np.array([0.0, 0.0, 1.48])  # within reach once the body turns up
    assert np.linalg.norm(target - shoulder) > 1.5 * LENGTH
    pins = [Pin("hand", translation(target), orientation_weights=(0.0, 0.0, 0.0))]
    result = solve(skeleton, pins, rotations, locations, SolverSettings(soft_reach=soft))
    pose = pose_matrices(NAMES, PARENTS, skeleton.rest, result.rotations, result.locations)
    solved_shoulder, hand = pose[1][:3, 3], pose[3][:3, 3]
    distance = np.linalg.norm(target - solved_shoulder)
    assert distance > (1.0 - soft) * LENGTH  # in the zone from where the shoulder went
    assert np.linalg.norm(hand - target) == pytest.approx(result.position_errors[0], abs=1e-9)
    expected = distance - soft_distance(distance, LENGTH, soft)
    assert result.position_errors[0] == pytest.approx(expected, abs=1e-6)
    assert result.position_errors[0] < soft * LENGTH
