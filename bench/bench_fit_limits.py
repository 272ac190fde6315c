"""Limits fitted from motion: how long `solver.fit_limits` takes and how well the limits generalize.

Run with any Python that has numpy, from the repository root: `python bench/bench_fit_limits.py`.
Fits limits on CMU 131_01 (31 bones, 994 frames) and on a synthetic 30-bone clip of 1000 frames
(smooth random motion), reports the best of 5 wall times (the machine is shared), the share of
each clip's own frames the limits hold, and the share of 131_03's frames that limits fitted on
131_01 hold (a different take of the same actor: how far fitted limits generalize).
"""

import pathlib
import sys
import time

import numpy as np

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from solver import fit_limits, quat  # noqa: E402
from tests.support.kusudamas import joint_limits  # noqa: E402
from tests.support.mocap import load_bvh  # noqa: E402

MOCAP = REPO_ROOT / "tests" / "data" / "mocap"
REPEATS = 5


def best_time(bones, rotations):
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        limits = fit_limits(bones, rotations)
        times.append(time.perf_counter() - start)
    return min(times), limits


def held(bones, limits, rotations):
    """Per limited bone, the share of frames inside its limits: (worst, mean)."""
    joint = joint_limits([b["name"] for b in bones], limits)
    inside = np.array([joint.violation(frame) <= 1e-9 for frame in rotations])[:, joint.limited]
    share = inside.mean(0)
    return share.min(), share.mean()


def synthetic_clip(n_bones=30, n_frames=1000, seed=0):
    """A chain of bones turning smoothly: per bone a few random sinusoids of rotation vector."""
    rng = np.random.default_rng(seed)
    bones = [{"name": f"b{i}", "parent": None if i == 0 else f"b{i - 1}"} for i in range(n_bones)]
    t = np.linspace(0.0, 8.0, n_frames)[:, None, None]
    amplitude = rng.uniform(0.1, 0.8, (1, n_bones, 3))
    phase = rng.uniform(0.0, 2 * np.pi, (1, n_bones, 3))
    speed = rng.uniform(0.5, 2.0, (1, n_bones, 3))
    rotvec = amplitude * np.sin(speed * t + phase)
    angle = np.linalg.norm(rotvec, axis=-1)
    return bones, quat.from_axis_angle(rotvec, angle)


def main():
    walk, hop = load_bvh(str(MOCAP / "cmu_131_01.bvh")), load_bvh(str(MOCAP / "cmu_131_03.bvh"))
    seconds, limits = best_time(walk.bones, walk.rotations)
    worst, mean = held(walk.bones, limits, walk.rotations)
    print(
        f"CMU 131_01 ({len(walk.bones)} bones, {len(walk.rotations)} frames): {seconds * 1000:.0f} ms, "
        f"{len(limits)} bones limited, {sum(len(d['cones']) for d in limits.values())} cones"
    )
    print(f"  own frames held: worst bone {worst:.3f}, mean {mean:.3f}")
    worst, mean = held(walk.bones, limits, hop.rotations)
    print(f"  131_03 frames held by the 131_01 limits: worst bone {worst:.3f}, mean {mean:.3f}")
    bones, rotations = synthetic_clip()
    seconds, limits = best_time(bones, rotations)
    worst, mean = held(bones, limits, rotations)
    print(
        f"synthetic ({len(bones)} bones, {len(rotations)} frames): {seconds * 1000:.0f} ms, "
        f"own frames held: worst bone {worst:.3f}, mean {mean:.3f}"
    )


if __name__ == "__main__":
    main()
