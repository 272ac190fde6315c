"""Kusudama swing limits: reference vectors, brute-force oracle, edge cases, properties, input."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solver.kusudama import JointLimits, Kusudama, LimitCone, TwistLimit
from solver.validation import SceneError
from tests.support.kusudamas import fibonacci_sphere, random_kusudama


def unit(v):
    v = np.asarray(v, dtype=float)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


SPHERE = fibonacci_sphere(60000)
SPACING = math.sqrt(4 * math.pi / len(SPHERE))


def angle(a, b):
    return np.arctan2(np.linalg.norm(np.cross(a, b), axis=-1), np.sum(a * b, axis=-1))


# ---------------------------------------------------------------- reference vectors (notes, 5)

ONE_CONE = Kusudama([LimitCone((0, 0, 1), math.pi / 6)])
TWO_CONES = Kusudama([LimitCone((1, 0, 0), math.radians(30)), LimitCone((0, 1, 0), math.radians(20))])


@pytest.mark.parametrize(
    "given_dir, expected",
    [
        ((1, 0, 0), (0.5, 0, 0.8660254)),
        ((0, 1, 1), (0, 0.5, 0.8660254)),
        ((-1, -1, 0.2), (-0.35355339, -0.35355339, 0.8660254)),
        ((0.3, 0.2, 1), None),
    ],
)
def test_one_cone_reference(given_dir, expected):
    p = unit(given_dir)
    out = ONE_CONE.closest_allowed(p)
    np.testing.assert_allclose(out, p if expected is None else expected, atol=1e-7)
    assert bool(ONE_CONE.allows(p)) == (expected is None)


def test_two_cone_tangents_reference():
    dirs, radii = TWO_CONES.tangent_cones()
    np.testing.assert_allclose(radii, [1.134464014] * 2, atol=1e-9)
    np.testing.assert_allclose(
        dirs, [(-0.087155743, 0.087155743, -0.992374805), (-0.087155743, 0.087155743, 0.992374805)], atol=1e-9
    )


@pytest.mark.parametrize(
    "given_dir, expected",
    [
        ((1, 1, 0), None),
        ((1, 1, 0.3), None),
        ((1, 1, -0.3), None),
        ((0.2, 1, 0), None),
        ((1, 0.2, 0.1), None),
        ((1, 1, 0.8), (0.646705999, 0.631902544, 0.427165690)),
        ((0, 0, 1), (0.866025404, 0, 0.5)),
        ((-1, 0, 0), (-0.342020143, 0.939692621, 0)),
        ((0.5, 0.5, 0.7), (0.676333211, 0.595943463, 0.432925834)),
    ],
)
def test_two_cone_reference(given_dir, expected):
    p = unit(given_dir)
    out = TWO_CONES.closest_allowed(p)
    np.testing.assert_allclose(out, p if expected is None else expected, atol=1e-8)
    assert bool(TWO_CONES.allows(p)) == (expected is None)


# ---------------------------------------------------------------- independent brute-force oracle


def oracle_tangent(a, ra, b, rb, side):
    """Tangent cone centre by spherical trigonometry (not the closed form used by the solver)."""
    t = (math.pi - ra - rb) / 2
    da, db = ra + t, rb + t
    theta = math.acos(np.clip(np.dot(a, b), -1, 1))
    cos_alpha = (math.cos(db) - math.cos(da) * math.cos(theta)) / (math.sin(da) * math.sin(theta))
    alpha = math.acos(np.clip(cos_alpha, -1, 1))
    u = unit(b - np.dot(a, b) * a)
    w = np.cross(a, u)
    return t, math.cos(da) * a + math.sin(da) * (math.cos(alpha) * u + side * math.sin(alpha) * w)


def oracle_allowed(points, cones):
    """Membership by the region's definition: any cone, or a bridge triangle outside its tangent."""
    allowed = np.zeros(len(points), dtype=bool)
    for c in cones:
        allowed |= angle(points, np.array(c.direction)) <= c.radius + 1e-9
    for c0, c1 in zip(cones, cones[1:]):
        a, b = np.array(c0.direction), np.array(c1.direction)
        sep = math.acos(np.clip(np.dot(a, b), -1, 1))
        if c0.radius + c1.radius >= math.pi or sep <= abs(c0.radius - c1.radius):
            continue
        for side in (-1, 1):
            t, tangent = oracle_tangent(a, c0.radius, b, c1.radius, side)
            verts = [a, tangent, b] if side < 0 else [a, b, tangent]
            normals = [np.cross(verts[i], verts[(i + 1) % 3]) for i in range(3)]
            in_triangle = np.all([points @ n >= -1e-12 for n in normals], axis=0)
            allowed |= in_triangle & (angle(points, tangent) >= t - 1e-9)
    return allowed


def separated_kusudama(rng, n_cones):
    """A random Kusudama whose neighbouring cones are neither nearly the same direction nor nearly
    opposite, where the oracle's tangent construction holds."""
    while True:
        kusudama = random_kusudama(rng, n_cones)
        dirs = [np.array(cone.direction) for cone in kusudama.cones]
        if all(0.1 < angle(a, b) < math.pi - 0.1 for a, b in zip(dirs, dirs[1:])):
            return kusudama


@pytest.mark.parametrize("seed", range(12))
def test_brute_force_oracle(seed):
    rng = np.random.default_rng(seed)
    kusudama = separated_kusudama(rng, 1 + seed % 4)
    allowed_samples = SPHERE[oracle_allowed(SPHERE, kusudama.cones)]
    assert len(allowed_samples)
    queries = unit(rng.normal(size=(300, 3)))
    out = kusudama.closest_allowed(queries)
    assert np.all(oracle_allowed(out, kusudama.cones)), "returned direction not allowed"
    reached = angle(queries, out)
    best_sample = np.min(np.arccos(np.clip(queries @ allowed_samples.T, -1, 1)), axis=1)
    assert np.all(reached <= best_sample + 1e-9), "an allowed sample is closer than the answer"
    # The sampled region is within one grid spacing of the true one, so the answer can only be
    # "better" than the samples by about that much.
    assert np.all(reached >= best_sample - 2 * SPACING)
    np.testing.assert_array_equal(kusudama.allows(queries), oracle_allowed(queries, kusudama.cones))


# ---------------------------------------------------------------- edge cases


def assert_finite_and_allowed(kusudama, dirs):
    out = kusudama.closest_allowed(dirs)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(np.linalg.norm(out, axis=-1), 1.0, atol=1e-12)
    assert np.all(kusudama.allows(out))
    np.testing.assert_array_equal(kusudama.closest_allowed(out), out)
    return out


EDGE_DIRS = np.concatenate([unit(np.random.default_rng(3).normal(size=(200, 3))), np.eye(3), -np.eye(3)])


def test_antipodal_input_is_finite():
    out = assert_finite_and_allowed(ONE_CONE, np.array([[0.0, 0.0, -1.0]]))
    assert abs(angle(out[0], np.array([0, 0, 1.0])) - math.pi / 6) < 1e-12


@pytest.mark.parametrize(
    "cones",
    [
        [((0, 1, 0), 0.0)],
        [((0, 1, 0), 0.0), ((1, 0, 0), 0.0)],
        [((0, 1, 0), 0.3), ((0, 1, 0), 0.3)],
        [((0, 1, 0), 0.3), ((0, 1, 0), 0.6)],
        [((0, 1, 0), 0.3), ((0, -1, 0), 0.2)],
        [((0, 1, 0), 0.0), ((0, -1, 0), 0.0)],
        [((0, 1, 0), math.pi)],
        [((0, 1, 0), 4.0), ((1, 0, 0), 0.2)],
        [((0, 1, 0), 1.2), ((1, 0, 0), 1.0)],
        [((0, 1, 0), 2.0), ((1, 0, 0), 1.5)],
        [((0, 1, 0), 0.5), ((1, 0, 0), 0.5), ((0, 1, 0), 0.2)],
    ],
)
def test_degenerate_cones_are_finite(cones):
    kusudama = Kusudama([LimitCone(d, r) for d, r in cones])
    assert_finite_and_allowed(kusudama, EDGE_DIRS)
    for d, _r in cones:
        assert kusudama.allows(np.array(d, dtype=float))


def test_radius_zero_pair_allows_exactly_the_arc():
    kusudama = Kusudama([LimitCone((0, 1, 0), 0.0), LimitCone((1, 0, 0), 0.0)])
    on_arc = unit([[1, 1, 0], [1, 3, 0], [3, 1, 0]])
    assert np.all(kusudama.allows(on_arc))
    assert not np.any(kusudama.allows(unit([[1, 1, 0.05], [-1, 1, 0], [1, 1, -0.05]])))
    out = kusudama.closest_allowed(unit([1, 1, 0.3]))
    np.testing.assert_allclose(out, unit([1, 1, 0]), atol=1e-12)


def test_full_radius_allows_everything():
    kusudama = Kusudama([LimitCone((0, 1, 0), math.pi)])
    assert np.all(kusudama.allows(EDGE_DIRS))
    np.testing.assert_array_equal(kusudama.closest_allowed(EDGE_DIRS), EDGE_DIRS)


def test_continuous_across_boundary():
    """Points on either side of the boundary map to nearby answers (no jumps at seams)."""
    rng = np.random.default_rng(7)
    for _ in range(5):
        kusudama = separated_kusudama(rng, 3)
        boundary = kusudama.closest_allowed(unit(rng.normal(size=(300, 3))))
        boundary = boundary[~np.isclose(np.abs(boundary @ np.ones(3)), 0)]
        nudge = unit(boundary + 1e-5 * unit(rng.normal(size=boundary.shape)))
        assert np.all(angle(kusudama.closest_allowed(nudge), boundary) < 1e-4)


def test_region_centre_is_inside():
    rng = np.random.default_rng(11)
    for n in range(1, 5):
        kusudama = separated_kusudama(rng, n)
        assert kusudama.allows(kusudama.centre)


def test_centres_sit_in_the_middle_of_swing_and_twist():
    """The restart pose: swing at the region's centre, twist in the middle of its range, free
    bones at rest; every limited bone's centre passes its own limits with room to spare."""
    rng = np.random.default_rng(12)
    kusudamas = {
        1: Kusudama([LimitCone((1.0, 0.0, 0.0), 0.3)], TwistLimit(0.2, 0.6)),
        2: separated_kusudama(rng, 3),
        4: Kusudama([], TwistLimit(-1.0, -0.5)),
    }
    limits = JointLimits(kusudamas, 5)
    centres = limits.centres()
    assert np.all(limits.violation(centres) == 0.0)
    np.testing.assert_allclose(centres[[0, 3]], [[1.0, 0.0, 0.0, 0.0]] * 2)
    swing_to_x = np.array([math.cos(math.pi / 4), 0.0, 0.0, -math.sin(math.pi / 4)])
    twist_y = np.array([math.cos(0.2), 0.0, math.sin(0.2), 0.0])
    np.testing.assert_allclose(centres[1], quat_product(swing_to_x, twist_y), atol=1e-12)
    np.testing.assert_allclose(centres[4], [math.cos(-0.375), 0.0, math.sin(-0.375), 0.0], atol=1e-12)


def quat_product(a, b):
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array(
        [
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ]
    )


# ---------------------------------------------------------------- properties

direction = st.tuples(*[st.floats(-1, 1)] * 3).filter(lambda v: np.linalg.norm(v) > 1e-3)


@st.composite
def kusudamas(draw):
    cones = draw(st.lists(st.tuples(direction, st.floats(0.0, 3.5)), min_size=1, max_size=5))
    return Kusudama([LimitCone(unit(d), r) for d, r in cones])


@settings(max_examples=150, deadline=None)
@given(kusudamas(), st.lists(direction, min_size=1, max_size=20))
def test_closest_allowed_properties(kusudama, dirs):
    dirs = unit(np.array(dirs))
    out = kusudama.closest_allowed(dirs)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(np.linalg.norm(out, axis=-1), 1.0, atol=1e-12)
    assert np.all(kusudama.allows(out))
    np.testing.assert_array_equal(kusudama.closest_allowed(out), out)
    inside = kusudama.allows(dirs)
    np.testing.assert_array_equal(out[inside], dirs[inside])


# ---------------------------------------------------------------- documents and bad input


def test_dict_round_trip():
    d = {
        "cones": [
            {"direction": [0.0, 1.0, 0.0], "radius": 0.5},
            {"direction": [1.0, 0.0, 0.0], "radius": 0.2},
        ],
        "twist": {"min": -0.4, "max": 0.9},
    }
    kusudama = Kusudama.from_dict(d, bone="x")
    assert kusudama.to_dict() == d
    assert Kusudama.from_dict(kusudama.to_dict()) == kusudama


@pytest.mark.parametrize(
    "limits, field",
    [
        (
            {"cones": [{"direction": [0, 1, 0], "radius": 0.3}, {"direction": [0, 2, 0], "radius": 0.3}]},
            "limits.cones[1].direction",
        ),
        ({"cones": [{"direction": [0, 0, 0], "radius": 0.3}]}, "limits.cones[0].direction"),
        ({"cones": [{"direction": [0, 1], "radius": 0.3}]}, "limits.cones[0].direction"),
        ({"cones": [{"direction": [0, float("nan"), 1], "radius": 0.3}]}, "limits.cones[0].direction[1]"),
        ({"cones": [{"direction": ["0", 1, 0], "radius": 0.3}]}, "limits.cones[0].direction[0]"),
        ({"cones": [{"direction": [0, True, 0], "radius": 0.3}]}, "limits.cones[0].direction[1]"),
        ({"cones": [{"direction": "010", "radius": 0.3}]}, "limits.cones[0].direction"),
        ({"cones": [{"direction": [0, 1, 0], "radius": -0.1}]}, "limits.cones[0].radius"),
        ({"cones": [{"direction": [0, 1, 0], "radius": "wide"}]}, "limits.cones[0].radius"),
        ({"cones": [{"direction": [0, 1, 0]}]}, "limits.cones[0].radius"),
        ({"cones": [{"direction": [0, 1, 0], "radius": 0.3, "width": 1}]}, "limits.cones[0].width"),
        ({"twist": {"min": 0.5, "max": -0.5}}, "limits.twist.min"),
        ({"twist": {"min": 0.5}}, "limits.twist.max"),
        ({"twist": {"min": float("inf"), "max": 1}}, "limits.twist.min"),
        ({"twist": [0, 1]}, "limits.twist"),
        ({"comfort": 2.0}, "limits.comfort"),
        ({"comfort": True}, "limits.comfort"),
        ({"cone": []}, "limits.cone"),
        ({"cones": "wide"}, "limits.cones"),
        ([1, 2], "limits"),
    ],
)
def test_bad_limits_name_bone_and_field(limits, field):
    with pytest.raises(SceneError) as err:
        Kusudama.from_dict(limits, bone="forearm.L")
    assert err.value.field == field
    assert "forearm.L" in str(err.value)


def test_bad_limits_field_is_seen_from_the_enclosing_document():
    with pytest.raises(SceneError) as err:
        Kusudama.from_dict({"cones": [{"direction": [0, 0, 0], "radius": 0.3}]}, field="bones[3].limits")
    assert err.value.field == "bones[3].limits.cones[0].direction"


def test_constructor_validation():
    with pytest.raises(SceneError, match="direction"):
        LimitCone((0, 0, 0), 0.1)
    with pytest.raises(SceneError, match="radius"):
        LimitCone((0, 1, 0), -1.0)
    with pytest.raises(SceneError, match="min"):
        TwistLimit(1.0, 0.0)
    with pytest.raises(SceneError, match="limits"):
        JointLimits({5: Kusudama()}, 3)
