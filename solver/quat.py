"""Quaternion helpers on numpy arrays, (w, x, y, z) Hamilton convention.

Every function broadcasts over leading dimensions so that a batch of bones is
handled by one call; the solver never loops over bones to do rotation maths.
"""

import numpy as np

IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])
_EPS = 1e-12


def multiply(a, b):
    """Hamilton product a * b (apply b first, then a)."""
    aw, ax, ay, az = np.moveaxis(np.asarray(a, dtype=float), -1, 0)
    bw, bx, by, bz = np.moveaxis(np.asarray(b, dtype=float), -1, 0)
    return np.stack(
        (
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ),
        axis=-1,
    )


def conjugate(q):
    """Inverse of a unit quaternion."""
    q = np.asarray(q, dtype=float)
    return q * np.array([1.0, -1.0, -1.0, -1.0])


def normalize(q):
    """Unit quaternion with w >= 0; a zero quaternion becomes identity."""
    q = np.asarray(q, dtype=float)
    n = np.linalg.norm(q, axis=-1, keepdims=True)
    out = np.where(n > _EPS, q / np.where(n > _EPS, n, 1.0), IDENTITY)
    return np.where(out[..., :1] < 0.0, -out, out)


def rotate(q, v):
    """Rotate vectors v by unit quaternions q (broadcasting)."""
    q = np.asarray(q, dtype=float)
    v = np.asarray(v, dtype=float)
    w = q[..., :1]
    u = q[..., 1:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def from_axis_angle(axis, angle):
    """Rotation by angle (radians) about axis (normalized here)."""
    axis = np.asarray(axis, dtype=float)
    angle = np.asarray(angle, dtype=float)
    n = np.linalg.norm(axis, axis=-1, keepdims=True)
    axis = axis / np.where(n > _EPS, n, 1.0)
    half = 0.5 * angle[..., None]
    return np.concatenate((np.cos(half), np.sin(half) * axis), axis=-1)


def angle(q):
    """Rotation angle in [0, pi] of unit quaternions."""
    q = np.asarray(q, dtype=float)
    w = np.abs(q[..., 0])
    xyz = np.linalg.norm(q[..., 1:], axis=-1)
    return 2.0 * np.arctan2(xyz, w)


def to_matrix(q):
    """3x3 rotation matrices of unit quaternions."""
    w, x, y, z = np.moveaxis(np.asarray(q, dtype=float), -1, 0)
    return np.stack(
        (
            np.stack((1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)), -1),
            np.stack((2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)), -1),
            np.stack((2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)), -1),
        ),
        axis=-2,
    )


def from_matrix(m):
    """Unit quaternions (w >= 0) of 3x3 rotation matrices, via the 4x4 eigen form.

    The symmetric-matrix route is exact for orthonormal input and returns the
    nearest rotation for slightly non-orthonormal input (float32 round trips).
    """
    m = np.asarray(m, dtype=float)
    xx, xy, xz = m[..., 0, 0], m[..., 0, 1], m[..., 0, 2]
    yx, yy, yz = m[..., 1, 0], m[..., 1, 1], m[..., 1, 2]
    zx, zy, zz = m[..., 2, 0], m[..., 2, 1], m[..., 2, 2]
    k = np.stack(
        (
            np.stack((xx + yy + zz, zy - yz, xz - zx, yx - xy), -1),
            np.stack((zy - yz, xx - yy - zz, xy + yx, xz + zx), -1),
            np.stack((xz - zx, xy + yx, yy - xx - zz, yz + zy), -1),
            np.stack((yx - xy, xz + zx, yz + zy, zz - xx - yy), -1),
        ),
        axis=-2,
    )
    _, vectors = np.linalg.eigh(k)
    return normalize(vectors[..., :, -1])


def shortest_arc(u, v):
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
        q[flip] = np.concatenate(
            (np.zeros(u[flip].shape[:-1] + (1,)), perpendicular(u[flip])), axis=-1
        )
    q = normalize(q)
    return np.where(ok, q, IDENTITY)


def perpendicular(v):
    """A unit vector perpendicular to each v (any, but deterministic)."""
    v = np.asarray(v, dtype=float)
    a = np.where(
        (np.abs(v[..., :1]) < 0.9), np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])
    )
    p = np.cross(v, a)
    n = np.linalg.norm(p, axis=-1, keepdims=True)
    return np.where(n > _EPS, p / np.where(n > _EPS, n, 1.0), np.array([0.0, 0.0, 1.0]))


def swing_twist(q, axis=(0.0, 1.0, 0.0)):
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


def from_euler(angles, order="XYZ"):
    """Quaternion of Blender Euler angles; order as in rotation_mode ("XYZ": X applied first)."""
    angles = np.asarray(angles, dtype=float)
    axes = {"X": (1.0, 0.0, 0.0), "Y": (0.0, 1.0, 0.0), "Z": (0.0, 0.0, 1.0)}
    q = None
    for letter in order:
        r = from_axis_angle(np.broadcast_to(axes[letter], angles.shape), angles[..., "XYZ".index(letter)])
        q = r if q is None else multiply(r, q)
    return q
