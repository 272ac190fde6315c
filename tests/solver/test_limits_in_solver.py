"""Joint limits inside the solver: no violations, real mocap reached with the humanoid preset."""

import dataclasses
import os
import pathlib
import time

import numpy as np
import pytest

from bench.mocap import load_bvh
from solver import quat
from solver.kusudama import JointLimits, Kusudama, LimitCone, TwistLimit
from solver.pins import Pin
from solver.presets import preset_limits
from solver.settings import SolverSettings
from solver.skeleton import Skeleton
from solver.solve import solve

MOCAP = str(pathlib.Path(__file__).resolve().parents[1] / "data" / "mocap")
CLIPS = ("cmu_131_01.bvh", "cmu_131_03.bvh")
EFFECTORS = ("lhand", "rhand", "LeftAnkle", "RightAnkle", "Head")
Y = np.array([0.0, 1.0, 0.0])


def chain_skeleton(n_bones):
    rest, names, parents = [], [], []
    for i in range(n_bones):
        m = np.eye(4)
        m[1, 3] = float(i)
        rest.append(m)
        names.append(f"b{i}")
        parents.append(None if i == 0 else f"b{i - 1}")
    return Skeleton(names, parents, rest, [1.0] * n_bones)


def random_limits(rng, n_bones):
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
    rng = np.random.default_rng(seed)
    skeleton = chain_skeleton(6)
    limits = random_limits(rng, 6)
    rotations = np.tile(quat.IDENTITY, (6, 1))
    rotations = limits.constrain(np.arange(6), rotations)
    for _ in range(5):
        target = np.eye(4)
        target[:3, :3] = quat.to_matrix(quat.normalize(rng.normal(size=4)))
        target[:3, 3] = rng.normal(scale=2.5, size=3) + (0.0, 2.0, 0.0)
        pins = [Pin("b5", target, orientation_weights=tuple(rng.uniform(0, 1, 3)))]
        result = solve(skeleton, pins, rotations, np.zeros((6, 3)), SolverSettings(iterations=30),
                       limits=limits)
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
        result = solve(skeleton, pins, rotations, np.zeros((4, 3)), SolverSettings(iterations=10),
                       limits=limits)
        assert limits.violation(result.rotations).max() <= 1e-6
        changes.append(np.abs(result.rotations - rotations).max())
        rotations = result.rotations
    assert changes[-1] < 1e-4
    assert max(changes[-10:]) < 0.1 * max(changes[:5])


@pytest.fixture(scope="module")
def clips():
    out = []
    for name in CLIPS:
        path = os.path.join(MOCAP, name)
        if not os.path.exists(path):
            pytest.skip("mocap data not present")
        mocap = load_bvh(path)
        names = mocap.names
        skeleton = Skeleton(names, [b["parent"] for b in mocap.bones],
                            [np.array(b["rest"]) for b in mocap.bones], [b["length"] for b in mocap.bones])
        order = [names.index(n) for n in skeleton.names]
        limits = JointLimits({skeleton.index[n]: Kusudama.from_dict(d, bone=n)
                              for n, d in preset_limits(mocap.bones).items()}, len(skeleton))
        out.append((name, mocap, skeleton, mocap.rotations[:, order], mocap.locations[:, order], limits))
    return out


def test_mocap_poses_fall_inside_the_humanoid_preset(clips):
    inside = total = 0
    for _, _, skeleton, rotations, _, limits in clips:
        violation = np.array([limits.violation(r) for r in rotations])[:, limits.limited]
        inside += int(np.sum(violation <= 1e-6))
        total += violation.size
    assert inside / total >= 0.99


def solve_frames(skeleton, rotations, locations, frames, limits, settings):
    """Warm-started full-body solves of the sampled frames, hips given (frozen)."""
    hips = skeleton.index["Hips"]
    stiffness = np.zeros(len(skeleton))
    stiffness[hips] = 1.0
    pinned = [skeleton.index[e] for e in EFFECTORS]
    previous = np.tile(quat.IDENTITY, (len(skeleton), 1))
    position, orientation, seconds, worst = [], [], 0.0, 0.0
    for k, frame in enumerate(frames):
        world_rotation, world_head = skeleton.forward(rotations[frame], locations[frame])
        pins = []
        for e, b in zip(EFFECTORS, pinned):
            target = np.eye(4)
            target[:3, :3] = quat.to_matrix(world_rotation[b])
            target[:3, 3] = world_head[b]
            pins.append(Pin(e, target))
        start = previous.copy()
        start[hips] = rotations[frame, hips]
        loc = np.zeros_like(locations[frame])
        loc[hips] = locations[frame, hips]
        run = settings if k else dataclasses.replace(settings, iterations=400)
        t = time.process_time()
        result = solve(skeleton, pins, start, loc, run, limits=limits, stiffness=stiffness)
        if k:
            seconds += time.process_time() - t
            position.append(result.position_errors)
            orientation.append(result.orientation_errors_deg)
        if limits is not None:
            worst = max(worst, float(limits.violation(result.rotations)[result.moved].max()))
        previous = result.rotations
    return np.concatenate(position), np.concatenate(orientation), seconds, worst


@pytest.mark.slow
def test_mocap_full_body_with_preset_reaches_targets(clips):
    settings = SolverSettings(iterations=50)
    limited, free = [], []
    for _, _, skeleton, rotations, locations, limits in clips:
        frames = np.arange(0, len(rotations), 8)[:16]
        limited.append(solve_frames(skeleton, rotations, locations, frames, limits, settings))
        free.append(solve_frames(skeleton, rotations, locations, frames, None, settings))
    position = np.concatenate([r[0] for r in limited])
    orientation = np.concatenate([r[1] for r in limited])
    slowdown = sum(r[2] for r in limited) / sum(r[2] for r in free)
    print(f"\nwith humanoid preset: position p95 {np.percentile(position, 95) * 1e3:.3f} mm, "
          f"orientation p95 {np.percentile(orientation, 95):.3f} deg; limits slow solves by x{slowdown:.2f}")
    assert np.percentile(position, 95) <= 0.002
    assert np.percentile(orientation, 95) <= 1.0
    assert max(r[3] for r in limited) <= 1e-6
