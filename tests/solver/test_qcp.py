"""The Minimizer: the notes' reference vector, scipy's align_vectors, Kabsch, and degenerate sets."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

from solver import quat
from solver.qcp import qcp_rotations, rotation_from_covariance, rotations_from_covariance
from tests.support.qcp_oracles import kabsch_rotation, key_matrix, weighted_fit

ALL_AXES = np.eye(3)


def rotation_of(moved, targets, weights, exact=True):
    """One unbatched QCP solve: the unit quaternion for a single point set."""
    q = qcp_rotations(
        np.asarray(moved, float)[None],
        np.asarray(targets, float)[None],
        np.asarray(weights, float)[None],
        exact=exact,
    )[0]
    assert np.all(np.isfinite(q)) and abs(np.linalg.norm(q) - 1.0) < 1e-12
    return q


def objective(moved, targets, weights, q):
    return weighted_fit(moved, targets, weights, quat.to_matrix(q))


def scale_of(moved, targets, weights):
    """sum w (|m|^2 + |t|^2): the objective's natural size, for relative tolerances."""
    return float(np.sum(weights * ((moved**2).sum(-1) + (targets**2).sum(-1))))


# ------------------------------------------------------------------ reference vector (notes, 1)


def reference_sets():
    p = np.array([0.0, 1.0, 0.0])
    t = np.array([1.2, 0.5, 0.7])
    s = max(1.0, float(np.linalg.norm(t)))
    r40 = Rotation.from_rotvec([0, 0, math.radians(40)]).as_matrix()
    moved = [p] + [p + sign * s * ALL_AXES[k] for k in range(3) for sign in (1, -1)]
    targets = [t] + [t + sign * s * r40 @ ALL_AXES[k] for k in range(3) for sign in (1, -1)]
    return np.array(moved), np.array(targets), np.ones(7)


def test_reference_vector_objective_at_identity():
    moved, targets, weights = reference_sets()
    assert weighted_fit(moved, targets, weights, np.eye(3)) == pytest.approx(19.340185, abs=1e-6)


def test_reference_vector_e0_approximation():
    moved, targets, weights = reference_sets()
    q = rotation_of(moved, targets, weights, exact=False)
    assert objective(moved, targets, weights, q) == pytest.approx(16.670288, abs=1e-6)
    assert quat.angle(q) == pytest.approx(0.371992, abs=1e-6)


def test_reference_vector_exact_optimum():
    moved, targets, weights = reference_sets()
    q = rotation_of(moved, targets, weights, exact=True)
    assert objective(moved, targets, weights, q) == pytest.approx(16.423236, abs=1e-6)
    assert quat.angle(q) == pytest.approx(0.533557, abs=1e-6)


def test_reference_vector_largest_eigenvalue_of_key_matrix():
    moved, targets, weights = reference_sets()
    k = key_matrix(moved[None], targets[None], weights[None])[0]
    np.testing.assert_allclose(k, k.T)
    assert np.linalg.eigvalsh(k)[-1] == pytest.approx(15.998382, abs=1e-6)
    # The objective at the optimum is sum w(|m|^2+|t|^2) - 2 lambda_max.
    assert scale_of(moved, targets, weights) - 2 * 15.998382 == pytest.approx(16.423236, abs=1e-5)


@pytest.mark.parametrize("exact", [True, False])
def test_reference_vector_with_translation_is_exactly_40_degrees_about_z(exact):
    moved, targets, weights = reference_sets()
    q = rotation_of(moved - moved.mean(0), targets - targets.mean(0), weights, exact=exact)
    expected = quat.from_axis_angle([0, 0, 1], math.radians(40))
    assert abs(abs(np.dot(q, expected)) - 1.0) < 1e-12
    assert math.degrees(quat.angle(q)) == pytest.approx(40.0, abs=1e-6)


def test_ninety_degrees_about_1_2_0_maps_x_as_the_notes_say():
    axis = np.array([1.0, 2.0, 0.0]) / math.sqrt(5)
    r = quat.from_axis_angle(axis, math.pi / 2)
    np.testing.assert_allclose(quat.rotate(r, [1, 0, 0]), [0.2, 0.4, -0.894427], atol=1e-6)
    moved = np.array([[1.0, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]])
    targets = quat.rotate(r, moved)
    for exact in (True, False):
        q = rotation_of(moved, targets, np.ones(4), exact=exact)
        assert abs(abs(np.dot(q, r)) - 1.0) < 1e-12


# ------------------------------------------------------------------ random sets vs oracles


def random_set(seed, count, weight_exponent):
    rng = np.random.default_rng(seed)
    moved = rng.normal(size=(count, 3)) * rng.uniform(0.1, 3.0)
    true_rotation = Rotation.random(random_state=rng)
    noise = rng.uniform(0.0, 2.0)
    targets = true_rotation.apply(moved) + noise * rng.normal(size=(count, 3))
    weights = 10.0 ** rng.uniform(-weight_exponent, weight_exponent, size=count)
    return moved, targets, weights


set_params = st.tuples(st.integers(0, 2**32 - 1), st.integers(2, 9), st.sampled_from([0.0, 1.0, 9.0]))


@pytest.mark.filterwarnings("ignore:Optimal rotation is not uniquely or poorly defined")
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(set_params)
def test_exact_qcp_is_optimal_like_scipy_align_vectors_and_kabsch(params):
    moved, targets, weights = random_set(*params)
    q = rotation_of(moved, targets, weights)
    scipy_rot, _ = Rotation.align_vectors(targets, moved, weights=weights)
    fit_qcp = objective(moved, targets, weights, q)
    fit_scipy = weighted_fit(moved, targets, weights, scipy_rot.as_matrix())
    fit_kabsch = weighted_fit(moved, targets, weights, kabsch_rotation(moved, targets, weights))
    tol = 1e-8 * scale_of(moved, targets, weights)
    assert fit_qcp <= fit_scipy + tol
    assert fit_qcp <= fit_kabsch + tol
    assert abs(fit_scipy - fit_kabsch) <= tol


@settings(max_examples=150, deadline=None)
@given(set_params)
def test_exact_mode_is_never_worse_than_e0(params):
    moved, targets, weights = random_set(*params)
    exact = objective(moved, targets, weights, rotation_of(moved, targets, weights, exact=True))
    e0 = objective(moved, targets, weights, rotation_of(moved, targets, weights, exact=False))
    assert exact <= e0 + 1e-9 * scale_of(moved, targets, weights)


def test_well_conditioned_sets_give_scipys_rotation():
    for seed in range(20):
        moved, targets, weights = random_set(seed, 6, 1.0)
        q = rotation_of(moved, targets, weights)
        scipy_rot, _ = Rotation.align_vectors(targets, moved, weights=weights)
        np.testing.assert_allclose(quat.to_matrix(q), scipy_rot.as_matrix(), atol=1e-6)


def test_batch_entries_are_independent():
    sets = [random_set(seed, 5, 1.0) for seed in range(6)]
    moved = np.array([s[0] for s in sets])
    targets = np.array([s[1] for s in sets])
    weights = np.array([s[2] for s in sets])
    moved[2] = 0.0
    targets[4] = -moved[4]
    batch = qcp_rotations(moved, targets, weights)
    for b in range(6):
        np.testing.assert_allclose(batch[b], rotation_of(moved[b], targets[b], weights[b]), atol=1e-12)


# ------------------------------------------------------------------ degenerate sets


single_pairs = st.tuples(
    st.lists(st.floats(-5, 5, allow_nan=False), min_size=3, max_size=3),
    st.lists(st.floats(-5, 5, allow_nan=False), min_size=3, max_size=3),
    st.floats(1e-9, 1e9),
).filter(lambda p: np.linalg.norm(p[0]) > 1e-3 and np.linalg.norm(p[1]) > 1e-3)


@settings(max_examples=200, deadline=None)
@given(single_pairs)
def test_single_pair_gives_the_shortest_arc(pair):
    m, t, w = np.array(pair[0]), np.array(pair[1]), pair[2]
    q = rotation_of([m], [t], [w])
    mu, tu = m / np.linalg.norm(m), t / np.linalg.norm(t)
    cos = float(np.clip(mu @ tu, -1, 1))
    if cos < -1 + 1e-8:
        return  # the antiparallel case has its own test
    np.testing.assert_allclose(quat.rotate(q, mu), tu, atol=1e-6)
    # Every turn taking m onto t fits; the 1e-9 bias toward identity picks the shortest, but its
    # eigen-gap shrinks with (1 + cos) near antiparallel, and so does the precision of the pick.
    assert quat.angle(q) == pytest.approx(math.acos(cos), abs=1e-6 if 1 + cos > 1e-4 else 1e-4)


@pytest.mark.parametrize("m", [(1, 0, 0), (0, 1, 0), (0, 0, 2), (0.3, -0.4, 0.5)])
def test_antiparallel_single_pair_is_a_finite_half_turn(m):
    m = np.array(m, float)
    q = rotation_of([m], [-2.5 * m], [1.0])
    assert quat.angle(q) == pytest.approx(math.pi, abs=1e-9)
    np.testing.assert_allclose(quat.rotate(q, m), -m, atol=1e-9)


def test_collinear_sets_are_finite_and_optimal():
    line_m = np.array([1.0, 0.2, -0.3])
    line_t = np.array([-0.2, 0.5, 1.0])
    moved = np.outer([1.0, 2.0, -1.5, 0.5], line_m)
    targets = np.outer([1.1, 1.8, -1.4, 0.6], line_t)
    weights = np.array([1.0, 2.0, 0.5, 3.0])
    q = rotation_of(moved, targets, weights)
    best = weighted_fit(moved, targets, weights, kabsch_rotation(moved, targets, weights))
    assert objective(moved, targets, weights, q) <= best + 1e-9 * scale_of(moved, targets, weights)


def test_collinear_perfect_fit_is_found_by_e0_too():
    """e0 is exact for a perfect fit, so even the approximation must land on the line."""
    moved = np.outer([1.0, 2.0, -1.5], [1.0, 0.2, -0.3])
    turn = Rotation.from_rotvec([0.3, -1.2, 0.4])
    targets = turn.apply(moved)
    q = rotation_of(moved, targets, np.ones(3), exact=False)
    np.testing.assert_allclose(quat.rotate(q, moved), targets, atol=1e-7)


def test_collinear_exact_picks_the_smallest_rotation():
    """The roll about the line is free; exact mode must not add one (the bone would spin)."""
    moved = np.outer([1.0, 2.0, -1.0], [1.0, 0.0, 0.0])
    targets = np.outer([1.0, 2.0, -1.0], [0.0, 1.0, 0.0])
    q = rotation_of(moved, targets, np.ones(3))
    assert quat.angle(q) == pytest.approx(math.pi / 2, abs=1e-6)


@pytest.mark.parametrize("exact", [True, False])
def test_zero_vectors_zero_weights_and_empty_sets_give_identity(exact):
    assert np.allclose(rotation_of(np.zeros((3, 3)), np.zeros((3, 3)), np.ones(3), exact), [1, 0, 0, 0])
    assert np.allclose(rotation_of(np.zeros((1, 3)), [[1.0, 2, 3]], [1.0], exact), [1, 0, 0, 0])
    assert np.allclose(rotation_of([[1.0, 0, 0]], [[0, 1.0, 0]], [0.0], exact), [1, 0, 0, 0])
    empty = qcp_rotations(np.zeros((1, 0, 3)), np.zeros((1, 0, 3)), np.zeros((1, 0)), exact)
    np.testing.assert_allclose(empty, [[1, 0, 0, 0]])


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_extreme_weights_stay_finite_and_optimal(seed):
    rng = np.random.default_rng(seed)
    moved, targets, _ = random_set(seed, 5, 0.0)
    weights = rng.choice([1e-9, 1e-3, 1.0, 1e3, 1e9], size=5)
    for exact in (True, False):
        q = rotation_of(moved, targets, weights, exact=exact)
        assert np.all(np.isfinite(q))
    q = rotation_of(moved, targets, weights)
    best = weighted_fit(moved, targets, weights, kabsch_rotation(moved, targets, weights))
    assert objective(moved, targets, weights, q) <= best + 1e-8 * scale_of(moved, targets, weights)


def test_kabsch_never_returns_a_reflection():
    rng = np.random.default_rng(1)
    moved = rng.normal(size=(5, 3))
    targets = moved * np.array([1.0, 1.0, -1.0])  # a mirror image: the best proper rotation differs
    r = kabsch_rotation(moved, targets, np.ones(5))
    assert np.linalg.det(r) == pytest.approx(1.0)
    np.testing.assert_allclose(r.T @ r, np.eye(3), atol=1e-12)


@pytest.mark.parametrize("t", [(0.0, 1.0, 0.0), (0.6, 0.8, 0.0), (-0.6, 0.8, 0.0), (0.0, 0.6, 0.8)])
def test_e0_single_pair_gives_the_shortest_arc_too(t):
    """The docstring promises the smallest rotation for a non-unique optimum in both modes.

    With |m| = |t| the e0 eigenvalue is exact and the top eigenspace is two-dimensional, so the
    adjugate vanishes; returning a half turn about the bisector instead of the shortest arc makes a
    dampened bone step turn about the wrong axis (the solver then stalls on position-only pins).
    """
    m = np.array([1.0, 0.0, 0.0])
    q = rotation_of([m], [t], [1.0], exact=False)
    np.testing.assert_allclose(quat.rotate(q, m), t, atol=1e-9)
    assert quat.angle(q) == pytest.approx(math.acos(np.dot(m, t)), abs=1e-6)


@pytest.mark.parametrize("seed", range(8))
def test_one_covariance_gives_the_batched_rotation(seed):
    """`rotation_from_covariance` (eigh, one matrix) and the batched closed form agree, ties and
    zero covariances included (the same bias toward the smallest turn settles them)."""
    rng = np.random.default_rng(seed)
    cases = [rng.normal(size=(3, 3)), np.outer(rng.normal(size=3), rng.normal(size=3)), np.zeros((3, 3))]
    for s in cases:
        one = rotation_from_covariance(s)
        batched = rotations_from_covariance(s[None])[0]
        assert abs(one @ batched) == pytest.approx(1.0, abs=1e-9)
