"""Pins that cannot all be reached: the lowest priority gives way, the others are reached, and the
targets alone decide which (`solve`'s giving-way rounds), on both loops."""

import math

import numpy as np
import pytest

from solver import Pin, SceneError, SolverSettings, solve
from tests.solver.conftest import POSITION_ONLY, translation
from tests.support.upper_body import ARM, SKELETON, STIFFNESS, rest_pose

SETTINGS = SolverSettings(iterations=200, tolerance=1e-7)


def pins(far_left=(2.5, 0.5, 1.4), priorities=None):
    priorities = priorities or {}
    targets = {"hand.L": far_left, "hand.R": (-0.55, 0.25, 1.35), "head": (0.03, 0.05, 1.59)}
    return [
        Pin(bone, translation(point), orientation_weights=POSITION_ONLY, priority=priorities.get(bone, 0.0))
        for bone, point in targets.items()
    ]


def solved(pin_list, settings=SETTINGS):
    return solve(SKELETON, pin_list, *rest_pose(), settings, stiffness=STIFFNESS)


def world_heads(result):
    return SKELETON.forward(result.rotations, result.locations)[1]


def test_a_hand_out_of_reach_stops_short_while_the_others_are_reached():
    result = solved(pins())
    assert result.yielded.tolist() == [True, False, False]
    assert result.position_errors[1:].max() < 1e-6
    shoulder = world_heads(result)[SKELETON.index["upper.L"]]
    as_close_as_the_arm_goes = np.linalg.norm(np.subtract((2.5, 0.5, 1.4), shoulder)) - ARM
    assert math.isclose(result.position_errors[0], as_close_as_the_arm_goes, abs_tol=1e-4)


def test_without_giving_way_the_far_hand_pulls_the_others_off():
    shared = solved(pins(), SolverSettings(iterations=200, tolerance=1e-7, pins_give_way=False))
    assert not shared.yielded.any()
    assert shared.position_errors[1:].max() > 0.01


def test_the_order_of_the_pins_does_not_decide_who_gives_way():
    forward = solved(pins())
    backward = solved(pins()[::-1])
    np.testing.assert_allclose(world_heads(backward), world_heads(forward), atol=1e-6)
    assert backward.yielded[::-1].tolist() == forward.yielded.tolist()


@pytest.mark.parametrize("stronger", ["hand.L", "hand.R"])
def test_the_higher_priority_is_reached_when_two_hands_pull_apart(stronger):
    wide = [
        Pin("hand.L", translation((0.85, 0.1, 1.45)), orientation_weights=POSITION_ONLY),
        Pin("hand.R", translation((-0.85, 0.1, 1.45)), orientation_weights=POSITION_ONLY),
    ]
    wide = [
        Pin(p.bone, p.target, orientation_weights=POSITION_ONLY, priority=float(p.bone == stronger))
        for p in wide
    ]
    result = solved(wide)
    reached = [p.bone == stronger for p in wide]
    assert result.yielded.tolist() == [not r for r in reached]
    assert result.position_errors[np.array(reached)].max() < 1e-6


def test_pins_reached_together_solve_as_without_giving_way():
    reachable = pins(far_left=(0.6, 0.2, 1.3))
    plain = solved(reachable, SolverSettings(iterations=200, tolerance=1e-7, pins_give_way=False))
    result = solved(reachable)
    assert not result.yielded.any() and result.position_errors.max() < 1e-6
    np.testing.assert_array_equal(result.rotations, plain.rotations)


def test_the_same_start_and_targets_give_the_same_pose():
    first, second = solved(pins()), solved(pins())
    np.testing.assert_array_equal(first.rotations, second.rotations)


@pytest.mark.parametrize("value", [math.nan, math.inf, 1e7, "high"])
def test_a_bad_priority_is_refused_naming_the_field(value):
    with pytest.raises(SceneError) as error:
        Pin("hand.L", translation((0, 0, 0)), priority=value)
    assert error.value.field == "priority"
