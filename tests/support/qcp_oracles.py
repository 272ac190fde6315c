"""Independent checks of the Minimizer: the objective it reduces, an SVD (Kabsch) rotation, and
the key matrix as QCP builds it."""

import numpy as np

from solver.qcp import covariance, key_from_covariance


def key_matrix(moved, targets, weights):
    """K for each batch entry: moved/targets (B, P, 3), weights (B, P) -> (B, 4, 4)."""
    return key_from_covariance(covariance(moved, targets, weights))


def kabsch_rotation(moved, targets, weights):
    """Rotation matrix (3, 3) by SVD of the weighted covariance."""
    h = np.einsum("p,pi,pj->ij", np.asarray(weights, float), moved, targets)
    u, _, vt = np.linalg.svd(h)
    d = np.sign(np.linalg.det(vt.T @ u.T)) or 1.0
    return vt.T @ np.diag([1.0, 1.0, d]) @ u.T


def weighted_fit(moved, targets, weights, rotation_matrix, translation=(0.0, 0.0, 0.0)):
    """sum(w |R m + T - t|^2): the objective both minimizers reduce."""
    r = np.asarray(rotation_matrix) @ np.asarray(moved, float).T
    d = r.T + np.asarray(translation) - np.asarray(targets, float)
    return float(np.sum(np.asarray(weights, float) * (d**2).sum(-1)))
