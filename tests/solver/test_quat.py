"""Quaternion helpers against scipy's Rotation, plus the special cases scipy does not cover."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation, Slerp

from solver import quat
from tests.solver.conftest import random_unit_quaternions, same_rotation, scipy_rotation, wxyz

RNG_SEEDS = range(5)
vectors = st.lists(st.floats(-10, 10, allow_nan=False), min_size=3, max_size=3).map(np.array)


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_multiply_matches_scipy_composition(seed):
    rng = np.random.default_rng(seed)
    a, b = random_unit_quaternions(rng, 50), random_unit_quaternions(rng, 50)
    product = quat.multiply(a, b)
    expected = wxyz(scipy_rotation(a) * scipy_rotation(b))
    assert product.shape == (50, 4)
    assert same_rotation(product, expected)
    v = rng.normal(size=(50, 3))
    np.testing.assert_allclose(quat.rotate(product, v), quat.rotate(a, quat.rotate(b, v)), atol=1e-12)


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_part_way_is_scipys_slerp_along_the_shortest_arc(seed):
    rng = np.random.default_rng(seed)
    a, b = random_unit_quaternions(rng, 40), random_unit_quaternions(rng, 40)
    shares = rng.uniform(0.0, 1.0, size=(3, 40))
    got = quat.part_way(a, b, shares)
    assert got.shape == (3, 40, 4) and (got[..., 0] >= 0.0).all()
    for k in range(40):
        slerp = Slerp([0.0, 1.0], scipy_rotation(np.stack((a[k], b[k]))))
        assert same_rotation(got[:, k], wxyz(slerp(shares[:, k])))
    assert same_rotation(quat.part_way(a, b, 0.0), a) and same_rotation(quat.part_way(a, b, 1.0), b)
    assert same_rotation(quat.part_way(a, a, 0.5), a)


def test_multiply_is_hamilton_with_known_products():
    i, j, k = np.eye(4)[1], np.eye(4)[2], np.eye(4)[3]
    np.testing.assert_allclose(quat.multiply(i, j), k)
    np.testing.assert_allclose(quat.multiply(j, i), -k)
    np.testing.assert_allclose(quat.multiply(i, i), [-1, 0, 0, 0])


def test_multiply_broadcasts_one_against_many():
    rng = np.random.default_rng(7)
    a = random_unit_quaternions(rng, 1)[0]
    b = random_unit_quaternions(rng, 6).reshape(2, 3, 4)
    out = quat.multiply(a, b)
    assert out.shape == (2, 3, 4)
    np.testing.assert_allclose(out[1, 2], quat.multiply(a, b[1, 2]))


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_rotate_and_to_matrix_match_scipy(seed):
    rng = np.random.default_rng(seed)
    q = random_unit_quaternions(rng, 40)
    v = rng.normal(size=(40, 3))
    np.testing.assert_allclose(quat.rotate(q, v), scipy_rotation(q).apply(v), atol=1e-12)
    np.testing.assert_allclose(quat.to_matrix(q), scipy_rotation(q).as_matrix(), atol=1e-12)
    np.testing.assert_allclose(quat.to_matrix(-q), scipy_rotation(q).as_matrix(), atol=1e-12)


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_from_matrix_matches_scipy_with_nonnegative_w(seed):
    r = Rotation.random(40, random_state=seed)
    q = quat.from_matrix(r.as_matrix())
    assert np.all(q[:, 0] >= 0)
    np.testing.assert_allclose(np.linalg.norm(q, axis=-1), 1.0, atol=1e-12)
    assert same_rotation(q, wxyz(r))
    np.testing.assert_allclose(quat.to_matrix(q), r.as_matrix(), atol=1e-12)


def test_from_matrix_of_half_turns_and_identity():
    for axis in np.eye(3):
        m = Rotation.from_rotvec(math.pi * axis).as_matrix()
        q = quat.from_matrix(m)
        np.testing.assert_allclose(quat.to_matrix(q), m, atol=1e-12)
    np.testing.assert_allclose(quat.from_matrix(np.eye(3)), [1, 0, 0, 0], atol=1e-15)


def test_from_matrix_of_float32_roundtrip_is_close_and_unit():
    r = Rotation.random(20, random_state=3)
    m = r.as_matrix().astype(np.float32).astype(float)
    q = quat.from_matrix(m)
    np.testing.assert_allclose(np.linalg.norm(q, axis=-1), 1.0, atol=1e-12)
    assert same_rotation(q, wxyz(r), atol=1e-6)


def test_conjugate_inverts_and_normalize_canonicalizes():
    rng = np.random.default_rng(11)
    q = random_unit_quaternions(rng, 30)
    np.testing.assert_allclose(
        quat.multiply(q, quat.conjugate(q)), np.tile([1, 0, 0, 0], (30, 1)), atol=1e-12
    )
    n = quat.normalize(q * rng.uniform(0.1, 10, size=(30, 1)))
    assert np.all(n[:, 0] >= 0)
    assert same_rotation(n, q)
    np.testing.assert_allclose(quat.normalize([0.0, 0, 0, 0]), [1, 0, 0, 0])
    np.testing.assert_allclose(quat.normalize([[-2.0, 0, 0, 0]]), [[1, 0, 0, 0]])


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_from_axis_angle_and_angle_match_rotvec(seed):
    rng = np.random.default_rng(seed)
    axis = rng.normal(size=(30, 3))
    angle = rng.uniform(-math.pi, math.pi, size=30)
    unit = axis / np.linalg.norm(axis, axis=-1, keepdims=True)
    q = quat.from_axis_angle(axis, angle)
    assert same_rotation(q, wxyz(Rotation.from_rotvec(unit * angle[:, None])))
    np.testing.assert_allclose(quat.angle(q), np.abs(angle), atol=1e-12)
    np.testing.assert_allclose(quat.angle(-q), np.abs(angle), atol=1e-12)


ORDERS = ["XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX"]


@pytest.mark.parametrize("order", ORDERS)
def test_euler_orders_as_blender_defines_them(order):
    """Blender's order names the axes in the order they are applied: scipy's extrinsic sequence."""
    rng = np.random.default_rng(ORDERS.index(order))
    angles = rng.uniform(-math.pi, math.pi, size=(25, 3))
    q = quat.from_euler(angles, order)
    in_order = angles[:, ["XYZ".index(c) for c in order]]
    expected = Rotation.from_euler(order.lower(), in_order)
    assert same_rotation(q, wxyz(expected))


def test_euler_xyz_matrix_is_rz_ry_rx():
    """Blender: Euler((x, y, z), 'XYZ').to_matrix() == Rz(z) @ Ry(y) @ Rx(x)."""
    x, y, z = 0.3, -1.1, 2.0
    rx = np.array([[1, 0, 0], [0, math.cos(x), -math.sin(x)], [0, math.sin(x), math.cos(x)]])
    ry = np.array([[math.cos(y), 0, math.sin(y)], [0, 1, 0], [-math.sin(y), 0, math.cos(y)]])
    rz = np.array([[math.cos(z), -math.sin(z), 0], [math.sin(z), math.cos(z), 0], [0, 0, 1]])
    np.testing.assert_allclose(quat.to_matrix(quat.from_euler([x, y, z], "XYZ")), rz @ ry @ rx, atol=1e-12)


# ------------------------------------------------------------------------ shortest arc


@settings(max_examples=200, deadline=None)
@given(vectors, vectors)
def test_shortest_arc_maps_u_onto_v_by_the_smallest_angle(u, v):
    nu, nv = np.linalg.norm(u), np.linalg.norm(v)
    q = quat.shortest_arc(u, v)
    assert np.all(np.isfinite(q))
    assert abs(np.linalg.norm(q) - 1.0) < 1e-12
    if nu < 1e-6 or nv < 1e-6:
        return
    cos = np.clip(np.dot(u, v) / (nu * nv), -1, 1)
    tol = 1e-9 if cos > -1 + 1e-6 else 1e-4
    np.testing.assert_allclose(quat.rotate(q, u / nu), v / nv, atol=tol)
    assert abs(quat.angle(q) - math.acos(cos)) < max(tol, 1e-7)
    if cos > -1 + 1e-6:
        assert abs(np.dot(q[1:], u)) < 1e-9 * nu and abs(np.dot(q[1:], v)) < 1e-9 * nv


@pytest.mark.parametrize("u", [(1, 0, 0), (0, 1, 0), (0, 0, 1), (0.3, -0.5, 0.8), (-2, 0, 0)])
def test_shortest_arc_of_antiparallel_vectors_is_a_finite_half_turn(u):
    u = np.asarray(u, float)
    q = quat.shortest_arc(u, -3.0 * u)
    assert np.all(np.isfinite(q))
    assert abs(quat.angle(q) - math.pi) < 1e-9
    np.testing.assert_allclose(quat.rotate(q, u), -u, atol=1e-12)


@pytest.mark.parametrize("offset", [1e-3, 1e-4, 3e-5, 1e-6, 1e-9])
def test_shortest_arc_near_antiparallel_stays_close(offset):
    """Within ~4.5e-5 rad of antiparallel the result snaps to an exact half turn (error = offset)."""
    u = np.array([1.0, 0.0, 0.0])
    v = np.array([-1.0, offset, 0.0]) / np.hypot(1.0, offset)
    q = quat.shortest_arc(u, v)
    np.testing.assert_allclose(np.linalg.norm(q), 1.0, atol=1e-12)
    np.testing.assert_allclose(quat.rotate(q, u), v, atol=1e-4)


def test_shortest_arc_batch_mixes_antiparallel_and_ordinary_rows():
    u = np.array([[1.0, 0, 0], [0, 1, 0], [0, 0, 1]])
    v = np.array([[-1.0, 0, 0], [1, 0, 0], [0, 0, 1]])
    q = quat.shortest_arc(u, v)
    np.testing.assert_allclose(quat.rotate(q, u), v, atol=1e-12)
    np.testing.assert_allclose(q[2], [1, 0, 0, 0], atol=1e-15)


def test_shortest_arc_with_a_zero_vector_is_identity():
    np.testing.assert_allclose(quat.shortest_arc([0, 0, 0], [1, 2, 3]), [1, 0, 0, 0])
    np.testing.assert_allclose(quat.shortest_arc([1, 2, 3], [0, 0, 0]), [1, 0, 0, 0])
    np.testing.assert_allclose(quat.shortest_arc([0, 0, 0], [0, 0, 0]), [1, 0, 0, 0])


def test_perpendicular_is_unit_and_orthogonal():
    rng = np.random.default_rng(5)
    v = np.concatenate((rng.normal(size=(50, 3)), np.eye(3), -np.eye(3)))
    p = quat.perpendicular(v)
    np.testing.assert_allclose(np.linalg.norm(p, axis=-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.sum(p * v, axis=-1), 0.0, atol=1e-12)


# ------------------------------------------------------------------------ swing-twist


def test_swing_twist_notes_check():
    """Swing 20 deg about x times twist 50 deg about y splits back into exactly those."""
    swing = quat.from_axis_angle([1, 0, 0], math.radians(20))
    twist = quat.from_axis_angle([0, 1, 0], math.radians(50))
    s, t, a = quat.swing_twist(quat.multiply(swing, twist))
    assert same_rotation(s, swing, atol=1e-12)
    assert same_rotation(t, twist, atol=1e-12)
    assert abs(a - math.radians(50)) < 1e-12


@pytest.mark.parametrize("seed", RNG_SEEDS)
def test_swing_twist_recomposes_with_twist_about_axis_and_swing_perpendicular(seed):
    rng = np.random.default_rng(seed)
    q = random_unit_quaternions(rng, 60)
    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    swing, twist, angle = quat.swing_twist(q, axis)
    assert same_rotation(quat.multiply(swing, twist), q, atol=1e-10)
    twist_axis_part = twist[:, 1:] - np.outer(twist[:, 1:] @ axis, axis)
    np.testing.assert_allclose(twist_axis_part, 0.0, atol=1e-12)
    np.testing.assert_allclose(swing[:, 1:] @ axis, 0.0, atol=1e-10)
    assert np.all((angle > -math.pi) & (angle <= math.pi))
    np.testing.assert_allclose(quat.rotate(twist, axis), np.tile(axis, (60, 1)), atol=1e-12)
    assert same_rotation(twist, quat.from_axis_angle(np.tile(axis, (60, 1)), angle), atol=1e-10)


def test_swing_twist_at_the_singular_direction_is_finite():
    q = quat.from_axis_angle([1, 0, 0], math.pi)  # turns +Y onto -Y
    swing, twist, angle = quat.swing_twist(q)
    assert np.all(np.isfinite(swing)) and np.all(np.isfinite(twist)) and np.isfinite(angle)
    assert same_rotation(quat.multiply(swing, twist), q, atol=1e-12)


def test_empty_batches_keep_their_shape():
    """A scene without pins hands the helpers (0, 4) arrays; they must not fail on them."""
    empty = np.zeros((0, 4))
    assert quat.multiply(empty, empty).shape == (0, 4)
    assert quat.to_matrix(empty).shape == (0, 3, 3)
    assert quat.rotate(empty, np.zeros((0, 3))).shape == (0, 3)
    assert quat.normalize(empty).shape == (0, 4)
