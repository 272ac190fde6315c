"""Pins win over limits: a target only a bend past a joint limit reaches is reached, the limit
yielding by the least angle (`SolveResult.limits_exceeded`); strict limits hold and the pin
stops short; where no bend reaches, the limits hold (both loops)."""

import math

import numpy as np
import pytest

from solver import JointLimits, Kusudama, LimitCone, Pin, SolverSettings, TwistLimit, solve
from tests.solver.conftest import POSITION_ONLY, translation
from tests.support.upper_body import SKELETON, STIFFNESS, rest_pose

CONE = math.radians(30.0)
Y = (0.0, 1.0, 0.0)


def elbow_limits():
    """fore.L may swing 30 degrees from straight, twist free."""
    i = SKELETON.index["fore.L"]
    return JointLimits({i: Kusudama([LimitCone(Y, CONE)], TwistLimit(-math.pi, math.pi))}, len(SKELETON))


def hand_at(point, strict=False):
    pins = [Pin("hand.L", translation(point), orientation_weights=POSITION_ONLY)]
    settings = SolverSettings(iterations=200, tolerance=1e-7, strict_limits=strict)
    stiffness = STIFFNESS.copy()
    stiffness[SKELETON.index["spine"]] = stiffness[SKELETON.index["chest"]] = 1.0
    return solve(SKELETON, pins, *rest_pose(), settings, elbow_limits(), stiffness)


NEAR_SHOULDER = (0.35, 0.25, 1.5)


def bend_needed_deg(point):
    """The elbow bend that puts the hand's head on `point` with the shoulder fixed (law of
    cosines on the upper arm, 0.3 m, and the forearm, 0.25 m): the only pose that reaches."""
    reach = np.linalg.norm(np.subtract(point, (0.2, 0.0, 1.5)))
    inner = math.acos((0.3**2 + 0.25**2 - reach**2) / (2 * 0.3 * 0.25))
    return 180.0 - math.degrees(inner)


def test_a_pin_only_a_bend_past_the_limit_reaches_is_reached_the_limit_yielding_that_far(default_backend):
    result = hand_at(NEAR_SHOULDER)
    assert result.converged and result.position_errors[0] <= 1e-6
    exceeded = math.degrees(result.limits_exceeded[SKELETON.index["fore.L"]])
    assert exceeded == pytest.approx(bend_needed_deg(NEAR_SHOULDER) - 30.0, abs=0.1)
    assert np.all(np.delete(result.limits_exceeded, SKELETON.index["fore.L"]) == 0.0)


def test_strict_limits_hold_and_the_pin_stops_short(default_backend):
    result = hand_at(NEAR_SHOULDER, strict=True)
    assert not result.converged and result.position_errors[0] > 0.01
    assert elbow_limits().violation(result.rotations).max() <= 1e-9
    assert np.all(result.limits_exceeded == 0.0)


def test_where_no_bend_reaches_the_limits_hold(default_backend):
    result = hand_at((1.5, 0.0, 1.5))
    assert not result.converged
    assert elbow_limits().violation(result.rotations).max() <= 1e-9
