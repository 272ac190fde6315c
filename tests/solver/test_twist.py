"""Twist limits, batched JointLimits.constrain / violation, and comfort."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solver import quat
from solver.kusudama import JointLimits, Kusudama, LimitCone, TwistLimit

Y = np.array([0.0, 1.0, 0.0])
X = np.array([1.0, 0.0, 0.0])


def swing_dir(q):
    return quat.rotate(q, Y)


def twist_about_y(q):
    """Twist angle of q relative to the plain shortest-arc swing from +Y (valid away from -Y)."""
    swing = quat.shortest_arc(Y, swing_dir(q))
    rest = quat.multiply(quat.conjugate(swing), q)
    return 2.0 * math.atan2(rest[2], rest[0])


def limits_of(kusudama):
    return JointLimits({0: kusudama}, 1)


def test_reference_swing_20_twist_50_clamps_to_30():
    limits = limits_of(Kusudama([LimitCone(Y, 1.0)], TwistLimit(math.radians(-30), math.radians(30))))
    swing = quat.from_axis_angle(X, math.radians(20))
    q = quat.multiply(swing, quat.from_axis_angle(Y, math.radians(50)))
    out = limits.constrain([0], q[None])[0]
    expected = quat.multiply(swing, quat.from_axis_angle(Y, math.radians(30)))
    np.testing.assert_allclose(quat.normalize(out), quat.normalize(expected), atol=1e-12)
    np.testing.assert_allclose(swing_dir(out), swing_dir(q), atol=1e-12)


@pytest.mark.parametrize(
    "low, high, given_deg, expected_deg",
    [
        (0.2, 1.0, 0.0, 0.2),
        (0.2, 1.0, 1.5, 1.0),
        (0.2, 1.0, -2.5, 0.2),
        (0.2, 1.0, 0.7, 0.7),
        (2.5, 3.5, 3.0, 3.0),
        (2.5, 3.5, -3.0, -3.0),
        (2.5, 3.5, 0.3, 2.5),
        (-0.5, -0.5, 0.4, -0.5),
    ],
)
def test_twist_clamp_to_nearest_end(low, high, given_deg, expected_deg):
    """Angles in radians despite the names: twist-only limit, rotation about the bone axis."""
    limits = limits_of(Kusudama([], TwistLimit(low, high)))
    q = quat.from_axis_angle(Y, given_deg)
    out = limits.constrain([0], q[None])[0]
    diff = (twist_about_y(out) - expected_deg + math.pi) % (2 * math.pi) - math.pi
    assert abs(diff) < 1e-12
    assert limits.violation(out[None])[0] < 1e-12
    expected_violation = (
        0.0
        if abs(given_deg - expected_deg) < 1e-15
        else min(
            abs((given_deg - low + math.pi) % (2 * math.pi) - math.pi),
            abs((given_deg - high + math.pi) % (2 * math.pi) - math.pi),
        )
    )
    assert abs(limits.violation(q[None])[0] - expected_violation) < 1e-12


def test_twist_well_defined_near_minus_y():
    """A region around -Y: the naive swing-twist about +Y is singular there; ours is not.

    Twist zero at a direction d is the swing arc(centre -> d) * arc(+Y -> centre).
    """
    down = np.array([0.0, -1.0, 0.0])
    kusudama = Kusudama([LimitCone(down, 0.4)], TwistLimit(-0.3, 0.3))
    limits = limits_of(kusudama)
    np.testing.assert_allclose(kusudama.centre, down, atol=1e-12)
    frame = quat.shortest_arc(Y, down)
    for tilt in (0.0, 1e-9, 1e-4, 0.2):
        swing = quat.multiply(quat.from_axis_angle((0, 0, 1), tilt), frame)
        inside = quat.multiply(swing, quat.from_axis_angle(Y, 0.25))
        np.testing.assert_array_equal(limits.constrain([0], inside[None])[0], inside)
        outside = quat.multiply(swing, quat.from_axis_angle(Y, 0.9))
        clamped = limits.constrain([0], outside[None])[0]
        expected = quat.multiply(swing, quat.from_axis_angle(Y, 0.3))
        np.testing.assert_allclose(quat.normalize(clamped), quat.normalize(expected), atol=1e-9)


def test_result_does_not_depend_on_bone_roll():
    rng = np.random.default_rng(5)
    cones = [LimitCone(quat.rotate(quat.from_axis_angle(X, 0.6), Y), 0.3), LimitCone(X, 0.2)]
    base = JointLimits({0: Kusudama(cones, TwistLimit(-0.4, 0.7))}, 1)
    roll = quat.from_axis_angle(Y, 1.1)
    rolled_cones = [LimitCone(quat.rotate(quat.conjugate(roll), c.direction), c.radius) for c in cones]
    rolled = JointLimits({0: Kusudama(rolled_cones, TwistLimit(-0.4, 0.7))}, 1)
    q = quat.normalize(rng.normal(size=(50, 4)))
    q_rolled = quat.multiply(quat.multiply(quat.conjugate(roll), q), roll)
    a = quat.multiply(
        quat.multiply(roll, rolled.constrain(np.zeros(50, int), q_rolled)), quat.conjugate(roll)
    )
    b = base.constrain(np.zeros(50, int), q)
    np.testing.assert_allclose(quat.normalize(a), quat.normalize(b), atol=1e-9)
    np.testing.assert_allclose(rolled.violation(q_rolled[:1]), base.violation(q[:1]), atol=1e-9)


def make_limits(rng, n_bones=12):
    kusudamas = {}
    for i in range(n_bones):
        if i % 4 == 3:
            continue
        dirs = rng.normal(size=(1 + i % 3, 3))
        cones = [LimitCone(d / np.linalg.norm(d), r) for d, r in zip(dirs, rng.uniform(0, 1.2, len(dirs)))]
        low = rng.uniform(-2, 1)
        twist = TwistLimit(low, low + rng.uniform(0, 2)) if i % 2 else None
        kusudamas[i] = Kusudama(cones if i % 5 else [], twist)
    return JointLimits(kusudamas, n_bones)


def test_batched_constrain_matches_single_bone_and_leaves_free_bones():
    rng = np.random.default_rng(1)
    limits = make_limits(rng)
    q = quat.normalize(rng.normal(size=(12, 4)))
    batch = limits.constrain(np.arange(12), q)
    for i in range(12):
        single = limits.constrain([i], q[i : i + 1])[0]
        np.testing.assert_allclose(batch[i], single, atol=1e-14)
        if not limits.limited[i]:
            np.testing.assert_array_equal(batch[i], q[i])
        else:
            single_limits = JointLimits({0: limits.kusudamas[i]}, 1)
            np.testing.assert_allclose(single_limits.constrain([0], q[i : i + 1])[0], batch[i], atol=1e-14)
    assert np.all(limits.violation(batch) < 1e-9)
    expected = [i % 4 != 3 and (i % 5 != 0 or i % 2 == 1) for i in range(12)]
    np.testing.assert_array_equal(limits.limited, expected)


def test_swing_clamp_goes_to_closest_allowed_direction():
    rng = np.random.default_rng(2)
    kusudama = Kusudama([LimitCone(X, 0.3), LimitCone(Y, 0.2)])
    limits = limits_of(kusudama)
    q = quat.normalize(rng.normal(size=(100, 4)))
    out = limits.constrain(np.zeros(100, int), q)
    np.testing.assert_allclose(swing_dir(out), kusudama.closest_allowed(swing_dir(q)), atol=1e-12)
    many = JointLimits({i: kusudama for i in range(100)}, 100)
    np.testing.assert_allclose(
        many.violation(q), np.arccos(np.clip(np.sum(swing_dir(out) * swing_dir(q), -1), -1, 1)), atol=1e-7
    )


quaternion = st.tuples(*[st.floats(-1, 1)] * 4).filter(lambda v: np.linalg.norm(v) > 1e-3)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.lists(quaternion, min_size=12, max_size=12))
def test_constrain_properties(seed, rotations):
    limits = make_limits(np.random.default_rng(seed))
    q = quat.normalize(np.array(rotations))
    out = limits.constrain(np.arange(12), q)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(np.linalg.norm(out, axis=-1), 1.0, atol=1e-12)
    assert np.all(limits.violation(out) <= 1e-9)
    again = limits.constrain(np.arange(12), out)
    np.testing.assert_allclose(again, out, atol=1e-12)
    inside = limits.violation(q) == 0.0
    np.testing.assert_array_equal(out[inside], q[inside])


def test_comfort_pulls_toward_centre_and_settles():
    cones = [LimitCone(Y, 0.8)]
    soft = limits_of(Kusudama(cones, TwistLimit(-0.6, 0.6), comfort=1.0))
    hard = limits_of(Kusudama(cones, TwistLimit(-0.6, 0.6)))
    q = quat.multiply(quat.from_axis_angle(X, 0.7), quat.from_axis_angle(Y, 0.5))
    np.testing.assert_array_equal(hard.constrain([0], q[None])[0], q)
    angles, twists, steps = [], [], []
    current = q[None]
    for iteration in range(30):
        after = soft.constrain([0], current, iteration=iteration)
        steps.append(quat.angle(quat.multiply(quat.conjugate(current[0]), after[0])))
        current = after
        angles.append(math.acos(np.clip(swing_dir(current[0]) @ Y, -1, 1)))
        twists.append(abs(twist_about_y(current[0])))
        assert soft.violation(current)[0] == 0.0
    assert np.all(np.diff(angles) <= 1e-12) and np.all(np.diff(twists) <= 1e-12)
    assert 0.3 < angles[-1] < 0.7
    assert steps[-1] < 1e-8 and np.all(np.diff(steps) < 0)


def test_comfort_is_off_by_default():
    assert Kusudama([LimitCone(Y, 0.5)]).comfort == 0.0
