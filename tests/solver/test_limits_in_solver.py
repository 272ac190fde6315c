"""Joint limits inside the solver: no violations, real mocap reached with the humanoid preset."""

import dataclasses
import math

import numpy as np
import pytest

from solver import quat
from solver.attempt import Attempt, attempt_for
from solver.kusudama import JointLimits, Kusudama, LimitCone, TwistLimit
from solver.pins import Pin
from solver.presets import preset_limits
from solver.settings import SolverSettings
from solver.skeleton import Skeleton
from solver.solve import solve
from tests.solver.conftest import ONE_ATTEMPT, captured_pins, chain_skeleton
from tests.support.kusudamas import joint_limits
from tests.support.mocap import CLIPS, load_bvh

Y = np.array([0.0, 1.0, 0.0])


def limits_around_rest(rng, n_bones):
    """Limits on every bone but the root: one to three cones near the rest direction (+Y), a twist range."""
    kusudamas = {}
    for i in range(1, n_bones):
        cones = []
        for _ in range(rng.integers(1, 4)):
            d = Y + rng.normal(scale=0.8, size=3)
            cones.append(LimitCone(d / np.linalg.norm(d), rng.uniform(0.05, 0.8)))
        low = rng.uniform(-1.0, 0.0)
        kusudamas[i] = Kusudama(cones, TwistLimit(low, low + rng.uniform(0.0, 1.5)))
    return JointLimits(kusudamas, n_bones)


@pytest.mark.parametrize("seed", range(6))
def test_random_targets_leave_no_violation(seed):
    """Strict limits hold whatever the targets (by default a pin they hold back makes them yield)."""
    rng = np.random.default_rng(seed)
    skeleton = chain_skeleton(6)
    limits = limits_around_rest(rng, 6)
    rotations = np.tile(quat.IDENTITY, (6, 1))
    rotations = limits.constrain(np.arange(6), rotations)
    for _ in range(5):
        target = np.eye(4)
        target[:3, :3] = quat.to_matrix(quat.normalize(rng.normal(size=4)))
        target[:3, 3] = rng.normal(scale=2.5, size=3) + (0.0, 2.0, 0.0)
        pins = [Pin("b5", target, orientation_weights=tuple(rng.uniform(0, 1, 3)))]
        result = solve(
            skeleton,
            pins,
            rotations,
            np.zeros((6, 3)),
            SolverSettings(iterations=30, strict_limits=True),
            limits=limits,
        )
        assert np.all(np.isfinite(result.rotations))
        assert limits.violation(result.rotations).max() <= 1e-6
        rotations = result.rotations


def test_comfort_settles_across_warm_started_calls():
    """Soft limits must not make a live (warm-started, fixed target) solve undulate."""
    skeleton = chain_skeleton(4)
    kusudama = Kusudama([LimitCone(Y, 1.2)], TwistLimit(-0.8, 0.8), comfort=1.0)
    limits = JointLimits({1: kusudama, 2: kusudama, 3: kusudama}, 4)
    target = np.eye(4)
    target[:3, 3] = (1.4, 2.2, 0.6)
    pins = [Pin("b3", target, orientation_weights=(0.0, 0.0, 0.0))]
    rotations = np.tile(quat.IDENTITY, (4, 1))
    changes = []
    for _ in range(40):
        result = solve(
            skeleton, pins, rotations, np.zeros((4, 3)), SolverSettings(iterations=10), limits=limits
        )
        assert limits.violation(result.rotations).max() <= 1e-6
        changes.append(np.abs(result.rotations - rotations).max())
        rotations = result.rotations
    assert changes[-1] < 1e-4
    assert max(changes[-10:]) < 0.1 * max(changes[:5])


@pytest.fixture(scope="module")
def clips():
    out = []
    for path in CLIPS:
        mocap = load_bvh(path)
        names = mocap.names
        skeleton = Skeleton(
            names,
            [b["parent"] for b in mocap.bones],
            [np.array(b["rest"]) for b in mocap.bones],
            [b["length"] for b in mocap.bones],
        )
        order = [names.index(n) for n in skeleton.names]
        limits = joint_limits(skeleton.names, preset_limits(mocap.bones))
        out.append((path.name, mocap, skeleton, mocap.rotations[:, order], mocap.locations[:, order], limits))
    return out


def test_mocap_poses_fall_inside_the_humanoid_preset(clips):
    inside = total = 0
    for _, _, _, rotations, _, limits in clips:
        violation = np.array([limits.violation(r) for r in rotations])[:, limits.limited]
        inside += int(np.sum(violation <= 1e-6))
        total += violation.size
    assert inside / total >= 0.99


def solve_frames(skeleton, rotations, locations, frames, limits, settings):
    """Warm-started full-body solves of the sampled frames, hips given (frozen)."""
    hips = skeleton.index["Hips"]
    stiffness = np.zeros(len(skeleton))
    stiffness[hips] = 1.0
    previous = np.tile(quat.IDENTITY, (len(skeleton), 1))
    position, orientation, worst = [], [], 0.0
    for k, frame in enumerate(frames):
        pins = captured_pins(skeleton, rotations[frame], locations[frame])
        start = previous.copy()
        start[hips] = rotations[frame, hips]
        loc = np.zeros_like(locations[frame])
        loc[hips] = locations[frame, hips]
        run = settings if k else dataclasses.replace(settings, iterations=400)
        result = solve(skeleton, pins, start, loc, run, limits=limits, stiffness=stiffness)
        if k:
            position.append(result.position_errors)
            orientation.append(result.orientation_errors_deg)
        if limits is not None:
            worst = max(worst, float(limits.violation(result.rotations)[result.moved].max()))
        previous = result.rotations
    return np.concatenate(position), np.concatenate(orientation), worst


@pytest.mark.slow
def test_mocap_full_body_with_preset_reaches_targets(clips):
    settings = SolverSettings(iterations=50)
    limited = []
    for _, _, skeleton, rotations, locations, limits in clips:
        frames = np.arange(0, len(rotations), 8)[:16]
        limited.append(solve_frames(skeleton, rotations, locations, frames, limits, settings))
    position = np.concatenate([r[0] for r in limited])
    orientation = np.concatenate([r[1] for r in limited])
    print(
        f"\nwith humanoid preset: position p95 {np.percentile(position, 95) * 1e3:.3f} mm, "
        f"orientation p95 {np.percentile(orientation, 95):.3f} deg"
    )
    assert np.percentile(position, 95) <= 0.002
    assert np.percentile(orientation, 95) <= 1.0
    assert max(r[2] for r in limited) <= 1e-6


@pytest.mark.slow
def test_mocap_targets_are_reached_from_the_rest_pose_under_the_preset(clips, default_backend):
    """Captured poses lie (almost all) inside the preset, so their targets are reachable under it:
    a solve from the rest pose (straight limbs against their hinge limits) must reach them, not
    stall (it missed by up to 0.4 m before the restart from the limits' centres)."""
    settings = SolverSettings(iterations=600)
    hips_given = []
    for _, _, skeleton, rotations, locations, limits in clips:
        frames = np.arange(0, len(rotations), 96 if default_backend == "numpy" else 24)  # numpy: 30x slower
        hips = skeleton.index["Hips"]
        stiffness = np.zeros(len(skeleton))
        stiffness[hips] = 1.0
        for frame in frames:
            start = np.tile(quat.IDENTITY, (len(skeleton), 1))
            start[hips] = rotations[frame, hips]
            loc = np.zeros_like(locations[frame])
            loc[hips] = locations[frame, hips]
            pins = captured_pins(skeleton, rotations[frame], locations[frame])
            result = solve(skeleton, pins, start, loc, settings, limits=limits, stiffness=stiffness)
            hips_given.append(result.position_errors.max())
            assert limits.violation(result.rotations)[result.moved].max() <= 1e-6
    print(
        f"\nfrom rest under the preset: {len(hips_given)} frames, worst pin p95 "
        f"{np.percentile(hips_given, 95) * 1e3:.2f} mm, max {max(hips_given) * 1e3:.2f} mm"
    )
    assert np.percentile(hips_given, 95) <= 0.002
    assert max(hips_given) <= 0.005


def test_a_hinge_facing_away_from_the_target_is_turned_toward_it():
    """A straight elbow whose hinge bends toward +z while the target lies toward +x: the upper
    arm must twist a quarter turn before the elbow can bend, which no single bone step asks for."""
    skeleton = chain_skeleton(4)
    bend = np.array([0.0, math.cos(math.radians(120)), math.sin(math.radians(120))])
    hinge = Kusudama([LimitCone(Y, 0.05), LimitCone(bend, 0.05)], TwistLimit(-0.1, 0.1))
    limits = JointLimits({2: hinge}, 4)
    target = np.eye(4)
    target[:3, 3] = [0.9, 1.6, 0.0]
    rotations = np.tile(quat.IDENTITY, (4, 1))
    result = solve(
        skeleton,
        [Pin("b3", target, orientation_weights=(0.0, 0.0, 0.0))],
        rotations,
        np.zeros((4, 3)),
        SolverSettings(iterations=200),
        limits=limits,
        stiffness=np.array([1.0, 0.0, 0.0, 0.0]),
    )
    assert result.position_errors[0] <= 1e-5
    assert result.converged
    assert limits.violation(result.rotations).max() <= 1e-9


@pytest.mark.parametrize("scale, attempts", [(1.0, 2), (10.0, 1)], ids=["stuck", "out-of-reach"])
def test_only_a_reachable_miss_is_worth_a_restart(scale, attempts, monkeypatch):
    """The hinge case of the test above, stopped after a few iterations short of its target,
    restarts; the same chain dragged beyond its length (three unit bones from the fixed root's
    head) gets nothing from a restart and runs none."""
    runs = []
    original = Attempt.run
    monkeypatch.setattr(Attempt, "run", lambda self: runs.append(1) or original(self))
    skeleton = chain_skeleton(4)
    bend = np.array([0.0, math.cos(math.radians(120)), math.sin(math.radians(120))])
    limits = JointLimits({2: Kusudama([LimitCone(Y, 0.05), LimitCone(bend, 0.05)], TwistLimit(-0.1, 0.1))}, 4)
    target = np.eye(4)
    target[:3, 3] = np.array([0.9, 1.6, 0.0]) * scale
    solve(
        skeleton,
        [Pin("b3", target, orientation_weights=(0.0, 0.0, 0.0))],
        np.tile(quat.IDENTITY, (4, 1)),
        np.zeros((4, 3)),
        SolverSettings(iterations=4, **ONE_ATTEMPT),
        limits=limits,
        stiffness=np.array([1.0, 0.0, 0.0, 0.0]),
    )
    assert len(runs) == attempts


def test_a_restart_reaches_every_limited_bone_of_a_chain_of_three_hundred():
    """A missed pin at the tip of a long limited chain sends every bone above it toward its limits'
    centres (`_missed_bones`): counting a bone's ancestors that moved the pin must not wrap around
    (a bone with 256 of them counted none in eight bits)."""
    skeleton = chain_skeleton(300)
    cone = Kusudama([LimitCone(Y, math.radians(30.0))])
    limits = JointLimits({i: cone for i in range(300)}, 300)
    target = np.eye(4)
    target[:3, 3] = (50.0, 250.0, 0.0)
    pins = [Pin("b299", target, orientation_weights=(0.0, 0.0, 0.0))]
    rotations, locations = np.tile([1.0, 0.0, 0.0, 0.0], (300, 1)), np.zeros((300, 3))
    attempt = attempt_for(skeleton, pins, rotations, locations, SolverSettings(), limits, np.zeros(300), 0.0)
    assert attempt._missed_bones(np.array([True])).all()
