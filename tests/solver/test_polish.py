"""The polish (solver/polish.py): damped Gauss-Newton steps over every solved bone after the sweeps.

Its pieces are held to independent oracles (the Jacobian to finite differences of the residuals,
the damped step to a least-squares solve of the augmented system), the C loop to the numpy loop
on random trees where it runs, and the whole solve to the convergence the issue asks for: warm
frames of captured motion reach tolerance 1e-6 in a few iterations on the CMU rig and on the
same motion re-expressed on rigs with other bone rolls and a straight-line rest.
"""

import dataclasses

import numpy as np
import pytest

from solver import (
    JointLimits,
    Kusudama,
    LimitCone,
    Pin,
    Skeleton,
    SolverSettings,
    TwistLimit,
    quat,
    solve,
)
from solver.loop import State
from solver.loop_constants import POLISH_MAX_PINS
from solver.plan import plan_solve
from solver.polish import PIN_RESIDUALS, Polisher, damped_step, jacobian, reduced_rows, residuals
from tests.solver.conftest import ONE_ATTEMPT, chain_skeleton, pose_matrices, random_problem
from tests.support import mocap, mocap_frames
from tests.support.mocap import CLIPS


def polished_problem(seed, n_bones=10, n_pins=3, translate_root=False):
    """A random tree whose pins all have falloff 1 (so the polish runs), normalized as solve() does."""
    skeleton, pins, rotations, locations, rng = random_problem(seed, n_bones, n_pins)
    pins = [dataclasses.replace(p, falloff=1.0) for p in pins]
    work = skeleton.normalized()
    pin_bones = [skeleton.index[p.bone] for p in pins]
    plan = plan_solve(work, pin_bones, [1.0] * len(pins), np.zeros(len(skeleton), dtype=bool), translate_root)
    state = State(
        work,
        pins,
        pin_bones,
        quat.normalize(rotations),
        locations / skeleton.unit,
        plan.levels,
        skeleton.unit,
    )
    state.forward()
    return state, plan, rng


def on_both_loops(skeleton, pins, rotations, locations, translate_root):
    """(compiled result, numpy result) of the same run of the loop: 300 iterations to tolerance
    1e-9 (one attempt: the staged start's loose stages would compare the loops on more than the
    polish)."""
    return [
        solve(
            skeleton,
            pins,
            rotations,
            locations,
            SolverSettings(
                iterations=300, tolerance=1e-9, translate_root=translate_root, backend=backend, **ONE_ATTEMPT
            ),
        )
        for backend in ("native", "numpy")
    ]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("translate_root", [False, True])
def test_the_jacobian_matches_finite_differences_of_the_residuals(seed, translate_root):
    state, plan, _ = polished_problem(seed, translate_root=translate_root)
    if plan.polish is None:
        pytest.skip("no solved bone")
    (polish,) = plan.polish
    base, weights = residuals(state)
    jac = jacobian(state, polish, weights)
    frames = state.skeleton.parent_frames(polish.bones, state.world)
    h = 1e-7
    rotations, locations = state.rotations.copy(), state.locations.copy()
    moving = np.flatnonzero(polish.translating)
    for column in range(jac.shape[1]):
        state.rotations[:], state.locations[:] = rotations, locations
        if column < 3 * len(polish.bones):
            i, axis = divmod(column, 3)
            world_turn = np.eye(3)[axis] * h
            local = frames[i].T @ world_turn
            bone = polish.bones[i]
            state.rotations[bone] = quat.multiply(
                quat.from_axis_angle(local, np.linalg.norm(local)), rotations[bone]
            )
        else:
            t, axis = divmod(column - 3 * len(polish.bones), 3)
            bone = polish.bones[moving[t]]
            state.locations[bone] = locations[bone] + frames[moving[t]].T @ (np.eye(3)[axis] * h)
        state.forward()
        numeric = (residuals(state)[0][polish.pins] - base[polish.pins]).ravel() / h
        np.testing.assert_allclose(jac[:, column], numeric, atol=1e-5)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("translate_root", [False, True])
def test_six_rows_a_pin_give_the_twelve_rows_step(seed, translate_root):
    """The reduced system (position rows and three turn rows a pin) has the twelve rows' normal
    equations: the same damped step at every damping, in either space."""
    state, plan, _ = polished_problem(seed, translate_root=translate_root)
    if plan.polish is None:
        pytest.skip("no solved bone")
    (polish,) = plan.polish
    base, weights = residuals(state)
    jac, residual = jacobian(state, polish, weights), base[polish.pins].ravel()
    rows, left = reduced_rows(jac, residual, state.effector_axes[polish.pins], weights[polish.pins, 1:])
    assert rows.shape == (len(jac) // 2, jac.shape[1])
    for damping in (1e-6, 1e-2, 10.0):
        full = damped_step(jac, residual, damping)
        reduced = damped_step(rows, left, damping, PIN_RESIDUALS * len(polish.pins))
        np.testing.assert_allclose(reduced, full, rtol=1e-7, atol=1e-9 * np.abs(full).max())


@pytest.mark.parametrize("rows, cols", [(12, 30), (36, 9), (24, 24)])
def test_the_damped_step_solves_the_augmented_least_squares_problem(rows, cols):
    rng = np.random.default_rng(rows * cols)
    scaled = rng.normal(size=(rows, cols))
    residual = rng.normal(size=rows)
    damping = 1e-2
    mu = damping * np.trace(scaled.T @ scaled) / min(rows, cols)
    augmented = np.vstack((scaled, np.sqrt(mu) * np.eye(cols)))
    expected = np.linalg.lstsq(augmented, np.concatenate((-residual, np.zeros(cols))), rcond=None)[0]
    np.testing.assert_allclose(damped_step(scaled, residual, damping), expected, atol=1e-10)


def test_a_pin_falloff_below_one_leaves_the_polish_out():
    state, _, _ = polished_problem(3, n_bones=8, n_pins=1)
    parent = state.skeleton.names[state.skeleton.parents[state.pin_bones[0]]]
    child = state.skeleton.names[state.pin_bones[0]]
    skeleton = state.skeleton
    for falloff, polished in ((0.0, False), (0.5, False), (1.0, True)):
        plan = plan_solve(
            skeleton,
            [skeleton.index[parent], skeleton.index[child]],
            [falloff, 1.0],
            np.zeros(len(skeleton), dtype=bool),
            False,
        )
        assert (plan.polish is not None) == polished


def test_more_pins_than_the_polish_carries_leave_it_out():
    """Past POLISH_MAX_PINS pins one polish step costs more than a budget's worth of sweeps."""
    skeleton = chain_skeleton(2 * POLISH_MAX_PINS)
    for count, polished in ((POLISH_MAX_PINS, True), (POLISH_MAX_PINS + 1, False)):
        pin_bones = list(range(len(skeleton) - count, len(skeleton)))
        plan = plan_solve(skeleton, pin_bones, [1.0] * count, np.zeros(len(skeleton), dtype=bool), False)
        assert (plan.polish is not None) == polished


def test_stiff_bones_weigh_more_in_the_step():
    max_step = np.array([0.1, 0.05, 0.1])
    _, plan, _ = polished_problem(1, n_bones=3, n_pins=1)
    (tree,) = Polisher.make(plan.polish, max_step).trees
    by_bone = tree.scale[: 3 * len(tree.plan.bones)].reshape(-1, 3)
    np.testing.assert_allclose(by_bone[:, 0], max_step[tree.plan.bones] / 0.1)


@pytest.mark.compares_backends
@pytest.mark.parametrize("translate_root", [False, True])
def test_polished_solves_agree_between_the_loops(translate_root):
    """Every pin weighs all three axes and its target is reachable, so each answer is unique:
    iteration counts, errors and poses agree."""
    for seed in range(12):
        skeleton, pins, rotations, locations, _ = random_problem(seed, 9, 3)
        pins = [
            Pin(p.bone, p.target, weight=p.weight, orientation_weights=(1.0, 1.0, 1.0), falloff=1.0)
            for p in pins
        ]
        native_result, numpy_result = on_both_loops(skeleton, pins, rotations, locations, translate_root)
        assert native_result.iterations == numpy_result.iterations
        assert native_result.converged and numpy_result.converged, seed
        np.testing.assert_allclose(native_result.position_errors, numpy_result.position_errors, atol=1e-9)
        assert np.all(
            quat.angle(quat.multiply(quat.conjugate(native_result.rotations), numpy_result.rotations)) < 1e-5
        )


@pytest.mark.compares_backends
def test_limited_polished_solves_reach_targets_inside_the_limits_in_both_loops():
    """Targets posed inside the limits, limits strict (no yielding to a pin the loops did not
    settle): both loops reach them and stay inside (which of the equally good poses each picks
    is not unique, so only errors and violations are compared)."""
    limits_of = {
        1: Kusudama([LimitCone((0.0, 1.0, 0.0), 0.6)], TwistLimit(-0.5, 0.5)),
        3: Kusudama([LimitCone((0.0, 1.0, 0.0), 0.4), LimitCone((0.0, 0.6, 0.8), 0.3)]),
    }
    for seed in range(12):
        skeleton, _, rotations, locations, rng = random_problem(seed, 9, 3)
        limits = JointLimits(limits_of, len(skeleton))
        posed = quat.normalize(np.array([1.0, 0, 0, 0]) + 0.5 * rng.normal(size=(len(skeleton), 4)))
        posed = limits.constrain(np.arange(len(skeleton)), posed)
        world_rotation, world_head = skeleton.forward(posed, np.zeros((len(skeleton), 3)))
        pinned = rng.choice(len(skeleton), size=3, replace=False)
        pins = []
        for b in pinned:
            target = np.eye(4)
            target[:3, :3], target[:3, 3] = quat.to_matrix(world_rotation[b]), world_head[b]
            pins.append(Pin(skeleton.names[b], target, falloff=1.0))
        for backend in ("native", "numpy"):
            result = solve(
                skeleton,
                pins,
                rotations,
                locations,
                SolverSettings(iterations=300, tolerance=1e-7, backend=backend, strict_limits=True),
                limits=limits,
            )
            assert result.position_errors.max() <= 1e-7 * skeleton.unit + 1e-12, (seed, backend)
            assert limits.violation(result.rotations)[result.moved].max() <= 1e-6


RIGS = {"cmu": lambda m: m, "rolled": mocap.rolled_rest, "straight": mocap.straight_line_rest}


@pytest.mark.parametrize("rig", sorted(RIGS))
def test_warm_frames_of_captured_motion_converge_in_a_few_iterations_on_any_rig(rig, default_backend):
    """Every frame of a stretch of the walk, warm-started, at tolerance 1e-6 m: the errors are
    measured with an independent forward kinematics (one 4x4 product per bone)."""
    loaded = RIGS[rig](mocap.load_bvh(CLIPS[0], height=mocap_frames.RIG_HEIGHT))
    clip = mocap_frames.load_clip(CLIPS[0], 1, loaded)
    rows = np.arange(0, 120 if default_backend == "native" else 12)
    warm = SolverSettings(iterations=100, tolerance=1e-6)
    runs = list(
        mocap_frames.solve_sequence(
            clip, warm, True, rest_settings=dataclasses.replace(warm, iterations=500), rows=rows
        )
    )
    skeleton = clip.skeleton
    parents = [None if p < 0 else skeleton.names[p] for p in skeleton.parents]
    worst = 0.0
    for solved in runs:
        poses = pose_matrices(
            skeleton.names, parents, skeleton.rest, solved.result.rotations, solved.result.locations
        )
        pinned = [skeleton.index[e] for e in mocap_frames.EFFECTORS]
        targets = clip.targets[solved.row]
        worst = max(worst, float(np.linalg.norm(poses[pinned, :3, 3] - targets[:, :3, 3], axis=-1).max()))
    assert np.median([s.result.iterations for s in runs]) <= 10
    assert all(s.result.converged for s in runs)
    assert worst <= 2e-6


def crowd_of(problems):
    """One skeleton holding each (skeleton, pins, rotations, locations) as its own tree (bone names
    `k/name`, as a crowd of armatures is solved); returns it with the pins, start pose and each
    problem's bones in it."""
    names, parents, rest, lengths = [], [], [], []
    for k, (skeleton, *_) in enumerate(problems):
        names += [f"{k}/{name}" for name in skeleton.names]
        parents += [None if p < 0 else f"{k}/{skeleton.names[p]}" for p in skeleton.parents]
        rest.append(skeleton.rest)
        lengths.append(skeleton.lengths)
    crowd = Skeleton(names, parents, np.concatenate(rest), np.concatenate(lengths))
    rotations, locations = np.empty((len(crowd), 4)), np.empty((len(crowd), 3))
    pins, places = [], []
    for k, (skeleton, rig_pins, rig_rotations, rig_locations) in enumerate(problems):
        place = np.array([crowd.index[f"{k}/{name}"] for name in skeleton.names])
        rotations[place], locations[place] = rig_rotations, rig_locations
        pins += [pin.renamed(f"{k}/{pin.bone}") for pin in rig_pins]
        places.append(place)
    return crowd, pins, rotations, locations, places


def oriented_problem(seed, n_bones, n_pins):
    """A random tree whose pins weigh every axis with falloff 1: each answer is unique."""
    skeleton, pins, rotations, locations, _ = random_problem(seed, n_bones, n_pins)
    pins = [
        Pin(p.bone, p.target, weight=p.weight, orientation_weights=(1.0, 1.0, 1.0), falloff=1.0) for p in pins
    ]
    return skeleton, pins, rotations, locations


def test_a_crowd_polishes_each_armature_as_its_own_tree():
    """Three five-pin rigs: 15 pins in all, past POLISH_MAX_PINS, yet each tree is within it."""
    problems = [oriented_problem(seed, 12, 5) for seed in range(3)]
    crowd, pins, _, _, places = crowd_of(problems)
    assert len(pins) > POLISH_MAX_PINS
    plan = plan_solve(
        crowd, [crowd.index[p.bone] for p in pins], [1.0] * len(pins), np.zeros(len(crowd), bool), False
    )
    assert plan.polish is not None and len(plan.polish) == 3
    for k, tree in enumerate(plan.polish):
        assert tree.pins.tolist() == list(range(5 * k, 5 * k + 5))
        assert set(tree.bones.tolist()) <= set(places[k].tolist())


def test_a_tree_past_the_pin_limit_leaves_the_polish_out():
    problems = [oriented_problem(0, 12, 5), oriented_problem(1, 30, POLISH_MAX_PINS + 1)]
    crowd, pins, *_ = crowd_of(problems)
    plan = plan_solve(
        crowd, [crowd.index[p.bone] for p in pins], [1.0] * len(pins), np.zeros(len(crowd), bool), False
    )
    assert plan.polish is None


@pytest.mark.parametrize("translate_root", [False, True])
def test_each_trees_jacobian_matches_finite_differences_and_moves_no_other_tree(translate_root):
    """The crowd's Jacobian is block-diagonal: turning (or shifting) a bone of one tree changes
    that tree's residuals as its Jacobian says and no residual of another tree."""
    crowd, pins, rotations, locations, _ = crowd_of([oriented_problem(seed, 7, 2) for seed in range(3)])
    work = crowd.normalized()
    pin_bones = [crowd.index[p.bone] for p in pins]
    plan = plan_solve(work, pin_bones, [1.0] * len(pins), np.zeros(len(crowd), bool), translate_root)
    state = State(
        work, pins, pin_bones, quat.normalize(rotations), locations / crowd.unit, plan.levels, crowd.unit
    )
    state.forward()
    base, weights = residuals(state)
    h = 1e-7
    for tree in plan.polish:
        jac = jacobian(state, tree, weights)
        frames = work.parent_frames(tree.bones, state.world)
        moving = np.flatnonzero(tree.translating)
        others = np.setdiff1d(np.arange(len(pins)), tree.pins)
        for column in range(jac.shape[1]):
            state.rotations[:], state.locations[:] = quat.normalize(rotations), locations / crowd.unit
            if column < 3 * len(tree.bones):
                i, axis = divmod(column, 3)
                local = frames[i].T @ (np.eye(3)[axis] * h)
                bone = tree.bones[i]
                state.rotations[bone] = quat.multiply(
                    quat.from_axis_angle(local, np.linalg.norm(local)), state.rotations[bone]
                )
            else:
                t, axis = divmod(column - 3 * len(tree.bones), 3)
                state.locations[tree.bones[moving[t]]] += frames[moving[t]].T @ (np.eye(3)[axis] * h)
            state.forward()
            moved = residuals(state)[0]
            np.testing.assert_allclose(
                jac[:, column], (moved[tree.pins] - base[tree.pins]).ravel() / h, atol=1e-5
            )
            assert np.array_equal(moved[others], base[others])


@pytest.mark.compares_backends
@pytest.mark.parametrize("translate_root", [False, True])
def test_polished_crowds_agree_between_the_loops(translate_root):
    """Four three-pin rigs (12 pins, each tree polished on its own): iteration counts, errors and
    poses agree, and every pin is reached. One run of each loop from the same start: with the
    staged start, the roots carried to these random rigs' pins leave a stage whose targets cannot
    all be reached, and where the loops' rounding makes the stall rule end it (194 iterations
    against the cap of 300 for seeds 8-11) the stages carry on from poses 0.002 rad apart."""
    for first in range(0, 12, 4):
        crowd, pins, rotations, locations, _ = crowd_of(
            [oriented_problem(seed, 9, 3) for seed in range(first, first + 4)]
        )
        native_result, numpy_result = on_both_loops(crowd, pins, rotations, locations, translate_root)
        assert native_result.iterations == numpy_result.iterations, first
        assert native_result.converged and numpy_result.converged, first
        np.testing.assert_allclose(native_result.position_errors, numpy_result.position_errors, atol=1e-9)
        assert np.all(
            quat.angle(quat.multiply(quat.conjugate(native_result.rotations), numpy_result.rotations)) < 1e-5
        )


def test_a_crowd_of_captured_rigs_converges_as_fast_as_one(default_backend):
    """Four CMU rigs (20 pins), each at its own stretch of the walk, warm frames at tolerance
    1e-6 m: the sweeps alone need a median of ~24 iterations here and miss some frames within
    100; with the polish per tree the crowd converges like a single rig."""
    clip = mocap_frames.load_clip(CLIPS[0], 1, mocap.load_bvh(CLIPS[0], height=mocap_frames.RIG_HEIGHT))
    skeleton, count = clip.skeleton, 4
    problems = [
        (skeleton, [], np.tile(quat.IDENTITY, (len(skeleton), 1)), np.zeros((len(skeleton), 3)))
    ] * count
    crowd, _, _, _, places = crowd_of(problems)
    stiffness = np.zeros(len(crowd))
    for place in places:
        stiffness[place[skeleton.index[mocap_frames.HIPS]]] = 1.0
    previous, iterations = [None] * count, []
    for row in range(0, 31 if default_backend == "native" else 6):
        rotations, locations, pins = np.empty((len(crowd), 4)), np.empty((len(crowd), 3)), []
        for k, place in enumerate(places):
            rotations[place], locations[place] = mocap_frames.hips_given_start(
                clip, row + 37 * k, previous[k]
            )
            pins += [p.renamed(f"{k}/{p.bone}") for p in mocap_frames.frame_pins(clip, row + 37 * k)]
        settings = SolverSettings(iterations=500 if row == 0 else 100, tolerance=1e-6)
        result = solve(crowd, pins, rotations, locations, settings, stiffness=stiffness)
        previous = [result.rotations[place] for place in places]
        if row:
            assert result.converged and result.position_errors.max() <= 1e-6, row
            iterations.append(result.iterations)
    assert np.median(iterations) <= 10
