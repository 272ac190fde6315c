"""The Minimizer: the rotation that best aligns weighted point pairs (Wahba's problem).

QCP builds the symmetric 4x4 key matrix K from the weighted cross-covariance and
takes the eigenvector of its largest eigenvalue. `numpy.linalg.eigh` gives the
exact eigenvalue for a whole batch of bones in one call; the references instead
use e0 = sum(w (|m|^2 + |t|^2)) / 2, which is exact only for a perfect fit and
loses about a third of the decrease per step, so it is kept only for comparison.
"""

import numpy as np

from . import quat

PREFER_SMALL = 1e-9


def covariance(moved, targets, weights):
    """S (B, 3, 3) with S_ab = sum(w m_a t_b) for moved/targets (B, P, 3), weights (B, P)."""
    return np.swapaxes(moved * weights[..., None], -1, -2) @ targets


def key_matrix(moved, targets, weights):
    """K for each batch entry: moved/targets (B, P, 3), weights (B, P) -> (B, 4, 4)."""
    return key_from_covariance(covariance(moved, targets, weights))


def key_from_covariance(s):
    """The symmetric 4x4 key matrix of each 3x3 covariance."""
    return quat.key_matrix(s).reshape(-1, 4, 4)


def qcp_rotations(moved, targets, weights, exact=True):
    """Rotations R (B, 4) maximizing sum(w (R m) . t) for each batch entry.

    When the optimum is not unique (one point pair, collinear points) the
    smallest such rotation is returned: a tiny bias toward identity on K picks
    it out of the degenerate eigenspace, so a bone never rolls for no reason.
    No points, zero vectors or zero weights give identity.
    """
    moved = np.asarray(moved, dtype=float)
    targets = np.asarray(targets, dtype=float)
    weights = np.asarray(weights, dtype=float)
    e0 = None
    if not exact:
        e0 = 0.5 * np.einsum("bp,bp->b", weights, (moved**2).sum(-1) + (targets**2).sum(-1))
    return rotations_from_covariance(covariance(moved, targets, weights), e0)


def rotations_from_covariance(s, e0=None):
    """QCP on precomputed covariances; `e0` given selects the references' approximation."""
    k = key_from_covariance(s)
    scale = np.abs(k).max(axis=(1, 2))
    k[:, 0, 0] += PREFER_SMALL * scale
    q = np.linalg.eigh(k)[1][:, :, -1]
    if e0 is not None:
        adjugate_q, strength = _adjugate_eigenvector(k - e0[:, None, None] * np.eye(4))
        # A perfect fit can leave K - e0 I with a 2D null space, where the
        # adjugate vanishes; there e0 is the exact eigenvalue anyway.
        usable = strength > 1e-6 * np.maximum(scale, 1e-300) ** 3
        q = np.where(usable[:, None], adjugate_q, q)
    q = quat.normalize(q)
    q[scale < 1e-300] = quat.IDENTITY
    return q


def _adjugate_eigenvector(m):
    """The largest column of adj(M) (the null vector of a nearly singular M) and its norm."""
    idx = np.arange(4)
    cof = np.empty_like(m)
    for i in range(4):
        rows = idx[idx != i]
        for j in range(4):
            cols = idx[idx != j]
            cof[:, i, j] = (-1) ** (i + j) * np.linalg.det(m[:, rows][:, :, cols])
    adj = np.swapaxes(cof, 1, 2)
    norms = np.linalg.norm(adj, axis=1)
    best = np.argmax(norms, axis=1)
    rows = np.arange(m.shape[0])
    return adj[rows, :, best], norms[rows, best]


def kabsch_rotation(moved, targets, weights):
    """Rotation matrix (3, 3) by SVD of the weighted covariance: an independent check of QCP."""
    h = np.einsum("p,pi,pj->ij", np.asarray(weights, float), moved, targets)
    u, _, vt = np.linalg.svd(h)
    d = np.sign(np.linalg.det(vt.T @ u.T)) or 1.0
    return vt.T @ np.diag([1.0, 1.0, d]) @ u.T


def weighted_fit(moved, targets, weights, rotation_matrix, translation=(0.0, 0.0, 0.0)):
    """sum(w |R m + T - t|^2): the objective both minimizers reduce."""
    r = np.asarray(rotation_matrix) @ np.asarray(moved, float).T
    d = r.T + np.asarray(translation) - np.asarray(targets, float)
    return float(np.sum(np.asarray(weights, float) * (d**2).sum(-1)))
