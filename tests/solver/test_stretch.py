"""Stretch: the bones above a pin lengthen, up to their maximum, to meet a target beyond reach.

Joints come from `pose_matrices` (scipy rotations, 4x4 products), independently of the solver's
forward kinematics; a chain stretched by s puts the pinned head s times as far from its root
joint along the straight chain.
"""

import numpy as np
import pytest

from solver import SceneError
from solver.pins import Pin
from solver.scene import solve_scene
from solver.settings import SolverSettings
from solver.solve import solve
from tests.solver.conftest import identity_pose, pose_matrices, translation

NAMES = ["body", "upper", "lower", "hand"]
PARENTS = [None, "body", "upper", "lower"]
HEADS = np.array([(0.0, 0.0, 0.0), (0.0, 0.5, 0.0), (0.0, 1.0, 0.05), (0.0, 1.5, 0.0)])
LENGTH = 2.0 * np.linalg.norm([0.5, 0.05])
WAY = np.array([0.0, 0.6, 0.8])
STRETCH = np.array([1.0, 1.2, 1.2, 1.0])  # the arm's two bones may lengthen by 20 %


def along(y, position):
    """A frame at `position` whose Y points along `y`."""
    y = np.asarray(y, dtype=float) / np.linalg.norm(y)
    x = np.cross(y, [0.0, 0.0, 1.0])
    x /= np.linalg.norm(x)
    frame = translation(position)
    frame[:3, :3] = np.column_stack([x, y, np.cross(x, y)])
    return frame


def arm():
    """An arm bent slightly at rest, each bone's Y along it, under a body."""
    from solver import Skeleton

    ys = [(0.0, 1.0, 0.0), HEADS[2] - HEADS[1], HEADS[3] - HEADS[2], (0.0, 1.0, 0.0)]
    return Skeleton(NAMES, PARENTS, [along(y, h) for y, h in zip(ys, HEADS)], [0.5, 0.5, 0.5, 0.2])


def reach_out(share, stretch=STRETCH):
    """The solve with the body pinned and the hand's target `share` of the arm's length out."""
    skeleton = arm()
    rotations, locations = identity_pose(len(skeleton))
    target = HEADS[1] + share * LENGTH * WAY
    pins = [
        Pin("body", translation(HEADS[0])),
        Pin("hand", translation(target), orientation_weights=(0.0,) * 3),
    ]
    result = solve(skeleton, pins, rotations, locations, SolverSettings(), stretch=stretch)
    pose = pose_matrices(NAMES, PARENTS, skeleton.rest, result.rotations, result.locations)
    shoulder, hand = pose[1][:3, 3], pose[3][:3, 3]
    stretched_hand = shoulder + result.scales[1] * (hand - shoulder)
    return result, target, stretched_hand


@pytest.mark.parametrize("share", [1.02, 1.1, 1.2])
def test_the_arm_stretches_to_a_target_within_its_maximum(share):
    result, target, hand = reach_out(share)
    np.testing.assert_allclose(result.scales, [1.0, share, share, 1.0], rtol=1e-9)
    assert np.linalg.norm(hand - target) < 1e-9
    assert result.position_errors[1] < 1e-9
    assert result.converged and not result.beyond_reach.any()


def test_past_its_maximum_the_arm_stops_stretched_to_it():
    result, target, hand = reach_out(1.3)
    np.testing.assert_allclose(result.scales, STRETCH)
    assert result.position_errors[1] == pytest.approx((1.3 - 1.2) * LENGTH, rel=1e-9)
    assert np.linalg.norm(hand - target) == pytest.approx(result.position_errors[1], rel=1e-9)
    assert result.beyond_reach[1] and not result.converged


def test_within_reach_nothing_stretches_and_the_pose_is_the_unstretched_one():
    stretched = reach_out(0.9)[0]
    plain = reach_out(0.9, stretch=None)[0]
    assert (stretched.scales == 1.0).all() and (plain.scales == 1.0).all()
    np.testing.assert_array_equal(stretched.rotations, plain.rotations)


def test_the_stretch_grows_continuously_from_full_reach():
    shares = np.linspace(0.99, 1.03, 9)
    scales = np.array([reach_out(share)[0].scales[1] for share in shares])
    np.testing.assert_allclose(scales, np.maximum(shares, 1.0), atol=1e-9)


def test_a_parents_stretch_lengthens_the_offset_of_its_children_along_its_y():
    skeleton = arm()
    rotations, locations = identity_pose(len(skeleton))
    heads = skeleton.forward(rotations, locations, np.array([1.0, 1.5, 1.0, 1.0]))[1]
    np.testing.assert_allclose(heads[2] - heads[1], 1.5 * (HEADS[2] - HEADS[1]))
    np.testing.assert_allclose(heads[3] - heads[2], HEADS[3] - HEADS[2])


@pytest.mark.parametrize(
    ("stretch", "field"),
    [
        ([1.0, 0.5, 1.0, 1.0], "bones[1].stretch"),
        ([1.0, 1.0, 1.0, np.nan], "bones[3].stretch"),
        ([1.0], "stretch"),
    ],
)
def test_a_bad_stretch_names_the_bone(stretch, field):
    skeleton = arm()
    rotations, locations = identity_pose(len(skeleton))
    pins = [Pin("hand", translation(HEADS[3]))]
    with pytest.raises(SceneError, match=field.replace("[", r"\[").replace("]", r"\]")):
        solve(skeleton, pins, rotations, locations, SolverSettings(), stretch=stretch)


def arm_document(share, stretch=1.2):
    """The arm as a scene document, its two bones stretchable, the hand's target `share` out."""
    skeleton = arm()
    bones = [
        {"name": n, "parent": p, "rest": skeleton.rest[skeleton.index[n]].tolist(), "length": 0.5}
        for n, p in zip(NAMES, PARENTS)
    ]
    bones[1]["stretch"] = bones[2]["stretch"] = stretch
    pins = [
        {"bone": "body", "target": translation(HEADS[0]).tolist()},
        {
            "bone": "hand",
            "target": translation(HEADS[1] + share * LENGTH * WAY).tolist(),
            "orientation_weights": [0.0, 0.0, 0.0],
        },
    ]
    return {"format": "ewbik-scene", "version": 1, "bones": bones, "pins": pins}


def test_a_scene_document_carries_the_stretch_and_the_pose_reports_it():
    pose = solve_scene(arm_document(1.1))
    assert pose["bones"]["upper"]["stretch"] == pytest.approx(1.1)
    assert pose["bones"]["lower"]["stretch"] == pytest.approx(1.1)
    assert "stretch" not in pose["bones"]["hand"]
    assert pose["stats"]["pins"]["hand"]["position_error"] < 1e-9


def test_a_bad_stretch_in_a_document_names_the_field():
    with pytest.raises(SceneError, match=r"bones\[1\]\.stretch"):
        solve_scene(arm_document(1.1, stretch=0.9))
