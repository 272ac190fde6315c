"""The compiled loop (solver/csrc) against the numpy loop: the same poses, step for step.

Without Anderson acceleration both loops do the same floating-point work in nearly the
same order, so poses agree to rounding. Acceleration solves a small least-squares problem
whose rounding differs between LAPACK and the C code; its first extrapolations still agree
closely, and later ones may pick another of the equally good poses of a redundant
skeleton, so there the tests compare errors, not poses.
"""

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from bench import bench_solver
from solver import JointLimits, Kusudama, LimitCone, Pin, SolverSettings, TwistLimit, native, solve
from tests.solver.conftest import translation
from tests.solver.test_mocap import CLIPS
from tests.solver.test_solve import random_problem

AGREE = settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def test_the_native_loop_is_built():
    assert native.available(), "solver/_ewbik_native.* is missing: run `python tools/build_native.py` (or make native)"


def both(skeleton, pins, rotations, locations, config, **kwargs):
    a = solve(skeleton, pins, rotations, locations, dataclasses.replace(config, backend="numpy"), **kwargs)
    b = solve(skeleton, pins, rotations, locations, dataclasses.replace(config, backend="native"), **kwargs)
    return a, b


def assert_same_solve(a, b, atol=1e-6):
    """Same pose and errors; the same iteration count unless both met their targets to rounding,
    where the stall rule compares rounding noise.

    Rounding differs (LAPACK's eigh against Jacobi sweeps), and where a bone's best turn is not
    unique the solver's 1e-9 bias toward the smallest turn leaves an eigen-gap of 1e-9, so
    rounding shows up at ~1e-7 there; real differences are orders of magnitude larger.
    """
    if max(a.position_errors.max(initial=0.0), b.position_errors.max(initial=0.0)) > 1e-9:
        assert (a.iterations, a.converged) == (b.iterations, b.converged)
    np.testing.assert_allclose(canonical(b.rotations), canonical(a.rotations), atol=atol)
    np.testing.assert_allclose(b.locations, a.locations, atol=atol)
    np.testing.assert_allclose(b.position_errors, a.position_errors, atol=atol)
    np.testing.assert_allclose(b.orientation_errors_deg, a.orientation_errors_deg, atol=4 * np.degrees(atol))
    np.testing.assert_array_equal(b.moved, a.moved)


def canonical(q):
    """q and -q are one rotation; the loops may keep either sign where nothing normalizes."""
    return q * np.where(q[:, :1] < 0.0, -1.0, 1.0)


def random_stiffness(rng, n):
    return np.where(rng.random(n) < 0.2, 1.0, rng.choice([0.0, 0.0, 0.5], size=n))


@AGREE
@given(st.integers(0, 2**32 - 1), st.integers(1, 12), st.integers(1, 4), st.booleans(), st.booleans(), st.booleans())
def test_plain_sweeps_match_numpy(seed, n_bones, n_pins, translate_root, exact, analytic_limbs):
    skeleton, pins, rotations, locations, rng = random_problem(seed, n_bones, n_pins)
    config = SolverSettings(iterations=int(rng.integers(1, 25)), acceleration=0, analytic_limbs=analytic_limbs,
                            translate_root=translate_root, exact=exact, tolerance=float(rng.choice([0.0, 1e-5])),
                            dampening=float(rng.uniform(0.02, math.pi)),
                            stabilization_passes=int(rng.integers(0, 2)))
    a, b = both(skeleton, pins, rotations, locations, config, stiffness=random_stiffness(rng, n_bones))
    assert_same_solve(a, b)


@AGREE
@given(st.integers(0, 2**32 - 1), st.integers(2, 12), st.integers(1, 3))
def test_the_first_accelerated_sweeps_match_numpy(seed, n_bones, n_pins):
    skeleton, pins, rotations, locations, rng = random_problem(seed, n_bones, n_pins)
    config = SolverSettings(iterations=3, tolerance=0.0, translate_root=bool(rng.integers(0, 2)))
    a, b = both(skeleton, pins, rotations, locations, config)
    assert_same_solve(a, b, atol=1e-4)


def random_kusudama(rng):
    cones = []
    for _ in range(int(rng.integers(0, 4))):
        direction = rng.normal(size=3)
        cones.append(LimitCone(direction / np.linalg.norm(direction), float(rng.uniform(0.05, 1.2))))
    twist = None
    if rng.random() < 0.6:
        low = float(rng.uniform(-1.5, 0.0))
        twist = TwistLimit(low, low + float(rng.uniform(0.0, 2.0)))
    return Kusudama(cones, twist, comfort=float(rng.choice([0.0, 0.0, 0.5])))


@AGREE
@given(st.integers(0, 2**32 - 1), st.integers(2, 10), st.integers(1, 3), st.booleans())
def test_limited_sweeps_match_numpy(seed, n_bones, n_pins, accelerated):
    skeleton, pins, rotations, locations, rng = random_problem(seed, n_bones, n_pins)
    limited = rng.choice(n_bones, size=int(rng.integers(1, n_bones + 1)), replace=False)
    limits = JointLimits({int(b): random_kusudama(rng) for b in limited}, n_bones)
    config = SolverSettings(iterations=3 if accelerated else int(rng.integers(1, 20)),
                            acceleration=3 if accelerated else 0, tolerance=0.0)
    a, b = both(skeleton, pins, rotations, locations, config, limits=limits)
    assert_same_solve(a, b)
    assert limits.violation(b.rotations)[b.moved].max() <= 1e-6


def test_mocap_frames_reach_their_targets_with_both_loops():
    """Full default settings on real frames: the same accuracy either way."""
    clip = bench_solver.load_clip(CLIPS[0], 32)
    stiffness = np.zeros(len(clip.skeleton))
    stiffness[clip.skeleton.index[bench_solver.HIPS]] = 1.0
    config = SolverSettings(iterations=50)
    errors = {"numpy": [], "native": []}
    for backend in errors:
        previous = None
        for row in range(len(clip.frames)):
            rotations, locations = bench_solver.hips_given_start(clip, row, previous)
            pins = bench_solver.frame_pins(clip, row)
            result = solve(clip.skeleton, pins, rotations, locations, dataclasses.replace(config, backend=backend),
                           stiffness=stiffness)
            previous = result.rotations
            errors[backend].append(result.position_errors)
    for backend, values in errors.items():
        assert np.percentile(np.concatenate(values[1:]), 95) < 5e-4, backend


def test_a_zero_time_budget_runs_one_iteration():
    skeleton, pins, rotations, locations, _ = random_problem(3, 8, 2)
    pins = [Pin(pins[0].bone, translation((40.0, 0.0, 0.0)))]
    result = solve(skeleton, pins, rotations, locations, SolverSettings(iterations=200, time_budget_ms=0.0,
                                                                        backend="native"))
    assert result.iterations == 1


def test_asking_for_native_without_the_library_names_the_setting(monkeypatch):
    skeleton, pins, rotations, locations, _ = random_problem(1, 4, 1)
    monkeypatch.setattr(native, "_LIBRARY", None)
    with pytest.raises(ValueError, match="backend"):
        solve(skeleton, pins, rotations, locations, SolverSettings(backend="native"))
    auto = solve(skeleton, pins, rotations, locations, SolverSettings())
    assert np.all(np.isfinite(auto.rotations))


def test_unknown_backend_is_rejected():
    with pytest.raises(ValueError, match="backend"):
        SolverSettings(backend="fortran")


def test_a_library_with_other_structures_is_not_used(monkeypatch):
    """A stale build (structures changed since) falls back to numpy instead of crashing."""

    real = native.load_library()

    class StaleLibrary:
        def __init__(self, version, problem_size):
            self.ewbik_abi_version = lambda: version
            self.ewbik_problem_size = lambda: problem_size
            self.ewbik_limits_size = real.ewbik_limits_size
            self.ewbik_problem_layout = real.ewbik_problem_layout
            self.ewbik_limits_layout = real.ewbik_limits_layout
            self.ewbik_solve = real.ewbik_solve

    size = real.ewbik_problem_size()
    monkeypatch.setattr(native, "load_library", lambda: StaleLibrary(native.ABI_VERSION, size))
    assert native._checked_library() is not None
    monkeypatch.setattr(native, "load_library", lambda: StaleLibrary(native.ABI_VERSION + 1, size))
    assert native._checked_library() is None
    monkeypatch.setattr(native, "load_library", lambda: StaleLibrary(native.ABI_VERSION, size - 8))
    assert native._checked_library() is None
    monkeypatch.setattr(native, "load_library", lambda: object())
    assert native._checked_library() is None


def test_column_major_inputs_give_the_same_pose():
    skeleton, pins, rotations, locations, rng = random_problem(11, 9, 3)
    locations = rng.normal(scale=0.1, size=locations.shape)
    config = SolverSettings(iterations=10, backend="native")
    row_major = solve(skeleton, pins, rotations, locations, config)
    column_major = solve(skeleton, pins, np.asfortranarray(rotations), np.asfortranarray(locations), config)
    np.testing.assert_array_equal(column_major.rotations, row_major.rotations)
    np.testing.assert_array_equal(column_major.locations, row_major.locations)


def test_limits_for_another_skeleton_are_refused():
    skeleton, pins, rotations, locations, _ = random_problem(5, 6, 2)
    limits = JointLimits({0: Kusudama([LimitCone((0.0, 1.0, 0.0), 0.5)])}, 2)
    with pytest.raises(ValueError, match="limits: made for 2 bones, the skeleton has 6"):
        solve(skeleton, pins, rotations, locations, SolverSettings(), limits=limits)


@pytest.mark.parametrize("field, value", [("iterations", 2**31), ("acceleration", 2**32 - 1)])
def test_counts_beyond_what_the_loop_can_hold_are_refused(field, value):
    with pytest.raises(ValueError, match=field):
        SolverSettings(**{field: value})


def test_whole_floats_and_a_long_anderson_memory_work_in_both_loops():
    skeleton, pins, rotations, locations, _ = random_problem(8, 7, 2)
    config = SolverSettings(iterations=12.0, stabilization_passes=1.0, acceleration=50, tolerance=0.0)
    a, b = both(skeleton, pins, rotations, locations, config)
    assert a.iterations == b.iterations <= 12
    np.testing.assert_allclose(b.position_errors, a.position_errors, atol=1e-6)
