"""Joint limits for the tests: random Kusudamas, evenly spread directions, violations per frame.

Plain numpy and the solver's own classes, so the solver tests and the Blender tests (with the
installed extension's JointLimits) measure limits the same way.
"""

import math

import numpy as np

from solver.kusudama import JointLimits, Kusudama, LimitCone, TwistLimit


def joint_limits(names, per_bone):
    """JointLimits of the bones `names` (in this order) from {bone name: scene-document limits}."""
    index = {name: i for i, name in enumerate(names)}
    return JointLimits({index[n]: Kusudama.from_dict(d, bone=n) for n, d in per_bone.items()}, len(names))


def random_kusudama(rng, n_cones):
    """`n_cones` cones of random directions and radii (0.05 to 1.2 radians), a random twist range
    on six in ten, comfort 0.5 on one in three."""
    cones = []
    for _ in range(n_cones):
        direction = rng.normal(size=3)
        cones.append(LimitCone(direction / np.linalg.norm(direction), float(rng.uniform(0.05, 1.2))))
    twist = None
    if rng.random() < 0.6:
        low = float(rng.uniform(-1.5, 0.0))
        twist = TwistLimit(low, low + float(rng.uniform(0.0, 2.0)))
    return Kusudama(cones, twist, comfort=float(rng.choice([0.0, 0.0, 0.5])))


def fibonacci_sphere(count):
    """`count` evenly spread unit directions, poles on +Y and -Y (a fixed lattice, the same on
    every machine)."""
    k = np.arange(count) + 0.5
    y = 1.0 - 2.0 * k / count
    ring = np.sqrt(1.0 - y * y)
    turn = math.pi * (3.0 - math.sqrt(5.0)) * k
    return np.stack((ring * np.cos(turn), y, ring * np.sin(turn)), -1)


def violations(limits, rotations):
    """Radians by which each frame lies outside `limits` (a JointLimits), as the solver measures
    it: frames of every bone's rotation (F, N, 4) give (F, N); for limits of one bone, rotations
    (F, 4) give (F,)."""
    rotations = np.asarray(rotations, dtype=float)
    if rotations.ndim == 2:
        return violations(limits, rotations[:, None])[:, 0]
    return np.array([limits.violation(frame) for frame in rotations])
