"""Analytic two-bone IK (after Inigo Quilez's circle-intersection derivation).

Exact and branch-free, so it serves both as a fast path for limbs and as an
oracle for the iterative solver. Vectorized over leading dimensions.
"""

import numpy as np
from numpy.typing import ArrayLike

from .quat import perpendicular


def two_bone_ik(
    root: ArrayLike,
    target: ArrayLike,
    upper_length: ArrayLike,
    lower_length: ArrayLike,
    bend_direction: ArrayLike,
) -> tuple[np.ndarray, np.ndarray]:
    """Joint and end positions of a two-bone limb reaching from `root` toward `target`.

    The joint lies on the circle where the spheres |x - root| = r1 and
    |x - target| = r2 meet; `bend_direction` picks the point of that circle (the
    knee or elbow points that way). A target out of reach gives the straightened
    limb pointing at it; one too close gives the fully folded limb. Never NaN.
    """
    root = np.asarray(root, dtype=float)
    r1 = np.asarray(upper_length, dtype=float)
    r2 = np.asarray(lower_length, dtype=float)
    p = np.asarray(target, dtype=float) - root
    dist = np.linalg.norm(p, axis=-1, keepdims=True)
    bend = np.asarray(bend_direction, dtype=float)
    direction = np.where(dist > 1e-12, p / np.where(dist > 1e-12, dist, 1.0), perpendicular(bend))
    reach = np.clip(dist, np.abs(r1 - r2)[..., None], (r1 + r2)[..., None])
    p = direction * reach
    h = (reach**2)[..., 0]
    w = h + r1**2 - r2**2
    s = np.sqrt(np.maximum(4.0 * r1**2 * h - w**2, 0.0))
    side = bend - np.sum(bend * direction, axis=-1, keepdims=True) * direction
    side_len = np.linalg.norm(side, axis=-1, keepdims=True)
    side = np.where(
        side_len > 1e-12, side / np.where(side_len > 1e-12, side_len, 1.0), perpendicular(direction)
    )
    safe_h = np.where(h > 1e-24, h, 1.0)[..., None]
    joint = root + np.where(
        h[..., None] > 1e-24,
        (w[..., None] * p + s[..., None] * np.sqrt(safe_h) * side) * 0.5 / safe_h,
        r1[..., None] * side,
    )
    return joint, root + p
