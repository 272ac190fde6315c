"""The Minimizer: the rotation that best aligns weighted point pairs (Wahba's problem).

QCP builds the symmetric 4x4 key matrix K from the weighted cross-covariance and
takes the eigenvector of its exact largest eigenvalue (`top_eigenvectors`: in closed form,
with Jacobi sweeps where eigenvalues nearly repeat); the references instead use
e0 = sum(w (|m|^2 + |t|^2)) / 2, which is exact only for a perfect fit and loses about a
third of the decrease per step, so it is kept only for comparison.
"""

import numpy as np
from numpy.typing import ArrayLike

from . import quat

PREFER_SMALL = 1e-9
# The closed-form eigenvector is trusted where adj(K - lambda I), the product of the gaps to the
# other eigenvalues, exceeds this share of |K|^3; below it the Jacobi sweeps decide.
ADJUGATE_TRUST = 1e-3
NEWTON_STEPS = 20  # Newton steps on the characteristic polynomial before the fallback takes over
NEWTON_TOLERANCE = 1e-11  # a Newton step this small relative to the start ends the search (quadratic: the error left is its square)


def covariance(moved: np.ndarray, targets: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """S (B, 3, 3) with S_ab = sum(w m_a t_b) for moved/targets (B, P, 3), weights (B, P)."""
    return np.swapaxes(moved * weights[..., None], -1, -2) @ targets


def key_from_covariance(s: np.ndarray) -> np.ndarray:
    """The symmetric 4x4 key matrix of each 3x3 covariance."""
    return quat.key_matrix(s).reshape(-1, 4, 4)


def qcp_rotations(moved: ArrayLike, targets: ArrayLike, weights: ArrayLike, exact: bool = True) -> np.ndarray:
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


def _biased_keys(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(key matrices (B, 4, 4), their scales (B,)): each key with the bias toward the smallest
    turn that picks one rotation where several fit equally well."""
    k = key_from_covariance(s)
    scale = np.abs(k).max(axis=(1, 2))
    k[:, 0, 0] += PREFER_SMALL * scale
    return k, scale


def rotation_from_covariance(s: np.ndarray) -> np.ndarray:
    """The rotation (4,) of one covariance (3, 3), as `rotations_from_covariance` finds it, by
    LAPACK's eigh: for a single matrix the batched closed form pays numpy's per-call overhead
    twenty times over (120 us against 6 us), and ties are settled by the same bias."""
    k, scale = _biased_keys(s[None])
    if not scale[0] > 1e-300:
        return quat.IDENTITY.copy()
    return quat.normalize(np.linalg.eigh(k[0])[1][:, -1])


def rotations_from_covariance(s: np.ndarray, e0: np.ndarray | None = None) -> np.ndarray:
    """QCP on precomputed covariances; `e0` given selects the references' approximation."""
    k, scale = _biased_keys(s)
    if e0 is None:
        q = top_eigenvectors(k)
    else:
        q = np.linalg.eigh(k)[1][:, :, -1]
        adjugate_q, strength = adjugate_eigenvector(k - e0[:, None, None] * np.eye(4))
        # A perfect fit can leave K - e0 I with a 2D null space, where the
        # adjugate vanishes; there e0 is the exact eigenvalue anyway.
        usable = strength > 1e-6 * np.maximum(scale, 1e-300) ** 3
        q = np.where(usable[:, None], adjugate_q, q)
    q = quat.normalize(q)
    q[scale < 1e-300] = quat.IDENTITY
    return q


def top_eigenvectors(k: ArrayLike, trust: float = ADJUGATE_TRUST) -> np.ndarray:
    """The eigenvector of the largest eigenvalue of each symmetric 4x4 matrix k (B, 4, 4).

    Closed form where it is exact: Newton on the characteristic polynomial for the largest
    eigenvalue, then the null vector of K - lambda I from its adjugate. The adjugate is
    (product of the gaps to the other eigenvalues) v v^T, so its size tells how well the
    eigenvector is defined; where it is below `trust` scale^3 (repeated or nearly repeated
    eigenvalues: one point pair, collinear points, a zero matrix) the Jacobi sweeps of
    `numpy.linalg.eigh` decide instead. Returns (B, 4), unnormalized sign.
    """
    k = np.asarray(k, dtype=float)
    q, trusted = closed_form_eigenvectors(k, trust)
    if not trusted.all():
        q[~trusted] = np.linalg.eigh(k[~trusted])[1][:, :, -1]
    return q


def closed_form_eigenvectors(k: np.ndarray, trust: float = ADJUGATE_TRUST) -> tuple[np.ndarray, np.ndarray]:
    """The closed-form step of `top_eigenvectors`: (B, 4) unit vectors and (B,) trusted flags.

    Newton's root carries the polynomial's rounding (|K|^4 eps over the product of the gaps),
    so the first adjugate vector is polished once: its Rayleigh quotient is exact to the square
    of its error, and the adjugate at that eigenvalue is the answer.
    """
    shift = np.trace(k, axis1=1, axis2=2) / 4.0
    centred = k - shift[:, None, None] * np.eye(4)
    root, converged = largest_root(characteristic_polynomial(centred), eigenvalue_bound(centred))
    vector, first_strength = adjugate_eigenvector(centred - root[:, None, None] * np.eye(4))
    vector = vector / np.maximum(first_strength, 1e-300)[:, None]
    root = np.einsum("bi,bij,bj->b", vector, centred, vector)
    vector, strength = adjugate_eigenvector(centred - root[:, None, None] * np.eye(4))
    scale = np.abs(k).max(axis=(1, 2))
    trusted = converged & (np.minimum(first_strength, strength) > trust * scale**3) & (scale > 1e-300)
    return vector / np.where(trusted, strength, 1.0)[:, None], trusted


def characteristic_polynomial(b: np.ndarray) -> np.ndarray:
    """(c2, c1, c0) (B, 3) of det(x I - B) = x^4 + c2 x^2 + c1 x + c0 for traceless symmetric b."""
    b2 = b @ b
    return np.stack(
        (-0.5 * np.trace(b2, axis1=1, axis2=2), -np.einsum("bij,bji->b", b2, b) / 3.0, np.linalg.det(b)),
        axis=-1,
    )


def eigenvalue_bound(b: np.ndarray) -> np.ndarray:
    """An upper bound of each symmetric b's largest eigenvalue: the smaller of Gershgorin's and the
    Frobenius norm; Newton started there descends to the largest root without overshooting."""
    diagonal = np.diagonal(b, axis1=1, axis2=2)
    gershgorin = (diagonal + np.abs(b).sum(-1) - np.abs(diagonal)).max(-1)
    return np.minimum(gershgorin, np.sqrt((b * b).sum(axis=(1, 2))))


def largest_root(
    coefficients: np.ndarray, start: np.ndarray, steps: int = NEWTON_STEPS
) -> tuple[np.ndarray, np.ndarray]:
    """Newton from above on x^4 + c2 x^2 + c1 x + c0 (all roots real): it decreases monotonically
    to the largest root. Returns the roots (B,) and whether each converged within `steps`
    (a double root converges only linearly and is left to the fallback)."""
    c2, c1, c0 = coefficients.T
    x = start.copy()
    tiny = NEWTON_TOLERANCE * np.maximum(np.abs(start), 1e-300)
    with np.errstate(divide="ignore", invalid="ignore"):
        for _ in range(steps):
            step = (((x * x + c2) * x + c1) * x + c0) / ((4.0 * x * x + 2.0 * c2) * x + c1)
            step[~((step > 0.0) & (step < np.inf))] = 0.0
            x -= step
            if (step <= tiny).all():
                break
    return x, step <= tiny


_OTHERS = np.array([[j for j in range(4) if j != i] for i in range(4)])


def adjugate_eigenvector(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The null vector of a nearly singular symmetric M from its adjugate, and its strength.

    adj(M) = (product of M's other eigenvalues) v v^T, so its largest column is the one of its
    largest diagonal entry; that column, unnormalized, and its norm (the strength) are returned.
    """
    with np.errstate(divide="ignore", invalid="ignore"):  # LU of singular minors: their det is 0
        diagonal = np.linalg.det(m[:, _OTHERS[:, :, None], _OTHERS[:, None, :]])
        best = np.argmax(np.abs(diagonal), axis=1)
        rows = np.arange(len(m))
        minors = m[rows[:, None, None, None], _OTHERS[None, :, :, None], _OTHERS[best][:, None, None, :]]
        signs = np.where((np.arange(4)[None, :] + best[:, None]) % 2, -1.0, 1.0)
        column = signs * np.linalg.det(minors)
    return column, np.linalg.norm(column, axis=1)
