"""The native Kusudama clamp (solver/csrc/kusudama.c) against the numpy JointLimits.constrain."""

import ctypes
import math

import numpy as np
import pytest

from solver import quat
from solver.kusudama import JointLimits, Kusudama, LimitCone, TwistLimit
from solver.native_limits import NativeLimits, native_limits
from tests.solver.conftest import native_library_with, random_unit_quaternions

TOLERANCE = 1e-10
S = math.sqrt(0.5)


@pytest.fixture(scope="module")
def library():
    return native_library_with(
        "ewbik_constrain_batch",
        (
            ctypes.POINTER(NativeLimits),
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_int,
        ),
    )


def native_constrain(lib, limits, bones, rotations, iteration=0):
    bones = np.ascontiguousarray(bones, dtype=np.int32)
    out = np.array(rotations, dtype=np.float64, order="C")
    lib.ewbik_constrain_batch(
        native_limits(limits), len(bones), bones.ctypes.data, out.ctypes.data, iteration
    )
    return out


def assert_matches_numpy(lib, limits, bones, rotations, iteration=0):
    """C and numpy agree component by component; returns the C result.

    The C code follows numpy's sign choices too, so the raw quaternions are compared: stricter
    than comparing quat.normalize of both, which flips either one alone when w is near 0.
    """
    expected = limits.constrain(bones, rotations, iteration)
    got = native_constrain(lib, limits, bones, rotations, iteration)
    assert np.max(np.abs(got - expected), initial=0.0) <= TOLERANCE
    return got


def random_twist(rng):
    """None, narrow, wide, unlimited or zero-width."""
    low = rng.uniform(-3.0, 2.0)
    return [
        None,
        TwistLimit(low, low + rng.uniform(0.0, 0.2)),
        TwistLimit(low, low + rng.uniform(1.0, 5.0)),
        TwistLimit(-math.pi, math.pi),
        TwistLimit(low, low),
    ][rng.integers(5)]


def awkward_kusudama(rng):
    """0-4 cones with random directions and radii, often degenerate: radius 0 or near pi,
    nested (same or nearby direction), antiparallel; any twist; comfort 0, 0.5 or 1."""
    n = int(rng.integers(5))
    dirs = list(rng.normal(size=(n, 3)))
    radii = list(rng.uniform(0.0, 1.5, n))
    twist = random_twist(rng)
    for i in range(n):
        roll = rng.random()
        if roll < 0.15:
            radii[i] = 0.0
        elif roll < 0.25:
            radii[i] = math.pi - rng.uniform(0.0, 1e-3)
        if i and rng.random() < 0.3:
            kind = rng.integers(3)
            dirs[i] = [dirs[i - 1], dirs[i - 1] + rng.normal(0.0, 0.1, 3), -dirs[i - 1]][kind]
            if kind == 2 and twist is not None:
                # The twist is singular at minus the region's centre, which a small cone
                # opposite a large one would pull the swing onto: keep away from it.
                radii[i - 1], radii[i] = max(radii[i - 1], 0.2), max(radii[i], 0.2)
    cones = [LimitCone(d / np.linalg.norm(d), r) for d, r in zip(dirs, radii)]
    return Kusudama(cones, twist, float(rng.choice([0.0, 0.5, 1.0])))


def awkward_limits(rng, n_bones=10):
    """Mostly limited bones; some free, one with only comfort (not limited)."""
    kusudamas = {i: awkward_kusudama(rng) for i in range(n_bones) if rng.random() < 0.8}
    kusudamas[n_bones - 1] = Kusudama([], None, 1.0)
    return JointLimits(kusudamas, n_bones)


@pytest.mark.parametrize("seed", range(40))
def test_matches_numpy_on_random_kusudamas(library, seed):
    rng = np.random.default_rng(seed)
    limits = awkward_limits(rng)
    bones = rng.integers(limits.n_bones, size=300)
    q = random_unit_quaternions(rng, len(bones))
    for iteration in range(4):
        got = assert_matches_numpy(library, limits, bones, q, iteration)
        assert_matches_numpy(library, limits, bones, got, iteration)  # on the boundary


@pytest.mark.parametrize("seed", range(10))
def test_result_lies_inside_the_limits(library, seed):
    rng = np.random.default_rng(100 + seed)
    limits = awkward_limits(rng, 8)
    for iteration in range(4):
        q = random_unit_quaternions(rng, limits.n_bones)
        got = native_constrain(library, limits, np.arange(limits.n_bones), q, iteration)
        np.testing.assert_allclose(np.linalg.norm(got, axis=-1), 1.0, atol=1e-12)
        assert np.all(limits.violation(got) <= 1e-9)


def test_unlimited_bones_are_untouched(library):
    rng = np.random.default_rng(5)
    limits = awkward_limits(rng, 12)
    free = np.flatnonzero(~limits.limited)
    assert len(free) >= 2
    bones = np.repeat(free, 50)
    q = rng.normal(size=(len(bones), 4))  # not even unit: nothing may touch them
    for iteration in range(3):
        np.testing.assert_array_equal(native_constrain(library, limits, bones, q, iteration), q)


def test_rotations_inside_are_unchanged(library):
    rng = np.random.default_rng(6)
    kusudamas = {}
    for i in range(8):
        cones = [
            LimitCone(d / np.linalg.norm(d), r)
            for d, r in zip(rng.normal(size=(1 + i % 4, 3)), rng.uniform(0.4, 1.5, 1 + i % 4))
        ]
        kusudamas[i] = Kusudama(cones if i % 4 else [], TwistLimit(-2.0, 1.5) if i % 3 else None)
    limits = JointLimits(kusudamas, 8)
    inside = []
    for _ in range(100):
        q = random_unit_quaternions(rng, 8)
        mask = limits.violation(q) == 0.0
        inside += [(b, q[b]) for b in np.flatnonzero(mask)]
    assert len(inside) > 200
    bones = np.array([b for b, _ in inside])
    q = np.array([r for _, r in inside])
    np.testing.assert_array_equal(native_constrain(library, limits, bones, q), q)
    np.testing.assert_array_equal(limits.constrain(bones, q), q)


# Rotations taking +Y exactly to -centre for a cone's centre on an axis: the clamp's
# perpendicular fallbacks (and, at radius 0, the half-turn branch of the swing arc).
OPPOSITE = [
    ((0, 1, 0), [(0, 0, 0, 1), (0, 1, 0, 0), (0, math.sin(0.7), 0, math.cos(0.7)), (0, -S, 0, S)]),
    ((0, -1, 0), [(1, 0, 0, 0), (math.cos(0.4), 0, math.sin(0.4), 0), (0, 0, 1, 0)]),
    ((0, 0, 1), [(S, -S, 0, 0), (-S, S, 0, 0)]),
    ((1, 0, 0), [(S, 0, 0, S), (-S, 0, 0, -S)]),
]


@pytest.mark.parametrize("radius", [0.0, 0.3, 1.5, math.pi - 1e-3])
@pytest.mark.parametrize("comfort", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("centre, rotations", OPPOSITE)
def test_opposite_direction_fallback(library, centre, rotations, radius, comfort):
    cone, opposite = LimitCone(centre, radius), LimitCone(tuple(-c for c in centre), 0.0)
    limits = JointLimits(
        {
            0: Kusudama([cone], None, comfort),
            1: Kusudama([cone], TwistLimit(0.2, 0.4), comfort),
            2: Kusudama([cone, opposite], None, comfort),
            3: Kusudama([], TwistLimit(-0.3, 0.1), comfort),
        },
        4,
    )
    bones = np.repeat(np.arange(4), len(rotations))
    q = np.tile(np.array(rotations, dtype=float), (4, 1))
    for iteration in range(4):
        got = assert_matches_numpy(library, limits, bones, q, iteration)
        assert np.all(np.isfinite(got))


@pytest.mark.parametrize("step", [-1e-6, -1e-9, -1e-11, 0.0, 1e-11, 1e-9, 1e-6])
def test_rotations_on_a_boundary_are_decided_as_numpy_decides(library, step):
    """C tells a rotation well inside its limits without measuring its angles (`inside_cos`,
    `twist_tan`); on and around every boundary it must decide as the angle tests do."""
    radius, low, high = 0.6, -0.9, 0.4
    first = np.array([0.0, 1.0, 0.0])
    second = np.array([math.sin(1.0), math.cos(1.0), 0.0])
    kusudama = Kusudama([LimitCone(first, radius), LimitCone(second, radius)], TwistLimit(low, high))
    limits = JointLimits({0: kusudama}, 1)
    swing_angles = [radius + step, radius - step]  # about a cone's centre, and into the gap's tangent cone
    rotations = []
    for centre in (first, second):
        for angle in swing_angles:
            for side in (np.array([0.0, 0.0, 1.0]), np.array([-1.0, 0.0, 0.0]), np.array([1.0, 0.0, 0.0])):
                axis = np.cross(centre, side)
                if np.linalg.norm(axis) < 1e-9:
                    continue
                axis /= np.linalg.norm(axis)
                direction = math.cos(angle) * centre + math.sin(angle) * np.cross(axis, centre)
                swing = quat.shortest_arc(first, direction)
                rotations += [
                    quat.multiply(swing, about_y(t)) for t in (low - step, high + step, 0.5 * (low + high))
                ]
    rotations, bones = np.array(rotations), np.zeros(len(rotations), dtype=int)
    got = native_constrain(library, limits, bones, rotations)
    assert np.max(np.abs(got - limits.constrain(bones, rotations))) <= 1e-14


def about_y(angle):
    return np.array([math.cos(0.5 * angle), 0.0, math.sin(0.5 * angle), 0.0])
