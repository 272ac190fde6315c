"""The EWBIK solve: the notes' whole-chain reference, analytic oracles, stopping rules, properties."""

import importlib
import math
import types

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from solver import Pin, Skeleton, SolverSettings, quat, solve
from solver.bone_step import _clamp_angle
from solver.two_bone import two_bone_ik
from solver.validation import SceneError
from tests.solver.conftest import (
    ONE_ATTEMPT,
    POSITION_ONLY,
    chain_skeleton,
    frame,
    identity_pose,
    pose_matrices,
    random_pose_targets,
    random_problem,
    random_tree,
    random_unit_quaternions,
    translation,
)

FIVE_DEGREES = math.radians(5)
LIMB_MODES = [True, False]  # analytic two-bone finish of limbs, or sweeps only
ACCELERATION_MODES = [None, 0]  # the default Anderson steps, or none


def config(analytic_limbs=True, acceleration=None, **kwargs):
    """SolverSettings with the limb finish on or off and Anderson's default depth or another."""
    if acceleration is not None:
        kwargs["acceleration"] = acceleration
    return SolverSettings(analytic_limbs=analytic_limbs, **kwargs)


SLOW = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def heads(skeleton, result):
    return skeleton.forward(result.rotations, result.locations)[1]


def seven_point_fit(skeleton, pins, rotations, locations):
    """sum over pins of the paper's seven-point misfit (origin, origin +- each weighted axis).

    Unscaled, armature space measured in the rig's own unit (Skeleton.unit, so the axis points
    sit one rig size from the origin), computed from an independent 4x4 forward pass: the
    quantity the stabilization guard protects when every bone sees every pin below it with
    factor 1.
    """
    names = list(skeleton.names)
    parents = [None if p < 0 else names[p] for p in skeleton.parents]
    poses = pose_matrices(names, parents, skeleton.rest, rotations, locations)
    total = 0.0
    for pin in pins:
        pose = poses[skeleton.index[pin.bone]]
        d_origin = (pose[:3, 3] - pin.target[:3, 3]) / skeleton.unit
        total += pin.weight * d_origin @ d_origin
        for axis, w in enumerate(pin.orientation_weights):
            d_axis = pose[:3, axis] - pin.target[:3, axis]
            total += pin.weight * w * (np.sum((d_origin + d_axis) ** 2) + np.sum((d_origin - d_axis) ** 2))
    return total


# ------------------------------------------------------------------ whole-chain reference (notes, 5)


def reference_chain():
    skeleton = chain_skeleton(4)
    pins = [Pin("root", translation((0, 0, 0))), Pin("b3", translation((1.2, 2.5, 0.7)))]
    return skeleton, pins


@pytest.mark.parametrize("analytic_limbs", LIMB_MODES)
def test_whole_chain_reference_after_300_warm_started_calls(analytic_limbs):
    skeleton, pins = reference_chain()
    rotations, locations = identity_pose(4)
    every_call = config(
        analytic_limbs, iterations=15, dampening=FIVE_DEGREES, stabilization_passes=1, tolerance=0.0
    )
    for _ in range(300):
        result = solve(skeleton, pins, rotations, locations, every_call)
        rotations, locations = result.rotations, result.locations
    world_rot, world_head = skeleton.forward(rotations, locations)
    np.testing.assert_allclose(world_head[skeleton.index["b2"]], [0.58694, 1.73367, 0.34238], atol=1e-4)
    np.testing.assert_allclose(world_head[skeleton.index["b3"]], [1.17388, 2.46735, 0.68476], atol=1e-4)
    np.testing.assert_allclose(world_head[skeleton.index["root"]], [0, 0, 0], atol=1e-12)
    direction = np.array([1.2, 1.5, 0.7]) / np.linalg.norm([1.2, 1.5, 0.7])
    np.testing.assert_allclose(world_head[2] - world_head[1], direction, atol=1e-4)
    np.testing.assert_allclose(world_head[3] - world_head[2], direction, atol=1e-4)
    assert quat.angle(world_rot[3]) < 1e-4
    assert result.position_errors[1] == pytest.approx(0.0445, abs=2e-4)


# ------------------------------------------------------------------ pins


def test_position_only_pin_moves_the_chain():
    """The Java library leaves the chain unmoved for a pin with all axis weights zero."""
    skeleton = chain_skeleton(3)
    target = np.array([0.8, 1.2, 0.5])
    rotations, locations = identity_pose(3)
    result = solve(
        skeleton,
        [Pin("b2", translation(target), orientation_weights=POSITION_ONLY)],
        rotations,
        locations,
        SolverSettings(iterations=500, tolerance=1e-9),
    )
    assert not np.allclose(result.rotations, rotations)
    np.testing.assert_allclose(heads(skeleton, result)[2], target, atol=1e-8)
    assert result.converged
    assert result.orientation_errors_deg[0] == 0.0


def test_pins_on_intermediate_bones_are_all_reached():
    skeleton = chain_skeleton(6)
    pins = random_pose_targets(skeleton, np.random.default_rng(2), [2, 5])
    rotations, locations = identity_pose(6)
    result = solve(skeleton, pins, rotations, locations, SolverSettings(iterations=3000, tolerance=1e-8))
    assert result.converged, (result.iterations, result.position_errors, result.orientation_errors_deg)
    assert np.all(result.position_errors < 1e-8)
    assert np.all(result.moved[:5])


@pytest.mark.parametrize("falloff", [0.5, 1.0])
def test_position_only_pin_on_an_intermediate_bone_lets_the_chain_below_reach(falloff):
    """Both targets come from one pose, so both are reachable at once.

    With falloff > 0 the intermediate pinned bone b2 (position only, so its own rotation is free)
    also turns for the pin below it, which b3-b4 alone could not reach.
    """
    skeleton = chain_skeleton(6)
    pins = random_pose_targets(skeleton, np.random.default_rng(2), [2, 5], orientation=False)
    pins[0] = Pin(pins[0].bone, pins[0].target, orientation_weights=POSITION_ONLY, falloff=falloff)
    rotations, locations = identity_pose(6)
    result = solve(skeleton, pins, rotations, locations, SolverSettings(iterations=3000, tolerance=1e-8))
    assert np.all(result.position_errors < 1e-6), (result.iterations, result.position_errors)


def test_falloff_zero_pinned_bone_serves_only_its_own_pin():
    """Reference semantics (the Java whole-chain oracle keeps a pinned root still): with falloff 0
    a pinned bone and its ancestors do not see the pins below it, so b0-b2 solve only b2's pin
    while b3-b5 chase b5's."""
    skeleton = chain_skeleton(6)
    pins = random_pose_targets(skeleton, np.random.default_rng(2), [2, 5], orientation=False)
    pins[0] = Pin(pins[0].bone, pins[0].target, orientation_weights=POSITION_ONLY, falloff=0.0)
    rotations, locations = identity_pose(6)
    result = solve(skeleton, pins, rotations, locations, SolverSettings(iterations=3000, tolerance=1e-8))
    assert result.position_errors[0] < 1e-6
    np.testing.assert_array_equal(result.rotations[2], [1.0, 0.0, 0.0, 0.0])
    alone = solve(skeleton, pins[:1], rotations, locations, SolverSettings(iterations=3000, tolerance=1e-8))
    np.testing.assert_allclose(result.rotations[:2], alone.rotations[:2], atol=1e-6)


def branched_skeleton():
    """hips -> spine -> {arm.L -> hand.L, arm.R -> hand.R}, hips -> leg -> foot."""
    names = ["hips", "spine", "arm.L", "hand.L", "arm.R", "hand.R", "leg", "foot"]
    parents = [None, "hips", "spine", "arm.L", "spine", "arm.R", "hips", "leg"]
    heads = [
        (0, 0, 0),
        (0, 0.5, 0),
        (0.2, 1.0, 0),
        (0.7, 1.0, 0),
        (-0.2, 1.0, 0),
        (-0.7, 1.0, 0),
        (0.1, 0, 0),
        (0.1, -0.8, 0),
    ]
    tails = [
        (0, 0.5, 0),
        (0, 1.0, 0),
        (0.7, 1.0, 0),
        (0.9, 1.0, 0),
        (-0.7, 1.0, 0),
        (-0.9, 1.0, 0),
        (0.1, -0.8, 0),
        (0.1, -0.9, 0.1),
    ]
    rest, lengths = [], []
    for h, t in zip(heads, tails):
        y = np.subtract(t, h)
        lengths.append(float(np.linalg.norm(y)))
        rest.append(frame(quat.to_matrix(quat.shortest_arc([0, 1, 0], y)), h))
    return Skeleton(names, parents, rest, lengths)


def test_unpinned_branches_are_bit_identical():
    skeleton = branched_skeleton()
    rng = np.random.default_rng(5)
    rotations = random_unit_quaternions(rng, len(skeleton))
    locations = rng.normal(scale=0.1, size=(len(skeleton), 3))
    pins = [Pin("hand.L", translation((0.5, 1.3, 0.3)))]
    result = solve(skeleton, pins, rotations, locations, SolverSettings(iterations=20))
    untouched = [skeleton.index[n] for n in ("arm.R", "hand.R", "leg", "foot")]
    assert np.array_equal(
        result.rotations[untouched], (rotations / np.linalg.norm(rotations, axis=1)[:, None])[untouched]
    )
    assert np.array_equal(result.locations, locations)
    assert not np.any(result.moved[untouched])
    assert result.moved[skeleton.index["arm.L"]] and result.moved[skeleton.index["hips"]]


def test_solve_does_not_modify_its_inputs():
    skeleton = branched_skeleton()
    rotations, locations = identity_pose(len(skeleton))
    r0, l0 = rotations.copy(), locations.copy()
    solve(
        skeleton,
        [Pin("hand.L", translation((0.5, 1.3, 0.3)))],
        rotations,
        locations,
        SolverSettings(iterations=5, translate_root=True),
    )
    assert np.array_equal(rotations, r0) and np.array_equal(locations, l0)


@pytest.mark.parametrize("analytic_limbs", LIMB_MODES)
@pytest.mark.parametrize("frozen", [1, 2])
def test_stiffness_one_freezes_a_bone(frozen, analytic_limbs):
    skeleton = chain_skeleton(4)
    rotations, locations = identity_pose(4)
    rotations[frozen] = quat.from_axis_angle([1, 0, 0], 0.3)
    stiffness = np.zeros(4)
    stiffness[frozen] = 1.0
    result = solve(
        skeleton,
        [Pin("b3", translation((1.0, 2.0, 0.5)), orientation_weights=POSITION_ONLY)],
        rotations,
        locations,
        config(analytic_limbs, iterations=50),
        stiffness=stiffness,
    )
    given = rotations[frozen] / np.linalg.norm(rotations[frozen])  # the solver's own unit rescale
    assert np.array_equal(result.rotations[frozen], given)
    assert not result.moved[frozen]
    others = [b for b in (0, 1, 2) if b != frozen]
    assert not np.allclose(result.rotations[others], rotations[others])


def test_partial_stiffness_slows_a_bone_down():
    skeleton = chain_skeleton(2)
    rotations, locations = identity_pose(2)
    pin = [Pin("b1", translation((-1.0, 0.0, 0.0)), orientation_weights=POSITION_ONLY)]
    config = SolverSettings(iterations=1, dampening=math.radians(10), **ONE_ATTEMPT)
    free = solve(skeleton, pin, rotations, locations, config)
    stiff = solve(skeleton, pin, rotations, locations, config, stiffness=np.array([0.5, 0.0]))
    assert quat.angle(free.rotations[0]) == pytest.approx(math.radians(10), abs=1e-9)
    assert quat.angle(stiff.rotations[0]) == pytest.approx(math.radians(5), abs=1e-9)


# ------------------------------------------------------------------ dampening (notes, 4)


def test_clamp_angle_notes_check():
    q = quat.from_axis_angle([[0, 0, 1]], [math.pi / 2])
    clamped = _clamp_angle(q, np.array([math.radians(10)]))
    np.testing.assert_allclose(clamped[0], quat.from_axis_angle([0, 0, 1], math.radians(10)), atol=1e-12)


def test_clamp_angle_leaves_small_rotations_and_handles_batches():
    q = quat.from_axis_angle([[1, 0, 0], [0, 1, 1], [0, 0, 1]], [0.05, 2.0, -1.0])
    limit = np.array([0.1, 0.5, 0.2])
    clamped = _clamp_angle(q.copy(), limit)
    np.testing.assert_allclose(clamped[0], q[0], atol=1e-15)
    np.testing.assert_allclose(quat.angle(clamped), [0.05, 0.5, 0.2], atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(clamped, axis=-1), 1.0, atol=1e-12)
    for i in (1, 2):
        axis_in = q[i, 1:] / np.linalg.norm(q[i, 1:]) * np.sign(q[i, 0])
        axis_out = clamped[i, 1:] / np.linalg.norm(clamped[i, 1:])
        np.testing.assert_allclose(axis_out, axis_in, atol=1e-12)


def test_one_iteration_of_a_90_degree_need_turns_10_degrees():
    skeleton = chain_skeleton(1)
    target = frame(quat.to_matrix(quat.from_axis_angle([0, 0, 1], math.pi / 2)), (0, 0, 0))
    rotations, locations = identity_pose(1)
    result = solve(
        skeleton,
        [Pin("root", target)],
        rotations,
        locations,
        SolverSettings(iterations=1, dampening=math.radians(10)),
    )
    assert result.iterations == 1
    np.testing.assert_allclose(
        result.rotations[0], quat.from_axis_angle([0, 0, 1], math.radians(10)), atol=1e-12
    )
    assert result.orientation_errors_deg[0] == pytest.approx(80.0, abs=1e-9)


@pytest.mark.parametrize("acceleration", ACCELERATION_MODES)
@pytest.mark.parametrize("analytic_limbs", LIMB_MODES)
def test_k_iterations_never_turn_a_bone_more_than_k_dampening_steps(analytic_limbs, acceleration):
    """Dampening keeps the pose continuous while a target is dragged: each iteration is a small step."""
    skeleton = chain_skeleton(5)
    rotations, locations = identity_pose(5)
    pin = Pin("b4", translation((1.5, 1.0, 0.5)), orientation_weights=POSITION_ONLY)
    for k in range(1, 7):
        result = solve(
            skeleton,
            [pin],
            rotations,
            locations,
            config(
                analytic_limbs,
                acceleration,
                iterations=k,
                tolerance=0.0,
                dampening=math.radians(10),
                **ONE_ATTEMPT,
            ),
        )
        turned = quat.angle(result.rotations)
        assert np.all(turned <= k * math.radians(10) + 1e-12), (k, np.degrees(turned))


def test_one_iteration_position_only_turns_the_root_10_degrees():
    skeleton = chain_skeleton(2)
    rotations, locations = identity_pose(2)
    pin = Pin("b1", translation((-1.0, 0.0, 0.0)), orientation_weights=POSITION_ONLY)
    result = solve(
        skeleton,
        [pin],
        rotations,
        locations,
        SolverSettings(iterations=1, dampening=math.radians(10), **ONE_ATTEMPT),
    )
    np.testing.assert_allclose(
        result.rotations[0], quat.from_axis_angle([0, 0, 1], math.radians(10)), atol=1e-12
    )
    np.testing.assert_allclose(result.rotations[1], [1, 0, 0, 0], atol=1e-12)


# ------------------------------------------------------------------ properties on random trees


@SLOW
@given(st.integers(0, 2**32 - 1), st.integers(1, 12), st.integers(1, 4), st.booleans(), st.booleans())
def test_no_nan_on_random_trees(seed, n_bones, n_pins, translate_root, exact):
    skeleton, pins, rotations, locations, rng = random_problem(seed, n_bones, n_pins)
    if rng.random() < 0.3:  # some targets out of reach, far away, or exactly on a head
        pins[0] = Pin(
            pins[0].bone, translation(rng.normal(scale=20, size=3)), orientation_weights=POSITION_ONLY
        )
    config = SolverSettings(
        iterations=30, translate_root=translate_root, exact=exact, dampening=float(rng.uniform(0.01, math.pi))
    )
    result = solve(skeleton, pins, rotations, locations, config)
    for field in (result.rotations, result.locations, result.position_errors, result.orientation_errors_deg):
        assert np.all(np.isfinite(field))
    np.testing.assert_allclose(np.linalg.norm(result.rotations, axis=-1), 1.0, atol=1e-9)
    assert 1 <= result.iterations <= 30 * (len(pins) + 1)  # a round per pin that gives way, and the last


@pytest.mark.parametrize("acceleration", ACCELERATION_MODES)
@pytest.mark.parametrize("analytic_limbs", LIMB_MODES)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(2, 9), st.integers(1, 3))
@example(seed=7, n_bones=9, n_pins=1)
def test_error_never_increases_between_iterations(analytic_limbs, acceleration, seed, n_bones, n_pins):
    """With the guard on, iteration k+1 never ends with more seven-point misfit than iteration k.

    Every pin has falloff 1, so every bone sees every pin that its turn carries along, which is
    exactly what the per-bone guard protects (with falloff 0 a bone above a pinned bone moves pins
    it does not see, and the total may rise by design).
    """
    skeleton, pins, rotations, locations, _ = random_problem(seed, n_bones, n_pins)
    pins = [Pin(p.bone, p.target, p.weight, p.orientation_weights, falloff=1.0) for p in pins]
    previous = seven_point_fit(skeleton, pins, rotations, locations)
    for k in range(1, 9):
        result = solve(
            skeleton,
            pins,
            rotations,
            locations,
            config(analytic_limbs, acceleration, iterations=k, tolerance=0.0, **ONE_ATTEMPT),
        )
        fit = seven_point_fit(skeleton, pins, result.rotations, result.locations)
        assert fit <= previous * (1 + 1e-6) + 1e-12, f"iteration {k}: {previous} -> {fit}"
        previous = fit


@SLOW
@given(st.integers(0, 2**32 - 1), st.integers(2, 8))
def test_reachable_chain_position_targets_are_reached(seed, n_bones):
    rng = np.random.default_rng(seed)
    skeleton = Skeleton(*random_tree(rng, n_bones, chain_bias=1.0))
    tip = n_bones - 1
    reach = float(sum(skeleton.lengths[:tip]))
    pin = random_pose_targets(skeleton, rng, [tip], orientation=False, spread=float(rng.uniform(0.2, 2.0)))
    rotations, locations = identity_pose(n_bones)
    result = solve(
        skeleton, pin, rotations, locations, SolverSettings(iterations=5000, tolerance=1e-7 * reach)
    )
    assert result.position_errors[0] <= 1e-6 * reach, f"seed {seed}: {result.iterations} iterations"
    assert result.converged


# ------------------------------------------------------------------ stopping rules


def unreachable_problem():
    skeleton = chain_skeleton(5)
    pins = [Pin("b4", translation((3.0, 6.0, 1.0)))]
    return skeleton, pins, *identity_pose(5)


def test_time_budget_zero_stops_after_one_iteration():
    skeleton, pins, rotations, locations = unreachable_problem()
    result = solve(
        skeleton,
        pins,
        rotations,
        locations,
        SolverSettings(iterations=10_000, tolerance=0.0, time_budget_ms=0.0),
    )
    assert result.iterations == 1
    assert not result.converged


def test_a_spent_time_budget_stops_the_solve_after_one_iteration():
    """A budget no machine can meet (1 ns) stops the solve after its first iteration, where the
    same solve without a budget runs hundreds: the budget, not the cap, ends it."""
    skeleton = chain_skeleton(12)
    rotations, locations = identity_pose(12)
    pins = [Pin("b11", translation((4.0, 3.0, 2.0)), orientation_weights=POSITION_ONLY)]
    unbudgeted = SolverSettings(iterations=100_000, tolerance=0.0, dampening=0.001, **ONE_ATTEMPT)
    budgeted = SolverSettings(
        iterations=100_000, tolerance=0.0, dampening=0.001, time_budget_ms=1e-6, **ONE_ATTEMPT
    )
    assert solve(skeleton, pins, rotations, locations, unbudgeted).iterations > 100
    result = solve(skeleton, pins, rotations, locations, budgeted)
    assert result.iterations == 1 and not result.converged


def test_the_numpy_loop_checks_the_budget_between_batches(monkeypatch):
    """A sweep over a long chain (one batch per bone) stops at the first batch past the budget.

    The clock is a counter that advances 1 ms per reading, so the test means the same on any machine.
    """
    skeleton = chain_skeleton(40)
    rotations, locations = identity_pose(40)
    pins = [Pin("b39", translation((10.0, 20.0, 5.0)), orientation_weights=POSITION_ONLY)]
    clock = iter(range(1_000_000))
    fake_time = types.SimpleNamespace(perf_counter=lambda: next(clock) * 1e-3)
    for module in ("solver.solve", "solver.attempt", "solver.loop"):  # every reader of the clock
        monkeypatch.setattr(importlib.import_module(module), "time", fake_time)
    loop_module = importlib.import_module("solver.loop")
    batches = []
    real_batch = loop_module.solve_batch
    monkeypatch.setattr(loop_module, "solve_batch", lambda *args: batches.append(1) or real_batch(*args))
    config = SolverSettings(
        iterations=100,
        tolerance=0.0,
        time_budget_ms=5.0,
        backend="numpy",
        acceleration=0,
        analytic_limbs=False,
    )
    result = solve(skeleton, pins, rotations, locations, config)
    plan = next(iter(skeleton.normalized().plan_cache.values()))
    assert result.iterations == 1 and not result.converged
    assert 1 <= len(batches) < len(plan.batches)
    assert np.isfinite(result.rotations).all()


def test_tolerance_exits_early_once_every_pin_is_close():
    skeleton = chain_skeleton(4)
    rng = np.random.default_rng(9)
    pins = random_pose_targets(skeleton, rng, [3], orientation=False)
    rotations, locations = identity_pose(4)
    # Plain EWBIK: the analytic limb finish would land both at once, whatever the tolerance.
    loose = SolverSettings(iterations=5000, tolerance=1e-3, analytic_limbs=False)
    result = solve(skeleton, pins, rotations, locations, loose)
    assert result.converged
    assert result.iterations < 5000
    assert result.position_errors[0] <= 1e-3
    tight = SolverSettings(iterations=5000, tolerance=1e-9, analytic_limbs=False)
    tighter = solve(skeleton, pins, rotations, locations, tight)
    assert tighter.iterations > result.iterations


def test_limb_finish_ends_the_solve_as_soon_as_it_lands():
    """A single two-bone limb pin is placed exactly once the dampening allows the travel."""
    skeleton = chain_skeleton(4)
    pins = random_pose_targets(skeleton, np.random.default_rng(9), [3], orientation=False)
    rotations, locations = identity_pose(4)
    result = solve(skeleton, pins, rotations, locations, SolverSettings(iterations=5000, tolerance=1e-9))
    assert result.converged
    assert result.iterations < 100
    assert result.position_errors[0] <= 1e-9


def test_no_pins_is_a_converged_no_op():
    skeleton = chain_skeleton(3)
    rotations, locations = identity_pose(3)
    result = solve(skeleton, [], rotations, locations, SolverSettings())
    assert result.converged and result.iterations == 0
    assert np.array_equal(result.rotations, rotations)
    assert result.position_errors.shape == (0,)


# ------------------------------------------------------------------ root translation


def test_translate_root_moves_the_root_to_satisfy_pins():
    skeleton = chain_skeleton(3)
    target = np.array([2.5, 0.5, 0.3])  # 2.6 from the root head, chain reach 2: out of reach unless it moves
    pins = [Pin("b2", translation(target), orientation_weights=POSITION_ONLY)]
    rotations, locations = identity_pose(3)
    fixed = solve(skeleton, pins, rotations, locations, SolverSettings(iterations=500, tolerance=1e-9))
    assert np.array_equal(fixed.locations, locations)
    assert fixed.position_errors[0] > 0.5
    free = solve(
        skeleton,
        pins,
        rotations,
        locations,
        SolverSettings(iterations=500, tolerance=1e-9, translate_root=True),
    )
    assert np.linalg.norm(free.locations[0]) > 0.1
    assert np.array_equal(free.locations[1:], locations[1:])
    assert free.position_errors[0] < 1e-8


def test_translate_root_with_root_and_tip_pins_follows_a_shifted_pose():
    skeleton = chain_skeleton(4)
    rng = np.random.default_rng(12)
    posed = random_pose_targets(skeleton, rng, [0, 3])
    shift = np.array([0.4, -0.3, 0.2])
    pins = [Pin(p.bone, p.target + np.pad(shift[:, None], ((0, 1), (3, 0)))) for p in posed]
    rotations, locations = identity_pose(4)
    result = solve(
        skeleton,
        pins,
        rotations,
        locations,
        SolverSettings(iterations=3000, tolerance=1e-7, translate_root=True),
    )
    np.testing.assert_allclose(heads(skeleton, result)[0], pins[0].target[:3, 3], atol=1e-6)
    assert np.all(result.position_errors < 1e-6)


# ------------------------------------------------------------------ batching and modes


def test_two_arms_solved_together_match_one_at_a_time():
    """Independent branches are batched; the batch must not mix them up."""
    skeleton = branched_skeleton()
    n = len(skeleton)
    stiffness = np.zeros(n)
    stiffness[[skeleton.index["hips"], skeleton.index["spine"]]] = 1.0
    left = Pin("hand.L", translation((0.5, 1.3, 0.3)), orientation_weights=POSITION_ONLY)
    right = Pin("hand.R", frame(quat.to_matrix(quat.from_axis_angle([1, 0, 0], 0.4)), (-0.6, 0.7, -0.2)))
    rotations, locations = identity_pose(n)
    config = SolverSettings(iterations=8, tolerance=0.0, **ONE_ATTEMPT)
    both = solve(skeleton, [left, right], rotations, locations, config, stiffness=stiffness)
    only_left = solve(skeleton, [left], rotations, locations, config, stiffness=stiffness)
    only_right = solve(skeleton, [right], rotations, locations, config, stiffness=stiffness)
    assert both.iterations == only_left.iterations == only_right.iterations == 8
    arm_l = [skeleton.index[b] for b in ("arm.L", "hand.L")]
    arm_r = [skeleton.index[b] for b in ("arm.R", "hand.R")]
    np.testing.assert_allclose(both.rotations[arm_l], only_left.rotations[arm_l], atol=1e-7)
    np.testing.assert_allclose(both.rotations[arm_r], only_right.rotations[arm_r], atol=1e-7)
    np.testing.assert_allclose(
        both.position_errors, [only_left.position_errors[0], only_right.position_errors[0]], atol=1e-7
    )


@pytest.mark.parametrize("exact", [True, False])
def test_exact_and_e0_both_converge_with_orientation(exact):
    skeleton = chain_skeleton(4)
    pins = random_pose_targets(skeleton, np.random.default_rng(21), [0, 3])
    rotations, locations = identity_pose(4)
    result = solve(
        skeleton, pins, rotations, locations, SolverSettings(iterations=3000, tolerance=1e-7, exact=exact)
    )
    assert result.converged, (result.position_errors, result.orientation_errors_deg)


@pytest.mark.parametrize("analytic_limbs", LIMB_MODES)
@pytest.mark.parametrize("exact", [True, False])
def test_exact_and_e0_both_converge_position_only(exact, analytic_limbs):
    skeleton = chain_skeleton(4)
    pins = [Pin("b3", translation((0.8, 1.9, 0.5)), orientation_weights=POSITION_ONLY)]
    rotations, locations = identity_pose(4)
    result = solve(
        skeleton,
        pins,
        rotations,
        locations,
        config(analytic_limbs, iterations=300, tolerance=1e-8, exact=exact),
    )
    assert result.converged, f"exact={exact}: {result.iterations} iterations, error {result.position_errors}"


# ------------------------------------------------------------------ analytic oracle (notes, 7)


def bent_limb(r1=0.8, r2=0.6):
    """upper -> fore -> hand, upper along +Y, forearm rest bent toward +X, a short hand bone."""
    bend = quat.to_matrix(quat.from_axis_angle([0, 0, 1], -0.5))
    elbow = np.array([0.0, r1, 0.0])
    rest = [translation((0, 0, 0)), frame(bend, elbow), frame(bend, elbow + bend[:, 1] * r2)]
    return Skeleton(["upper", "fore", "hand"], [None, "upper", "fore"], rest, [r1, r2, 0.1])


@pytest.mark.parametrize("analytic_limbs", LIMB_MODES)
@pytest.mark.parametrize(
    "target", [(0.9, 0.6, 0.0), (0.3, 1.1, 0.0), (1.2, -0.2, 0.0), (-0.4, 0.9, 0.0), (0.5, 0.7, 0.6)]
)
def test_two_bone_chain_matches_the_analytic_solution(target, analytic_limbs):
    """The iterative elbow must be one of the two analytic elbows in the limb's plane."""
    r1, r2 = 0.8, 0.6
    skeleton = bent_limb(r1, r2)
    rotations, locations = identity_pose(3)
    target = np.array(target)
    result = solve(
        skeleton,
        [Pin("hand", translation(target), orientation_weights=POSITION_ONLY)],
        rotations,
        locations,
        config(analytic_limbs, iterations=5000, tolerance=1e-10),
    )
    solved = heads(skeleton, result)
    assert result.position_errors[0] < 1e-9
    np.testing.assert_allclose(np.linalg.norm(solved[1] - solved[0]), r1, atol=1e-12)
    normal = np.cross(solved[1], target)
    candidates = []
    for side in (1.0, -1.0):
        bend_direction = side * np.cross(normal, target)
        joint, end = two_bone_ik(np.zeros(3), target, r1, r2, bend_direction)
        np.testing.assert_allclose(end, target, atol=1e-12)
        candidates.append(np.linalg.norm(solved[1] - joint))
    assert min(candidates) < 1e-6, candidates


# ------------------------------------------------------------------ input checks


def raises_field(field, call, *args, **kwargs):
    with pytest.raises(SceneError) as err:
        call(*args, **kwargs)
    assert err.value.field == field
    return err.value


def test_bad_solve_inputs_name_the_bone():
    skeleton = chain_skeleton(3)
    rotations, locations = identity_pose(3)
    config = SolverSettings()
    pin = [Pin("b2", translation((0, 1, 0)))]
    bad = rotations.copy()
    bad[1] = 0.0
    assert "'b1'" in str(raises_field("bones[1].rotation", solve, skeleton, pin, bad, locations, config))
    bad = locations.copy()
    bad[2, 0] = np.nan
    assert "'b2'" in str(raises_field("bones[2].location", solve, skeleton, pin, rotations, bad, config))
    bad[2, 0] = 1e300
    raises_field("bones[2].location", solve, skeleton, pin, rotations, bad, config)
    raises_field(
        "bones[0].stiffness",
        solve,
        skeleton,
        pin,
        rotations,
        locations,
        config,
        stiffness=np.array([1.5, 0, 0]),
    )
    raises_field("pins[0].bone", solve, skeleton, [Pin("nope", np.eye(4))], rotations, locations, config)
    raises_field("pins[1].bone", solve, skeleton, pin * 2, rotations, locations, config)
    raises_field("rotation", solve, skeleton, pin, rotations[:2], locations, config)


@pytest.mark.parametrize(
    "change, field",
    [
        ({"skeleton": None}, "skeleton"),
        ({"settings": None}, "settings"),
        ({"settings": {"iterations": 15}}, "settings"),
        ({"pins": [("b2", np.eye(4))]}, "pins[0]"),
        ({"limits": {1: "cone"}}, "limits"),
        ({"rotations": "identity"}, "rotation"),
    ],
)
def test_wrong_argument_types_are_refused_naming_the_argument(change, field):
    args = {
        "skeleton": chain_skeleton(3),
        "pins": [Pin("b2", translation((0, 1, 0)))],
        "rotations": identity_pose(3)[0],
        "locations": identity_pose(3)[1],
        "settings": SolverSettings(),
    }
    args.update(change)
    raises_field(field, solve, **args)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"weight": -1.0}, "weight"),
        ({"weight": float("nan")}, "weight"),
        ({"weight": 9e307}, "weight"),
        ({"weight": 1e-200}, "weight"),
        ({"weight": "1"}, "weight"),
        ({"orientation_weights": (1.0, -1.0, 0.0)}, "orientation_weights[1]"),
        ({"orientation_weights": (1.0, 1.0)}, "orientation_weights"),
        ({"falloff": 1.5}, "falloff"),
        ({"falloff": None}, "falloff"),
    ],
)
def test_bad_pins_name_the_pin_and_field(kwargs, field):
    assert "pin 'hand'" in str(raises_field(field, Pin, "hand", np.eye(4), **kwargs))


@pytest.mark.parametrize(
    "target, field",
    [
        (np.full((4, 4), np.nan), "target[0][0]"),
        (np.eye(3), "target"),
        (np.diag([1.0, 0.0, 1.0, 1.0]), "target"),
        (np.array([[1, 0.7, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]]), "target"),
        (translation((0, 1.34e154, 0)), "target[1][3]"),
    ],
)
def test_bad_pin_targets_name_the_pin(target, field):
    assert "pin 'hand'" in str(raises_field(field, Pin, "hand", target))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"iterations": 0},
        {"iterations": 2.5},
        {"iterations": float("inf")},
        {"iterations": True},
        {"time_budget_ms": -1.0},
        {"time_budget_ms": float("inf")},
        {"time_budget_ms": "10"},
        {"tolerance": -1e-3},
        {"tolerance": float("nan")},
        {"tolerance": None},
        {"tolerance": 1.35e154},
        {"dampening": 0.0},
        {"dampening": 4.0},
        {"dampening": float("nan")},
        {"stabilization_passes": -1},
        {"exact": "no"},
        {"translate_root": 1},
        {"analytic_limbs": None},
        {"relaxation": 2.0},
        {"acceleration": -1},
        {"backend": ["numpy"]},
    ],
)
def test_bad_settings_are_rejected(kwargs):
    raises_field(f"settings.{next(iter(kwargs))}", SolverSettings, **kwargs)


def test_translated_root_location_is_in_the_rest_frame_like_blender():
    """A root with a turned rest frame: its solved location, posed by Blender's rule, hits the target."""
    rest_turn = quat.to_matrix(quat.from_axis_angle([1, 2, 3], 0.9))
    skeleton = Skeleton(
        ["hips", "spine"],
        [None, "hips"],
        [frame(rest_turn, (0.1, 0.2, 1.0)), frame(rest_turn, (0.1, 0.2, 1.0) + rest_turn[:, 1] * 0.4)],
        [0.4, 0.3],
    )
    target = frame(quat.to_matrix(quat.from_axis_angle([0.3, 1, 0.2], 1.1)), (0.5, -0.4, 0.9))
    rotations, locations = identity_pose(2)
    result = solve(
        skeleton,
        [Pin("hips", target)],
        rotations,
        locations,
        SolverSettings(iterations=3, translate_root=True, tolerance=1e-10),
    )
    posed = pose_matrices(
        list(skeleton.names), [None, "hips"], skeleton.rest, result.rotations, result.locations
    )
    np.testing.assert_allclose(posed[0], target, atol=1e-7)
    assert result.position_errors[0] < 1e-9
