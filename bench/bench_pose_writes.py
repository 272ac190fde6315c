"""What Blender spends evaluating poses a depsgraph handler writes: the floor under a live crowd.

Run with the Python of a bpy venv: `~/.cache/ewbik/venvs/bpy-5.2/bin/python bench/bench_pose_writes.py`
(`--kind fan` for 25-bone fans instead of metarigs, `--steps N`). Prints a table, writes nothing.

The scene is the scaling bench's crowd (metarigs with hands, feet and head pinned, no solver on);
every update moves every target (or, "still", one unrelated empty), and a depsgraph handler
writes the quaternions of the first `written` armatures back as they are, then tags them as
asked. Per update: wall and process CPU time of `view_layer.update()`, the evaluation before
the handler (depsgraph_update_pre to _post), and everything after the handler returns, which is
Blender evaluating the written armatures again inside the same update (the handler is not
called a second time: the handler calls column counts it).
"""

import argparse
import sys
import time

import bpy  # noqa: I001
import numpy as np

# first: it points Blender's user resources at a throw-away directory before bpy is imported
from bench_scaling import PoseWriter, Row, build_row, install_extension, offsets, use_solver
from bench_solver import markdown_table

TAGS = {"transform": {"OBJECT"}, "data": {"DATA"}, "none": None}


class Recorder(PoseWriter):
    """depsgraph_update_pre/_post handlers: when each ran, and the PoseWriter's write of
    `rigs[:written]` (none until told)."""

    def __init__(self, rigs):
        super().__init__(rigs, None)
        self.written = 0
        self.events = []

    def pre(self, scene, depsgraph=None):
        self.events.append(("pre", time.perf_counter()))

    def post(self, scene, depsgraph=None):
        self.events.append(("post", time.perf_counter()))
        self.write()
        self.events.append(("written", time.perf_counter()))

    def __enter__(self):
        bpy.app.handlers.depsgraph_update_pre.append(self.pre)
        bpy.app.handlers.depsgraph_update_post.append(self.post)
        return self

    def __exit__(self, *exc):
        bpy.app.handlers.depsgraph_update_pre.remove(self.pre)
        bpy.app.handlers.depsgraph_update_post.remove(self.post)


def updates(recorder, targets, still, steps, warmup=5):
    """Medians over `steps` updates: wall, CPU, before the handler, after it, handler calls."""
    moves = offsets(len(targets), steps + warmup)
    start = np.array([target.location for target in targets])
    rows = []
    for step in range(steps + warmup):
        if still:
            still.location.x += 0.001
        else:
            for target, location in zip(targets, start + moves[step]):
                target.location = location
        recorder.events.clear()
        cpu, wall = time.process_time(), time.perf_counter()
        bpy.context.view_layer.update()
        end, cpu = time.perf_counter(), time.process_time() - cpu
        times = dict(recorder.events)
        calls = sum(1 for name, _ in recorder.events if name == "post")
        if step >= warmup:
            rows.append((end - wall, cpu, times["post"] - times["pre"], end - times["written"], calls))
    for target, location in zip(targets, start):
        target.location = location
    medians = np.median(np.array(rows), axis=0)
    return [*(1e3 * medians[:4]), medians[4]]


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=("metarig", "fan"), default="metarig")
    parser.add_argument("--steps", type=int, default=30)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    install_extension()
    cases = [(1, 1), (5, 5), (20, 1), (20, 5), (20, 10), (20, 20)]
    rows = []
    for armatures in sorted({a for a, _ in cases}):
        rigs, targets, chains = build_row(Row(args.kind, 159 if args.kind == "metarig" else 25, 5, armatures))
        use_solver(rigs, chains, "none")
        still = bpy.data.objects.new("unrelated", None)
        bpy.context.scene.collection.objects.link(still)
        with Recorder(rigs) as recorder:
            for written in [0, *(w for a, w in cases if a == armatures)]:
                for tag, refresh in TAGS.items() if written else (("-", None),):
                    for moving in (True, False):
                        recorder.written, recorder.refresh = written, refresh
                        result = updates(recorder, targets, None if moving else still, args.steps)
                        label = [str(armatures), str(written), tag, "all move" if moving else "still"]
                        rows.append([*label, *(f"{value:.2f}" for value in result)])
                        print(*rows[-1], flush=True)
    header = [
        f"{args.kind}s in the scene",
        "written",
        "tag",
        "targets",
        "update wall ms",
        "CPU ms",
        "before the handler ms",
        "after the handler ms",
        "handler calls",
    ]
    print(f"Blender {bpy.app.version_string}\n\n{markdown_table(header, rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
