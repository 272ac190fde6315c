"""Quaternion helpers on numpy arrays, (w, x, y, z) Hamilton convention.

Every function broadcasts over leading dimensions so that a batch of bones is
handled by one call; the solver never loops over bones to do rotation maths.
"""

import numpy as np
from numpy.typing import ArrayLike

IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])
_EPS = 1e-12


def _product_table() -> np.ndarray:
    """(16, 4) table T with (a * b) = outer(a, b).ravel() @ T: one matmul per batch."""
    table = np.zeros((4, 4, 4))
    signs = {
        (0, 0): (0, 1),
        (0, 1): (1, 1),
        (0, 2): (2, 1),
        (0, 3): (3, 1),
        (1, 0): (1, 1),
        (1, 1): (0, -1),
        (1, 2): (3, 1),
        (1, 3): (2, -1),
        (2, 0): (2, 1),
        (2, 1): (3, -1),
        (2, 2): (0, -1),
        (2, 3): (1, 1),
        (3, 0): (3, 1),
        (3, 1): (2, 1),
        (3, 2): (1, -1),
        (3, 3): (0, -1),
    }
    for (j, k), (i, sign) in signs.items():
        table[j, k, i] = sign
    return table.reshape(16, 4)


def _matrix_table() -> np.ndarray:
    """(16, 9) table M with R(q) = outer(q, q).ravel() @ M for unit q (homogeneous form)."""
    table = np.zeros((4, 4, 3, 3))
    w, x, y, z = range(4)
    entries = {
        (0, 0): [(w, w, 1), (x, x, 1), (y, y, -1), (z, z, -1)],
        (1, 1): [(w, w, 1), (x, x, -1), (y, y, 1), (z, z, -1)],
        (2, 2): [(w, w, 1), (x, x, -1), (y, y, -1), (z, z, 1)],
        (0, 1): [(x, y, 2), (w, z, -2)],
        (1, 0): [(x, y, 2), (w, z, 2)],
        (0, 2): [(x, z, 2), (w, y, 2)],
        (2, 0): [(x, z, 2), (w, y, -2)],
        (1, 2): [(y, z, 2), (w, x, -2)],
        (2, 1): [(y, z, 2), (w, x, 2)],
    }
    for (row, col), terms in entries.items():
        for i, j, c in terms:
            table[i, j, row, col] += c
    return table.reshape(16, 9)


_PRODUCT = _product_table()
_MATRIX = _matrix_table()


def _key_table() -> np.ndarray:
    """(9, 16) map from a flattened 3x3 S to the flattened symmetric 4x4 K whose top eigenvector
    is the rotation R maximizing tr(R S): QCP's key matrix, and Horn's matrix of R = S^T."""
    rows = {
        (0, 0): [(0, 0, 1), (1, 1, 1), (2, 2, 1)],
        (0, 1): [(1, 2, 1), (2, 1, -1)],
        (0, 2): [(2, 0, 1), (0, 2, -1)],
        (0, 3): [(0, 1, 1), (1, 0, -1)],
        (1, 1): [(0, 0, 1), (1, 1, -1), (2, 2, -1)],
        (1, 2): [(0, 1, 1), (1, 0, 1)],
        (1, 3): [(2, 0, 1), (0, 2, 1)],
        (2, 2): [(0, 0, -1), (1, 1, 1), (2, 2, -1)],
        (2, 3): [(1, 2, 1), (2, 1, 1)],
        (3, 3): [(0, 0, -1), (1, 1, -1), (2, 2, 1)],
    }
    table = np.zeros((3, 3, 4, 4))
    for (i, j), terms in rows.items():
        for a, b, sign in terms:
            table[a, b, i, j] = sign
            table[a, b, j, i] = sign
    return table.reshape(9, 16)


_KEY = _key_table()


def key_matrix(s: ArrayLike) -> np.ndarray:
    """The 4x4 key matrix of each 3x3 matrix s (..., 3, 3) -> (..., 4, 4)."""
    s = np.asarray(s, dtype=float)
    return (s.reshape(s.shape[:-2] + (9,)) @ _KEY).reshape(s.shape[:-2] + (4, 4))


def _outer(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    o = np.asarray(a, dtype=float)[..., :, None] * np.asarray(b, dtype=float)[..., None, :]
    return o.reshape(o.shape[:-2] + (16,))


def multiply(a: ArrayLike, b: ArrayLike) -> np.ndarray:
    """Hamilton product a * b (apply b first, then a)."""
    return _outer(a, b) @ _PRODUCT


def conjugate(q: ArrayLike) -> np.ndarray:
    """Inverse of a unit quaternion."""
    q = np.asarray(q, dtype=float)
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def normalize(q: ArrayLike) -> np.ndarray:
    """Unit quaternion with w >= 0; a zero quaternion becomes identity."""
    q = np.asarray(q, dtype=float)
    n = np.sqrt((q * q).sum(-1, keepdims=True))
    if n.min(initial=1.0) <= _EPS:
        return np.where(n > _EPS, q / np.where(n > _EPS, n, 1.0), IDENTITY) * np.where(
            q[..., :1] < 0.0, -1.0, 1.0
        )
    return q * (np.where(q[..., :1] < 0.0, -1.0, 1.0) / n)


def rotate(q: ArrayLike, v: ArrayLike) -> np.ndarray:
    """Rotate vectors v by unit quaternions q (broadcasting)."""
    v = np.asarray(v, dtype=float)
    return (to_matrix(q) @ v[..., None])[..., 0]


def from_axis_angle(axis: ArrayLike, angle: ArrayLike) -> np.ndarray:
    """Rotation by angle (radians) about axis (normalized here)."""
    axis = np.asarray(axis, dtype=float)
    angle = np.asarray(angle, dtype=float)
    n = np.linalg.norm(axis, axis=-1, keepdims=True)
    axis = axis / np.where(n > _EPS, n, 1.0)
    half = 0.5 * angle[..., None]
    return np.concatenate((np.cos(half), np.sin(half) * axis), axis=-1)


def part_way(a: ArrayLike, b: ArrayLike, share: ArrayLike) -> np.ndarray:
    """The unit rotations `share` of the way from `a` to `b` (..., 4) along the shortest arc
    (spherical interpolation; `share` (...,) broadcasts, 0 gives `a`, 1 gives `b`)."""
    return along(a, arc(a, b), share)


def arc(a: ArrayLike, b: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """(half angles (..., 1), axes (..., 3)) of the shortest turn from `a` to `b` (..., 4): what
    `along` needs, worked out once for rotations interpolated again and again."""
    turn = multiply(b, conjugate(a))
    turn = turn * np.where(turn[..., :1] < 0.0, -1.0, 1.0)
    sine = np.sqrt((turn[..., 1:] ** 2).sum(-1, keepdims=True))
    return np.arctan2(sine, turn[..., :1]), turn[..., 1:] / np.where(sine > _EPS, sine, 1.0)


def along(a: ArrayLike, turn: tuple[np.ndarray, np.ndarray], share: ArrayLike) -> np.ndarray:
    """The unit rotations `share` (...,) of the way along `turn` (`arc`'s) from `a` (..., 4)."""
    half = turn[0] * np.asarray(share, dtype=float)[..., None]
    return normalize(multiply(np.concatenate((np.cos(half), turn[1] * np.sin(half)), -1), a))


def angle(q: ArrayLike) -> np.ndarray:
    """Rotation angle in [0, pi] of unit quaternions."""
    q = np.asarray(q, dtype=float)
    w = np.abs(q[..., 0])
    xyz = np.linalg.norm(q[..., 1:], axis=-1)
    return 2.0 * np.arctan2(xyz, w)


def to_matrix(q: ArrayLike) -> np.ndarray:
    """3x3 rotation matrices of unit quaternions."""
    m = _outer(q, q) @ _MATRIX
    return m.reshape(m.shape[:-1] + (3, 3))


def rigid_matrices(rotations: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """(k, 4, 4) rigid matrices of (k, 4) unit quaternions and (k, 3) positions."""
    matrices = np.zeros((len(rotations), 4, 4))
    matrices[:, :3, :3] = to_matrix(rotations)
    matrices[:, :3, 3] = positions
    matrices[:, 3, 3] = 1.0
    return matrices


def from_matrix(m: ArrayLike) -> np.ndarray:
    """Unit quaternions (w >= 0) of 3x3 rotation matrices, via the 4x4 eigen form.

    The symmetric-matrix route is exact for orthonormal input and returns the
    nearest rotation for slightly non-orthonormal input (float32 round trips).
    """
    m = np.asarray(m, dtype=float)
    return normalize(np.linalg.eigh(key_matrix(np.swapaxes(m, -1, -2)))[1][..., :, -1])


def shortest_arc(u: ArrayLike, v: ArrayLike) -> np.ndarray:
    """Smallest rotation taking direction u to direction v.

    Antiparallel inputs get a half turn about a perpendicular axis; zero
    vectors give identity. Inputs need not be unit length.
    """
    u = np.asarray(u, dtype=float)
    v = np.asarray(v, dtype=float)
    nu = np.linalg.norm(u, axis=-1, keepdims=True)
    nv = np.linalg.norm(v, axis=-1, keepdims=True)
    ok = (nu > _EPS) & (nv > _EPS)
    u = u / np.where(ok, nu, 1.0)
    v = v / np.where(ok, nv, 1.0)
    d = np.sum(u * v, axis=-1, keepdims=True)
    c = np.cross(u, v)
    q = np.concatenate((1.0 + d, c), axis=-1)
    flip = (d < -1.0 + 1e-9)[..., 0]
    if np.any(flip):
        q = np.array(q)
        q[flip] = np.concatenate((np.zeros(u[flip].shape[:-1] + (1,)), perpendicular(u[flip])), axis=-1)
    q = normalize(q)
    return np.where(ok, q, IDENTITY)


def perpendicular(v: ArrayLike) -> np.ndarray:
    """A unit vector perpendicular to each v (any, but deterministic)."""
    v = np.asarray(v, dtype=float)
    a = np.where((np.abs(v[..., :1]) < 0.9), np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0]))
    p = np.cross(v, a)
    n = np.linalg.norm(p, axis=-1, keepdims=True)
    return np.where(n > _EPS, p / np.where(n > _EPS, n, 1.0), np.array([0.0, 0.0, 1.0]))


def swing_twist(q: ArrayLike, axis: ArrayLike = (0.0, 1.0, 0.0)) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Split q = swing * twist with twist about the unit axis.

    Returns (swing, twist, twist_angle) with twist_angle in (-pi, pi]. At the
    singular direction (q turns the axis to its opposite) the twist is identity.
    """
    q = normalize(q)
    axis = np.asarray(axis, dtype=float)
    proj = np.sum(q[..., 1:] * axis, axis=-1, keepdims=True)
    twist = np.concatenate((q[..., :1], proj * axis), axis=-1)
    n = np.linalg.norm(twist, axis=-1, keepdims=True)
    twist = np.where(n > 1e-9, twist / np.where(n > 1e-9, n, 1.0), IDENTITY)
    twist_angle = 2.0 * np.arctan2(np.sum(twist[..., 1:] * axis, axis=-1), twist[..., 0])
    twist_angle = np.where(twist_angle > np.pi, twist_angle - 2 * np.pi, twist_angle)
    twist_angle = np.where(twist_angle <= -np.pi, twist_angle + 2 * np.pi, twist_angle)
    swing = multiply(q, conjugate(twist))
    return swing, twist, twist_angle


def from_euler(angles: ArrayLike, order: str = "XYZ") -> np.ndarray:
    """Quaternion of Blender Euler angles; order as in rotation_mode ("XYZ": X applied first)."""
    angles = np.asarray(angles, dtype=float)
    axes = {"X": (1.0, 0.0, 0.0), "Y": (0.0, 1.0, 0.0), "Z": (0.0, 0.0, 1.0)}
    turns = [
        from_axis_angle(np.broadcast_to(axes[letter], angles.shape), angles[..., "XYZ".index(letter)])
        for letter in order
    ]
    q = turns[0]
    for turn in turns[1:]:
        q = multiply(turn, q)
    return q
