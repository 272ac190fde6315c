"""The compiled loop (solver/csrc) against the numpy loop: the same solves, step for step.

Both loops do the same floating-point work in nearly the same order, but their eigen-solvers
differ (LAPACK's `eigh`, whose rounding even depends on the CPU kernel OpenBLAS picks, against
Jacobi sweeps in C). What every equally good answer shares is compared tightly on every
example: the pins' position and orientation errors, the weighted misfit, limit violations.
Poses are compared only where each bone's best turn is unique: when a bone's pins weigh fewer
than two axes (position-only pins, one weighted axis, or one axis left on a translating root
once positions are centred) there is a one-parameter family of best turns, the solver's tiny
bias toward the smallest one leaves an eigen-gap that shrinks without bound as that turn nears
a half turn, and the two solvers may pick poses as far apart as rounding over that gap.
Acceleration solves a small least-squares problem whose rounding differs between LAPACK and
the C code; its first extrapolations still agree closely, later ones may pick another of the
equally good poses of a redundant skeleton, so there the tests compare errors.

The random cases are explicit seeds (CI runs only those, so a test means the same on every
machine and under every Hypothesis version); local runs also search for new ones.
"""

import dataclasses
import math
import tomllib

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from solver import (
    JointLimits,
    Kusudama,
    LimitCone,
    Pin,
    SceneError,
    SolverSettings,
    native,
    native_library,
    solve,
)
from solver.loop_constants import POLISH_AFTER
from tests.solver.conftest import (
    EXPLICIT_UNLESS_EXPLORING,
    ONE_ATTEMPT,
    REPO,
    canonical,
    pose_matrices,
    random_problem,
    translation,
)
from tests.support import mocap_frames
from tests.support.kusudamas import random_kusudama
from tests.support.mocap import CLIPS

pytestmark = pytest.mark.compares_backends

AGREE = settings(
    max_examples=40,
    deadline=None,
    phases=EXPLICIT_UNLESS_EXPLORING,
    suppress_health_check=[HealthCheck.too_slow],
)
SEEDED_CASES = 40
ERROR_ATOL = 1e-9  # metres (or the rigs' units) and radians: both loops reach the same accuracy
MISFIT_RTOL = 1e-8
TIED_MISFIT_RTOL = 1e-3


def seeded_examples(seed, *ranges):
    """`SEEDED_CASES` explicit examples, one value per argument drawn from its inclusive
    (low, high) range by a fixed generator (booleans are (0, 1))."""
    rng = np.random.default_rng(seed)
    cases = [[int(rng.integers(low, high + 1)) for low, high in ranges] for _ in range(SEEDED_CASES)]

    def decorate(test):
        for case in cases:
            test = example(*[bool(v) if r == (0, 1) else v for v, r in zip(case, ranges)])(test)
        return test

    return decorate


def test_the_native_loop_is_built():
    assert native.available(), (
        "solver/_ewbik_native.* is missing: run `python tools/build_native.py` (or make native)"
    )


def both(skeleton, pins, rotations, locations, config, **kwargs):
    a = solve(skeleton, pins, rotations, locations, dataclasses.replace(config, backend="numpy"), **kwargs)
    b = solve(skeleton, pins, rotations, locations, dataclasses.replace(config, backend="native"), **kwargs)
    return a, b


def unique_turns(pins):
    """Whether every bone step has one best turn: each pin weighs at least two of its axes,
    which fixes the rotation whatever the positions (centred away on a translating root) add."""
    return all(np.count_nonzero(pin.orientation_weights) >= 2 for pin in pins)


def weighted_misfit(skeleton, pins, result):
    """Sum over pins of weight * (|position error|^2 + sum of weighted squared axis chords),
    from the result's pose by the plain 4x4 forward kinematics of conftest."""
    parents = [None if p < 0 else skeleton.names[p] for p in skeleton.parents]
    poses = pose_matrices(skeleton.names, parents, skeleton.rest, result.rotations, result.locations)
    total = 0.0
    for pin in pins:
        pose = poses[skeleton.index[pin.bone]]
        chords = np.sum((pose[:3, :3] - pin.target[:3, :3]) ** 2, axis=0)
        total += pin.weight * (
            np.sum((pose[:3, 3] - pin.target[:3, 3]) ** 2) + np.dot(pin.orientation_weights, chords)
        )
    return total


def assert_same_solve(skeleton, pins, a, b, pose_atol=1e-6, error_atol=ERROR_ATOL):
    """Where every turn is unique: the same pose, errors and iteration count (unless both met
    their targets to rounding, where the stall rule compares rounding noise). Rounding still
    shows up at ~1e-8 in the pose (a nearly flat objective around a nearly reached target).
    Solves that end unconverged may stop iterations apart: the polish solves its linear system
    by LU in numpy and by Cholesky in C, and near a stationary point the stall rule then
    compares changes that rounding puts on either side of its threshold; the poses agree.

    Elsewhere the loops may leave a tie on different sides and go on from different, equally
    good poses, so an unfinished solve stops at a slightly different misfit (seen: 1e-5
    relative, iteration counts apart when the stall rule fires): the same accuracy to 1e-3.
    """
    np.testing.assert_array_equal(b.moved, a.moved)
    misfits = weighted_misfit(skeleton, pins, b), weighted_misfit(skeleton, pins, a)
    if not unique_turns(pins):
        np.testing.assert_allclose(*misfits, rtol=TIED_MISFIT_RTOL, atol=error_atol**2)
        return
    if max(a.position_errors.max(initial=0.0), b.position_errors.max(initial=0.0)) > 1e-9:
        assert a.converged == b.converged
        if a.converged:
            assert a.iterations == b.iterations
    np.testing.assert_allclose(b.position_errors, a.position_errors, rtol=0, atol=error_atol)
    np.testing.assert_allclose(
        np.radians(b.orientation_errors_deg), np.radians(a.orientation_errors_deg), rtol=0, atol=error_atol
    )
    np.testing.assert_allclose(*misfits, rtol=MISFIT_RTOL, atol=error_atol**2)
    np.testing.assert_allclose(canonical(b.rotations), canonical(a.rotations), rtol=0, atol=pose_atol)
    np.testing.assert_allclose(b.locations, a.locations, rtol=0, atol=pose_atol)


def random_stiffness(rng, n):
    return np.where(rng.random(n) < 0.2, 1.0, rng.choice([0.0, 0.0, 0.5], size=n))


@AGREE
@example(seed=40101, n_bones=2, n_pins=1, translate_root=True, exact=True, analytic_limbs=True)
@seeded_examples(1, (0, 2**32 - 1), (1, 12), (1, 4), (0, 1), (0, 1), (0, 1))
@given(
    st.integers(0, 2**32 - 1),
    st.integers(1, 12),
    st.integers(1, 4),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_plain_sweeps_match_numpy(seed, n_bones, n_pins, translate_root, exact, analytic_limbs):
    skeleton, pins, rotations, locations, rng = random_problem(seed, n_bones, n_pins)
    config = SolverSettings(
        iterations=int(rng.integers(1, 25)),
        acceleration=0,
        analytic_limbs=analytic_limbs,
        translate_root=translate_root,
        exact=exact,
        tolerance=float(rng.choice([0.0, 1e-5])),
        dampening=float(rng.uniform(0.02, math.pi)),
        stabilization_passes=int(rng.integers(0, 2)),
        **ONE_ATTEMPT,
    )
    a, b = both(skeleton, pins, rotations, locations, config, stiffness=random_stiffness(rng, n_bones))
    assert_same_solve(skeleton, pins, a, b)


@AGREE
@seeded_examples(2, (0, 2**32 - 1), (2, 12), (1, 3))
@given(st.integers(0, 2**32 - 1), st.integers(2, 12), st.integers(1, 3))
def test_the_first_accelerated_sweeps_match_numpy(seed, n_bones, n_pins):
    skeleton, pins, rotations, locations, rng = random_problem(seed, n_bones, n_pins)
    config = SolverSettings(iterations=3, tolerance=0.0, translate_root=bool(rng.integers(0, 2)))
    a, b = both(skeleton, pins, rotations, locations, config)
    assert_same_solve(skeleton, pins, a, b, pose_atol=1e-4, error_atol=1e-6)


@AGREE
@seeded_examples(3, (0, 2**32 - 1), (2, 10), (1, 3), (0, 1))
@given(st.integers(0, 2**32 - 1), st.integers(2, 10), st.integers(1, 3), st.booleans())
def test_limited_sweeps_match_numpy(seed, n_bones, n_pins, accelerated):
    skeleton, pins, rotations, locations, rng = random_problem(seed, n_bones, n_pins)
    limited = rng.choice(n_bones, size=int(rng.integers(1, n_bones + 1)), replace=False)
    limits = JointLimits({int(b): random_kusudama(rng, int(rng.integers(0, 4))) for b in limited}, n_bones)
    config = SolverSettings(
        iterations=3 if accelerated else int(rng.integers(1, 20)),
        acceleration=3 if accelerated else 0,
        tolerance=0.0,
        **ONE_ATTEMPT,
    )
    a, b = both(skeleton, pins, rotations, locations, config, limits=limits)
    if config.iterations <= POLISH_AFTER:
        assert_same_solve(skeleton, pins, a, b)
    else:
        # Against limits with targets out of reach there are several local minima, and the
        # polish's tries compare misfits that differ by rounding only (LU in numpy, Cholesky in
        # C), so the loops may settle in different ones: each must still have lowered the misfit.
        start = SolverSettings(iterations=1, acceleration=0, tolerance=0.0, **ONE_ATTEMPT)
        before = weighted_misfit(
            skeleton, pins, both(skeleton, pins, rotations, locations, start, limits=limits)[0]
        )
        for result in (a, b):
            assert weighted_misfit(skeleton, pins, result) <= before * (1.0 + 1e-9) + ERROR_ATOL**2
    assert limits.violation(b.rotations)[b.moved].max() <= 1e-6
    assert limits.violation(a.rotations)[a.moved].max() <= 1e-6


def test_mocap_frames_reach_their_targets_with_both_loops():
    """Full default settings on real frames: the same accuracy either way."""
    clip = mocap_frames.load_clip(CLIPS[0], 32)
    stiffness = np.zeros(len(clip.skeleton))
    stiffness[clip.skeleton.index[mocap_frames.HIPS]] = 1.0
    config = SolverSettings(iterations=50)
    errors = {"numpy": [], "native": []}
    for backend in errors:
        previous = None
        for row in range(len(clip.frames)):
            rotations, locations = mocap_frames.hips_given_start(clip, row, previous)
            pins = mocap_frames.frame_pins(clip, row)
            result = solve(
                clip.skeleton,
                pins,
                rotations,
                locations,
                dataclasses.replace(config, backend=backend),
                stiffness=stiffness,
            )
            previous = result.rotations
            errors[backend].append(result.position_errors)
    for backend, values in errors.items():
        assert np.percentile(np.concatenate(values[1:]), 95) < 5e-4, backend


def test_a_zero_time_budget_runs_one_iteration():
    skeleton, pins, rotations, locations, _ = random_problem(3, 8, 2)
    pins = [Pin(pins[0].bone, translation((40.0, 0.0, 0.0)))]
    result = solve(
        skeleton,
        pins,
        rotations,
        locations,
        SolverSettings(iterations=200, time_budget_ms=0.0, backend="native"),
    )
    assert result.iterations == 1


def test_asking_for_native_without_the_library_names_the_setting(monkeypatch):
    skeleton, pins, rotations, locations, _ = random_problem(1, 4, 1)
    monkeypatch.setattr(native, "_LIBRARY", None)
    with pytest.raises(SceneError) as caught:
        solve(skeleton, pins, rotations, locations, SolverSettings(backend="native"))
    assert caught.value.field == "settings.backend"
    auto = solve(skeleton, pins, rotations, locations, SolverSettings())
    assert np.all(np.isfinite(auto.rotations))


def test_unknown_backend_is_rejected():
    with pytest.raises(SceneError) as caught:
        SolverSettings(backend="fortran")
    assert caught.value.field == "settings.backend"


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
            self.ewbik_forward = real.ewbik_forward
            self.ewbik_balance_check = real.ewbik_balance_check

    size = real.ewbik_problem_size()
    monkeypatch.setattr(native, "load_library", lambda: StaleLibrary(native.ABI_VERSION, size))
    assert native._checked_library() is not None
    monkeypatch.setattr(native, "load_library", lambda: StaleLibrary(native.ABI_VERSION + 1, size))
    assert native._checked_library() is None
    monkeypatch.setattr(native, "load_library", lambda: StaleLibrary(native.ABI_VERSION, size - 8))
    assert native._checked_library() is None
    monkeypatch.setattr(native, "load_library", lambda: object())
    assert native._checked_library() is None
    without_forward = StaleLibrary(native.ABI_VERSION, size)
    del without_forward.ewbik_forward
    monkeypatch.setattr(native, "load_library", lambda: without_forward)
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
    with pytest.raises(SceneError, match="limits: made for 2 bones, the skeleton has 6") as caught:
        solve(skeleton, pins, rotations, locations, SolverSettings(), limits=limits)
    assert caught.value.field == "limits"


@pytest.mark.parametrize("field, value", [("iterations", 2**31), ("acceleration", 2**32 - 1)])
def test_counts_beyond_what_the_loop_can_hold_are_refused(field, value):
    with pytest.raises(SceneError) as caught:
        SolverSettings(**{field: value})
    assert caught.value.field == f"settings.{field}"


def test_whole_floats_and_a_long_anderson_memory_work_in_both_loops():
    skeleton, pins, rotations, locations, _ = random_problem(8, 7, 2)
    config = SolverSettings(
        iterations=12.0, stabilization_passes=1.0, acceleration=50, tolerance=0.0, **ONE_ATTEMPT
    )
    a, b = both(skeleton, pins, rotations, locations, config)
    assert a.iterations == b.iterations <= 12
    np.testing.assert_allclose(b.position_errors, a.position_errors, atol=1e-6)


@pytest.mark.parametrize(
    "system, machine, expected",
    [
        ("Windows", "AMD64", "windows-x64"),
        ("Windows", "ARM64", "windows-arm64"),
        ("Darwin", "x86_64", "macos-x64"),
        ("Darwin", "arm64", "macos-arm64"),
        ("Linux", "x86_64", "linux-x64"),
        ("Linux", "aarch64", "linux-arm64"),
        ("Linux", "riscv64", None),
        ("FreeBSD", "amd64", None),
    ],
)
def test_the_loader_picks_the_library_of_the_running_platform(system, machine, expected):
    assert native_library.this_platform(system, machine) == expected
    if expected is not None:
        path = native_library.library_path("pkg", expected)
        assert path.name == f"_ewbik_native-{expected}{native_library.PLATFORMS[expected]}"


def test_the_manifest_declares_every_platform_with_a_library():
    with open(REPO / "blender_manifest.toml", "rb") as f:
        declared = tomllib.load(f)["platforms"]
    assert sorted(declared) == sorted(native_library.PLATFORMS)


@pytest.mark.compares_backends
@pytest.mark.parametrize("seed", range(5))
def test_forward_kinematics_in_c_match_numpy_on_all_bones_and_on_a_chain(seed, monkeypatch):
    """`Skeleton.forward_into` in C (where the library is built) and in numpy give the same
    frames and heads, for the whole skeleton and for one bone's chain of ancestors."""
    if not native.available():
        pytest.skip("the compiled loop is not built")
    skeleton, _, rotations, _, rng = random_problem(seed, 30, 1)
    locations = rng.normal(scale=0.2, size=(len(skeleton), 3))
    chain = skeleton.kinematic_levels([int(rng.integers(len(skeleton)))])
    world, heads = np.empty((len(skeleton), 3, 3)), np.empty((len(skeleton), 3))
    assert native.forward_into(skeleton, rotations, locations, world, heads, chain)  # C took it
    answers = []
    for library in (native._LIBRARY, None):
        monkeypatch.setattr(native, "_LIBRARY", library)
        frames = []
        for levels in (None, chain):
            world, heads = np.full((len(skeleton), 3, 3), np.nan), np.full((len(skeleton), 3), np.nan)
            skeleton.forward_into(rotations, locations, world, heads, levels)
            frames.append((world, heads))
        answers.append(frames)
    for (world_c, heads_c), (world_np, heads_np) in zip(*answers):
        np.testing.assert_array_equal(np.isnan(heads_c), np.isnan(heads_np))
        np.testing.assert_allclose(world_c, world_np, rtol=0, atol=1e-12)
        np.testing.assert_allclose(heads_c, heads_np, rtol=0, atol=1e-12)


def test_a_pose_frames_on_a_chain_are_the_whole_pose_frames_on_that_chain():
    """`Skeleton.frames` with one bone's kinematic levels sets that bone's chain of ancestors as
    the whole pass does (the controls read a limb's chain so)."""
    skeleton, _, rotations, _, rng = random_problem(7, 30, 1)
    locations = rng.normal(scale=0.05, size=(len(skeleton), 3))
    world, heads = skeleton.frames(rotations, locations)
    deepest = max(range(len(skeleton)), key=lambda bone: len(skeleton.ancestors(bone)))
    chain = np.array(skeleton.ancestors(deepest)[::-1])
    assert len(chain) > 4
    chain_world, chain_heads = skeleton.frames(rotations, locations, skeleton.kinematic_levels([deepest]))
    np.testing.assert_allclose(chain_world[chain], world[chain], rtol=0, atol=1e-12)
    np.testing.assert_allclose(chain_heads[chain], heads[chain], rtol=0, atol=1e-12)
    assert skeleton.kinematic_levels([deepest]) is skeleton.kinematic_levels([deepest])
