"""The Minimizer's eigen solve: closed form (Newton on the characteristic polynomial, then the
adjugate) where the top eigenvector is well defined, Jacobi sweeps elsewhere; numpy and C alike.

The oracle is LAPACK's `eigh` on matrices built from chosen eigenvalues and eigenvectors, so
every case knows its answer and its gap."""

import ctypes

import numpy as np
import pytest

from solver import quat
from solver.qcp import ADJUGATE_TRUST, closed_form_eigenvectors, top_eigenvectors
from tests.solver.conftest import native_library_with
from tests.support.qcp_oracles import key_matrix


@pytest.fixture(scope="module")
def library():
    return native_library_with(
        "ewbik_top_eigenvectors",
        (
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_double,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ),
    )


def native_top_eigenvectors(lib, k):
    k = np.ascontiguousarray(k, dtype=np.float64)
    out = np.zeros((len(k), 4))
    trusted = np.zeros(len(k), dtype=np.int32)
    lib.ewbik_top_eigenvectors(k.ctypes.data, len(k), ADJUGATE_TRUST, out.ctypes.data, trusted.ctypes.data)
    return out, trusted.astype(bool)


def with_spectrum(eigenvalues, seed):
    """Symmetric matrices (B, 4, 4) with the given eigenvalues (B, 4) and random eigenvectors;
    the eigenvector of the last (largest) eigenvalue is returned too."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.normal(size=(len(eigenvalues), 4, 4)))[0]
    matrices = basis @ (np.asarray(eigenvalues)[:, :, None] * np.swapaxes(basis, 1, 2))
    return 0.5 * (matrices + np.swapaxes(matrices, 1, 2)), basis[:, :, 3]


def direction_error(a, b):
    """Distance between unit vectors up to sign (q and -q are one rotation)."""
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return np.minimum(np.abs(a - b).max(1), np.abs(a + b).max(1))


def well_separated(seed, count=200):
    rng = np.random.default_rng(seed)
    eigenvalues = np.sort(rng.uniform(-1.0, 1.0, (count, 4)), axis=1)
    eigenvalues[:, 3] = eigenvalues[:, 2] + rng.uniform(0.1, 1.0, count)
    eigenvalues[:, :3] -= rng.uniform(0.05, 0.3, (count, 1)) * np.array([2.0, 1.0, 0.0])
    return with_spectrum(eigenvalues * rng.uniform(1e-3, 1e3, (count, 1)), seed)


@pytest.mark.parametrize("seed", [0, 1])
def test_well_separated_spectra_take_the_closed_form_and_match_jacobi(seed):
    k, truth = well_separated(seed)
    closed, trusted = closed_form_eigenvectors(k)
    assert trusted.all()
    jacobi = np.linalg.eigh(k)[1][:, :, -1]
    assert direction_error(closed, jacobi).max() < 1e-12
    assert direction_error(closed, truth).max() < 1e-12
    np.testing.assert_allclose(np.linalg.norm(closed, axis=1), 1.0, atol=1e-14)


def gap_ladder():
    """Top gaps from 1 down to 1e-10 of the matrix's size: both sides of the switch."""
    gaps = 10.0 ** -np.arange(0.0, 10.5, 0.5)
    eigenvalues = np.stack(
        (np.full_like(gaps, -1.0), np.full_like(gaps, -0.4), 0.6 - gaps, np.full_like(gaps, 0.6)), 1
    )
    return gaps, *with_spectrum(eigenvalues, 7)


def test_the_switch_falls_back_as_the_top_gap_closes_and_both_sides_are_accurate():
    gaps, k, truth = gap_ladder()
    q, trusted = closed_form_eigenvectors(k)
    # the closed form holds while the gap product stays above the trust share of |K|^3 ...
    assert trusted[gaps >= 1e-2].all() and not trusted[gaps <= 1e-4].any()
    assert direction_error(q[trusted], truth[trusted]).max() < 1e-12
    # ... and on either side the answer is the true eigenvector to eigh's own accuracy (eps / gap).
    error = direction_error(top_eigenvectors(k), truth)
    assert (error < 1e-14 / gaps + 1e-14).all()


def test_repeated_top_eigenvalues_and_the_zero_matrix_fall_back_to_jacobi():
    k, _ = with_spectrum(np.array([[-1.0, -1.0, 1.0, 1.0], [-3.0, 1.0, 1.0, 1.0], [0.0, 0.0, 2.0, 2.0]]), 3)
    k = np.concatenate((k, np.zeros((1, 4, 4))))
    q, trusted = closed_form_eigenvectors(k)
    assert not trusted.any()
    top = top_eigenvectors(k)
    assert np.isfinite(top).all()
    for m, v in zip(k[:3], top[:3]):
        np.testing.assert_allclose(m @ v, np.linalg.eigvalsh(m)[-1] * v, atol=1e-12)


def half_turn_and_near_coplanar_keys():
    """QCP key matrices of exact fits: half turns about several axes, points nearly in a plane."""
    rng = np.random.default_rng(5)
    axes = np.array([[1.0, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], [0.3, -0.5, 0.8]])
    turns = np.concatenate((np.zeros((len(axes), 1)), axes / np.linalg.norm(axes, axis=1, keepdims=True)), 1)
    flat = rng.normal(size=(3, 5, 3)) * np.array([1.0, 1.0, 1e-7])
    tilts = quat.normalize(rng.normal(size=(3, 4)))
    rotations = np.concatenate((turns, tilts))
    moved = np.concatenate((np.broadcast_to(rng.normal(size=(5, 3)), (len(axes), 5, 3)), flat))
    targets = quat.rotate(rotations[:, None, :], moved)
    return key_matrix(moved, targets, np.ones(moved.shape[:2])), rotations


def test_half_turns_and_near_coplanar_points_give_the_exact_rotation_in_closed_form():
    k, rotations = half_turn_and_near_coplanar_keys()
    q, trusted = closed_form_eigenvectors(k)
    assert trusted.all()
    assert direction_error(q, rotations).max() < 1e-12


def test_c_takes_the_same_branch_and_gives_the_same_vector_as_numpy(library):
    gaps, ladder, _ = gap_ladder()
    unique = np.concatenate((well_separated(2)[0], half_turn_and_near_coplanar_keys()[0]))
    k = np.concatenate((unique, ladder, np.zeros((1, 4, 4))))
    c_q, c_trusted = native_top_eigenvectors(library, k)
    assert (c_trusted == closed_form_eigenvectors(k)[1]).all()
    numpy_q = top_eigenvectors(k)
    assert direction_error(c_q[: len(unique)], numpy_q[: len(unique)]).max() < 1e-12
    ladder_error = direction_error(c_q[len(unique) : -1], numpy_q[len(unique) : -1])
    assert (ladder_error < 1e-14 / gaps + 1e-12).all()
    np.testing.assert_allclose(np.linalg.norm(c_q, axis=1), 1.0, atol=1e-14)
