"""A crowd of captured rigs solved as one problem: warm frames with the polish per tree, and the
sweeps alone (what a crowd past the polish's pin limit ran before the polish went per tree).

`python bench/bench_crowd.py [--rigs 4 20] [--frames 40] [--backend native]`. Each rig is the CMU
rig at its own stretch of the walk (37 frames apart), hands, feet and head pinned with
orientation, hips given; every frame starts from the previous frame's solution, tolerance 1e-6 m,
at most 100 iterations (the first frame, from rest, 500, and not counted). Prints iterations,
pin errors and CPU ms per frame; writes nothing (docs/BENCHMARKS.md quotes a run).
"""

import argparse
import pathlib
import sys
import time

import numpy as np

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from solver import Skeleton, SolverSettings, quat, solve  # noqa: E402
from solver import polish as polish_module  # noqa: E402
from tests.support import mocap, mocap_frames  # noqa: E402

CLIP = REPO_ROOT / "tests" / "data" / "mocap" / "cmu_131_01.bvh"
FRAMES_APART = 37


def crowd_skeleton(skeleton, count):
    """`count` copies of the skeleton as one (names `k/bone`), and each copy's bones in it."""
    names, parents = [], []
    for k in range(count):
        names += [f"{k}/{name}" for name in skeleton.names]
        parents += [None if p < 0 else f"{k}/{skeleton.names[p]}" for p in skeleton.parents]
    crowd = Skeleton(
        names, parents, np.concatenate([skeleton.rest] * count), np.concatenate([skeleton.lengths] * count)
    )
    return crowd, [np.array([crowd.index[f"{k}/{name}"] for name in skeleton.names]) for k in range(count)]


def run(clip, count, frames, backend):
    """Warm frames of the crowd: (iterations, pin errors in mm, CPU ms) per counted frame."""
    crowd, places = crowd_skeleton(clip.skeleton, count)
    stiffness = np.zeros(len(crowd))
    for place in places:
        stiffness[place[clip.skeleton.index[mocap_frames.HIPS]]] = 1.0
    previous, rows = [None] * count, []
    for row in range(frames + 1):
        rotations = np.tile(quat.IDENTITY, (len(crowd), 1))
        locations, pins = np.zeros((len(crowd), 3)), []
        for k, place in enumerate(places):
            frame = row + FRAMES_APART * k
            rotations[place], locations[place] = mocap_frames.hips_given_start(clip, frame, previous[k])
            pins += [pin.renamed(f"{k}/{pin.bone}") for pin in mocap_frames.frame_pins(clip, frame)]
        settings = SolverSettings(iterations=500 if row == 0 else 100, tolerance=1e-6, backend=backend)
        start = time.process_time()
        result = solve(crowd, pins, rotations, locations, settings, stiffness=stiffness)
        cpu_ms = (time.process_time() - start) * 1e3
        previous = [result.rotations[place] for place in places]
        if row:
            rows.append((result.iterations, result.position_errors * 1e3, cpu_ms))
    return rows


def summary(label, count, rows):
    iterations = [r[0] for r in rows]
    errors = np.concatenate([r[1] for r in rows])
    return (
        f"| {count} | {label} | {np.median(iterations):.0f} / {max(iterations)} | "
        f"{np.percentile(errors, 95):.4f} / {errors.max():.4f} | {np.median([r[2] for r in rows]):.2f} |"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rigs", type=int, nargs="+", default=[4, 20])
    parser.add_argument("--frames", type=int, default=40)
    parser.add_argument("--backend", default="native", choices=("native", "numpy"))
    args = parser.parse_args(argv)
    clip = mocap_frames.load_clip(str(CLIP), 1, mocap.load_bvh(str(CLIP), height=mocap_frames.RIG_HEIGHT))
    print("| rigs | solve | iterations median / max | pin error p95 / max mm | CPU ms per frame |")
    print("|---|---|---|---|---|")
    limit = polish_module.POLISH_MAX_PINS
    for count in args.rigs:
        for label, pins_per_tree in (("polish per tree", limit), ("sweeps alone", 0)):
            polish_module.POLISH_MAX_PINS = pins_per_tree  # plans are cached per skeleton: a new one each run
            print(summary(label, count, run(clip, count, args.frames, args.backend)), flush=True)
    polish_module.POLISH_MAX_PINS = limit
    return 0


if __name__ == "__main__":
    sys.exit(main())
