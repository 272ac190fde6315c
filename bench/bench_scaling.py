"""Scaling benchmark: live updates and bakes as bones, pins and armatures grow, EWBIK against
Blender's IK on the same rigs in the same run, in wall time.

Run with the Python of a bpy venv: `~/.cache/ewbik/venvs/bpy-5.2/bin/python bench/bench_scaling.py`
(`--quick` for a smoke run that writes nothing; `--only x20 --part bake` for chosen rows, nothing
written). The extension zip is built from this checkout and
installed into a throw-away user-resources directory, like the Blender tests do.

Rigs: the Rigify human metarig (hands, feet, head pinned), and procedural "fans" of any size: a
root bone with one pre-bent chain per pin, the chain tips pinned. Each rig gets both solvers on
the same bones: EWBIK pins (root frozen) and muted IK constraints (Standard solver, rotation on,
chains up to just below the root) aimed at a child of the same target one bone length along it,
where the tail is when head and axes match. Per row, in one process, on the same rigs:

- live: every target of every armature moves each update; `view_layer.update()` is timed, which
  is Blender's evaluation plus the live handler and its write-back. For EWBIK the time splits into
  solve (`solve()` as it times itself), bridge (the rest of the bridge call: reading the pose
  and targets, packing, writing back) and Blender (everything else: the depsgraph before and
  after, the handler's loop). "no IK" is the same drag with nothing solving; "writing the poses
  only" the same drag with a handler that only writes every armature's pose back as the live
  write-back does: the floor Blender's re-evaluation of the written poses sets.
- bake: the targets are animated; `ewbik.bake` with every armature selected against
  `nla.bake(visual_keying=True)` of the IK constraints on the chain bones, in ms per frame.

Process CPU time runs ~2x wall time during an update because a Blender worker thread spins
while the handler runs, so wall time is what the table shows; the machine is shared, so
compare numbers within a run, not across runs.
"""

import os
import pathlib
import sys
import tempfile

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
USER_RESOURCES = tempfile.mkdtemp(prefix="ewbik-bench-scaling-")
os.environ["BLENDER_USER_RESOURCES"] = USER_RESOURCES  # before bpy: never touch the real config

import argparse  # noqa: E402
import contextlib  # noqa: E402
import dataclasses  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402

import bpy  # noqa: E402  (first: it makes addon_utils importable)

# isort: split
import addon_utils  # noqa: E402
import numpy as np  # noqa: E402
from mathutils import Vector  # noqa: E402

sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "bench"))
from bench_bake import blender_ik_bake  # noqa: E402
from bench_solver import machine_line, markdown_table, solver_fingerprint  # noqa: E402

from tests.support.blender_helpers import HANDS_FEET_HEAD, addon_module, load_build_tool, make_active, pin  # noqa: E402

BENCHMARKS_MD = REPO_ROOT / "docs" / "BENCHMARKS.md"
BEGIN, END = "<!-- bench:scaling -->", "<!-- /bench:scaling -->"
BLENDER_IK_ITERATIONS = 500
SPACING = 3.0  # metres between armatures
REACH = 0.06  # metres a target moves from where it was pinned


@dataclasses.dataclass(frozen=True)
class Row:
    kind: str  # "metarig" or "fan"
    bones: int
    pins: int
    armatures: int

    @property
    def label(self):
        rig = "metarig" if self.kind == "metarig" else "fan"
        return f"{rig} {self.bones} bones, {self.pins} pins, x{self.armatures}"


LIVE_ROWS = (
    Row("fan", 25, 5, 1),
    Row("fan", 100, 5, 1),
    Row("metarig", 159, 5, 1),
    Row("fan", 250, 5, 1),
    Row("fan", 1000, 5, 1),
    Row("fan", 250, 10, 1),
    Row("fan", 250, 20, 1),
    Row("fan", 250, 40, 1),
    Row("fan", 1000, 40, 1),
    Row("metarig", 159, 5, 5),
    Row("metarig", 159, 5, 20),
)
BAKE_ROWS = (
    Row("metarig", 159, 5, 1),
    Row("fan", 1000, 40, 1),
    Row("metarig", 159, 5, 5),
    Row("metarig", 159, 5, 20),
)
QUICK_LIVE_ROWS = (Row("fan", 25, 5, 1), Row("metarig", 159, 5, 2))
QUICK_BAKE_ROWS = (Row("metarig", 159, 5, 2),)


def install_extension():
    zip_path = load_build_tool().build(pathlib.Path(USER_RESOURCES) / "dist")
    result = bpy.ops.extensions.package_install_files(
        filepath=str(zip_path), repo="user_default", enable_on_install=True
    )
    if result != {"FINISHED"}:
        raise SystemExit(f"bench_scaling: installing {zip_path} failed: {result}")
    addon_utils.enable("rigify", default_set=True)


def fan_chain_lengths(bones, pins):
    """Bones per chain: bones - 1 (the root) shared out, the first chains taking the remainder."""
    base, extra = divmod(bones - 1, pins)
    if base < 2:
        raise SystemExit(f"bench_scaling: {bones} bones cannot make {pins} chains of 2 or more")
    return [base + (c < extra) for c in range(pins)]


def build_fan(bones, pins, location):
    """A root bone with `pins` pre-bent chains fanned around it, 1 m each; returns (rig, tip names)."""
    data = bpy.data.armatures.new("fan")
    rig = bpy.data.objects.new("fan", data)
    bpy.context.scene.collection.objects.link(rig)
    rig.location = location
    make_active(rig)
    bpy.ops.object.mode_set(mode="EDIT")
    root = data.edit_bones.new("root")
    root.head, root.tail = (0.0, 0.0, 0.0), (0.0, 0.0, 0.1)
    tips = []
    for c, count in enumerate(fan_chain_lengths(bones, pins)):
        angle = 2.0 * math.pi * c / pins
        out = Vector((math.cos(angle), math.sin(angle), 0.0))
        parent, head = root, Vector((0.0, 0.0, 0.1)) + 0.05 * out
        for j in range(count):
            bend = -0.6 + 1.2 * j / (count - 1)
            bone = data.edit_bones.new(f"c{c}.{j}")
            bone.head = head
            bone.tail = head + (math.cos(bend) * out + Vector((0.0, 0.0, math.sin(bend)))) / count
            bone.parent, bone.use_connect = parent, j > 0
            parent, head = bone, bone.tail.copy()
        tips.append(parent.name)
    bpy.ops.object.mode_set(mode="OBJECT")
    return rig, tips


def build_metarig(location):
    bpy.ops.object.armature_human_metarig_add()
    rig = bpy.context.object
    rig.location = location
    return rig, list(HANDS_FEET_HEAD)


def root_of(rig):
    return next(bone for bone in rig.pose.bones if bone.parent is None)


def rig_with_both_solvers(row, index):
    """One armature of the row with EWBIK pins (root frozen) and, one bone length along each
    target, the goal for Blender's IK; returns (rig, targets, {tip: (goal, chain bone names)})."""
    location = (SPACING * (index % 5), SPACING * (index // 5), 0.0)
    rig, tips = build_fan(row.bones, row.pins, location) if row.kind == "fan" else build_metarig(location)
    rig.ewbik.auto_limits = False
    targets = list(pin(rig, *tips).values())
    bpy.ops.object.mode_set(mode="OBJECT")
    root = root_of(rig)
    root.ewbik.stiffness = 1.0
    rig.pose.ik_solver = "LEGACY"
    chains = {}
    for tip, target in zip(tips, targets):
        pose_bone = rig.pose.bones[tip]
        goal = bpy.data.objects.new(f"{target.name} tail", None)
        bpy.context.scene.collection.objects.link(goal)
        goal.parent = target
        goal.location = (0.0, pose_bone.bone.length, 0.0)
        chains[tip] = (goal, [bone.name for bone in (pose_bone, *pose_bone.parent_recursive) if bone != root])
    return rig, targets, chains


def build_row(row):
    bpy.ops.wm.read_homefile(use_empty=True)
    rigs = [rig_with_both_solvers(row, i) for i in range(row.armatures)]
    return [r for r, _, _ in rigs], [t for _, ts, _ in rigs for t in ts], [c for _, _, c in rigs]


def use_solver(rigs, chains, solver):
    """'ewbik': live on; 'blender': IK constraints on the chains (they exist only then: a muted
    constraint still makes its armature depend on the goal, which a live rig would not);
    'none' and 'writes': neither. Every run starts from the rest pose."""
    for rig, rig_chains in zip(rigs, chains):
        rig.ewbik.live = solver == "ewbik"
        for pose_bone in rig.pose.bones:
            for constraint in list(pose_bone.constraints):
                pose_bone.constraints.remove(constraint)
            pose_bone.matrix_basis.identity()
        if solver != "blender":
            continue
        for tip, (goal, chain) in rig_chains.items():
            constraint = rig.pose.bones[tip].constraints.new("IK")
            constraint.target, constraint.use_tail, constraint.use_rotation = goal, True, True
            constraint.use_stretch, constraint.iterations = False, BLENDER_IK_ITERATIONS
            constraint.chain_count = len(chain)
    bpy.context.view_layer.update()


def offsets(count, steps):
    """(steps, count, 3) target displacements: each target loops around where it was pinned."""
    t = np.linspace(0.0, 2.0 * math.pi, steps, endpoint=False)[:, None]
    phase = np.arange(count)[None, :] * 2.4
    return REACH * np.stack(
        (np.sin(t + phase), 0.5 * np.sin(2.0 * t + phase), 0.5 * (1.0 - np.cos(t + phase))), axis=-1
    )


class BridgeTimer:
    """Wall time of each bridge call the live handler makes, and the solve() time inside it."""

    def __init__(self):
        self.wrapped = {
            (module, name): getattr(module, name)
            for module, name in (
                (addon_module("ewbik_addon.solve.armature_solve"), "solve_armature"),
                (addon_module("ewbik_addon.solve.crowd_solve"), "solve_crowd"),
            )
        }
        self.bridge_ms = 0.0
        self.solve_ms = 0.0

    def __enter__(self):
        for (module, name), original in self.wrapped.items():
            setattr(module, name, self._timed(original))
        return self

    def __exit__(self, *exc):
        for (module, name), original in self.wrapped.items():
            setattr(module, name, original)

    def _timed(self, original):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            result = original(*args, **kwargs)
            self.bridge_ms += (time.perf_counter() - start) * 1e3
            for one in result.values() if isinstance(result, dict) else (result,):
                self.solve_ms += getattr(one, "ms", 0.0)  # solve_crowd: each armature's share
            return result

        return timed

    def take(self):
        taken = (self.bridge_ms, self.solve_ms)
        self.bridge_ms = self.solve_ms = 0.0
        return taken


class PoseWriter:
    """A depsgraph handler that only writes the armatures' poses back, as the live handler's
    write-back does (all quaternion channels, the same refresh tag): the floor that Blender's own
    re-evaluation of the written poses sets under a live update, with no reading and no solve.
    `written` (the first so many armatures) and `refresh` (None: no tag) vary it."""

    def __init__(self, rigs, refresh):
        self.rigs, self.refresh, self.written = rigs, refresh, len(rigs)
        self.poses = []
        for rig in rigs:
            pose = np.empty(len(rig.pose.bones) * 4, np.float32)
            rig.pose.bones.foreach_get("rotation_quaternion", pose)
            self.poses.append(pose)
        self.busy = False

    def write(self):
        for rig, pose in zip(self.rigs[: self.written], self.poses):
            rig.pose.bones.foreach_set("rotation_quaternion", pose)
            if self.refresh is not None:
                rig.update_tag(refresh=self.refresh)

    def __call__(self, scene, depsgraph):
        if self.busy:
            return
        self.busy = True
        try:
            self.write()
        finally:
            self.busy = False

    def __enter__(self):
        bpy.app.handlers.depsgraph_update_post.append(self)
        return self

    def __exit__(self, *exc):
        bpy.app.handlers.depsgraph_update_post.remove(self)


def drag(rigs, targets, chains, solver, steps, warmup):
    """Median wall ms of an update with every target moving, and (for EWBIK) the split."""
    use_solver(rigs, chains, solver)
    start = np.array([target.location for target in targets])
    moves = offsets(len(targets), steps + warmup)
    view_layer = bpy.context.view_layer
    totals, bridges, solves = [], [], []
    writer = (
        PoseWriter(rigs, addon_module("ewbik_addon.bridge.pose_io")._POSE_REFRESH)
        if solver == "writes"
        else contextlib.nullcontext()
    )
    with BridgeTimer() as timer, writer:
        for step, move in enumerate(moves):
            for target, location in zip(targets, start + move):
                target.location = location
            timer.take()
            wall = time.perf_counter()
            view_layer.update()
            total = (time.perf_counter() - wall) * 1e3
            bridge_ms, solve_ms = timer.take()
            if step >= warmup:
                totals.append(total), bridges.append(bridge_ms), solves.append(solve_ms)
    for target, location in zip(targets, start):
        target.location = location
    for rig in rigs:
        if rig.ewbik.status.startswith("Live solve failed"):
            raise SystemExit(f"bench_scaling: {rig.ewbik.status}")
    median = float(np.median(totals))
    if solver != "ewbik":
        return {"total": median}
    solve, bridge = float(np.median(solves)), float(np.median(bridges))
    return {"total": median, "solve": solve, "bridge": bridge - solve, "blender": median - bridge}


def live_row(row, steps, warmup):
    rigs, targets, chains = build_row(row)
    result = {
        solver: drag(rigs, targets, chains, solver, steps, warmup)
        for solver in ("ewbik", "blender", "none", "writes")
    }
    result["pin_ms"] = first_update_ms(rigs, chains, targets)
    return result


def first_update_ms(rigs, chains, targets):
    """The first live update after the bone settings changed (a rescan of every armature)."""
    use_solver(rigs, chains, "ewbik")
    for rig in rigs:
        root_of(rig).ewbik.stiffness = 1.0  # an edit of a bone setting: the next update rescans
    for target in targets:
        target.location.z += 0.01
    wall = time.perf_counter()
    bpy.context.view_layer.update()
    return (time.perf_counter() - wall) * 1e3


def animate(targets, frames):
    for i, target in enumerate(targets):
        start = target.location.copy()
        for frame in range(1, frames + 1, 5):
            target.location = start + Vector(offsets(len(targets), frames)[frame - 1, i])
            target.keyframe_insert("location", frame=frame)
        target.location = start
    bpy.context.scene.frame_set(1)


def select_for_bake(rigs, chains):
    bpy.ops.object.mode_set(mode="OBJECT") if bpy.context.object.mode != "OBJECT" else None
    make_active(rigs[0])
    for rig in rigs:
        rig.select_set(True)
    bpy.ops.object.mode_set(mode="POSE")
    for rig, chain in zip(rigs, chains):
        for pose_bone in rig.pose.bones:
            owner = pose_bone if "select" in pose_bone.bl_rna.properties else pose_bone.bone
            owner.select = pose_bone.name in chain


def bake_row(row, frames):
    rigs, targets, chains = build_row(row)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    animate(targets, frames)
    results = {}
    for solver in ("ewbik", "blender"):
        use_solver(rigs, chains, solver)
        select_for_bake(rigs, [{bone for _, chain in c.values() for bone in chain} for c in chains])
        start = time.perf_counter()
        if solver == "ewbik":
            outcome = bpy.ops.ewbik.bake(frame_start=1, frame_end=frames)
        else:
            outcome = blender_ik_bake(bpy, frames)
        results[solver] = (time.perf_counter() - start) * 1e3 / frames
        if outcome != {"FINISHED"}:
            raise SystemExit(f"bench_scaling: {solver} bake of {row.label}: {outcome}")
        bpy.ops.object.mode_set(mode="OBJECT")
        for rig in rigs:
            rig.animation_data_clear()
    return results


def live_table(results):
    header = [
        "rig",
        "EWBIK update ms",
        "of which solve / bridge / Blender",
        "first update after a settings edit",
        "Blender IK update ms",
        "EWBIK vs Blender IK",
        "no IK ms",
        "writing the poses only ms",
    ]
    rows = []
    for row, r in results:
        e = r["ewbik"]
        rows.append(
            [
                row.label,
                f"{e['total']:.2f}",
                f"{e['solve']:.2f} / {e['bridge']:.2f} / {e['blender']:.2f}",
                f"{r['pin_ms']:.1f}",
                f"{r['blender']['total']:.2f}",
                f"{e['total'] / r['blender']['total']:.2f}x",
                f"{r['none']['total']:.2f}",
                f"{r['writes']['total']:.2f}",
            ]
        )
    return markdown_table(header, rows)


def bake_table(results, frames):
    header = [
        "rig",
        f"EWBIK bake ms per frame ({frames} frames)",
        "Blender `nla.bake` + IK ms per frame",
        "EWBIK speed-up",
    ]
    rows = [
        [row.label, f"{r['ewbik']:.2f}", f"{r['blender']:.2f}", f"**{r['blender'] / r['ewbik']:.1f}x**"]
        for row, r in results
    ]
    return markdown_table(header, rows)


def write_results(markdown):
    text = BENCHMARKS_MD.read_text()
    begin, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    BENCHMARKS_MD.write_text(text[:begin] + "\n" + markdown + "\n" + text[end:])


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40, help="timed target moves per live row")
    parser.add_argument("--frames", type=int, default=100, help="frames per bake")
    parser.add_argument("--quick", action="store_true", help="smoke run: two small rows, nothing written")
    parser.add_argument("--no-write", action="store_true", help="do not update docs/BENCHMARKS.md")
    parser.add_argument(
        "--only",
        metavar="TEXT",
        help="run only the rows whose label holds TEXT (e.g. 'x20'); nothing written",
    )
    parser.add_argument(
        "--part", choices=("live", "bake", "both"), default="both", help="which tables to run"
    )
    return parser.parse_args(argv)


def chosen_rows(args):
    """(live rows, bake rows) the arguments ask for."""
    live_rows, bake_rows = (QUICK_LIVE_ROWS, QUICK_BAKE_ROWS) if args.quick else (LIVE_ROWS, BAKE_ROWS)
    if args.only:
        live_rows = tuple(row for row in live_rows if args.only in row.label)
        bake_rows = tuple(row for row in bake_rows if args.only in row.label)
    return (live_rows if args.part != "bake" else ()), (bake_rows if args.part != "live" else ())


def main(argv=None):
    args = parse_args(argv)
    started = time.perf_counter()
    fingerprint = solver_fingerprint()
    install_extension()
    live_rows, bake_rows = chosen_rows(args)
    steps, frames = (10, 10) if args.quick else (args.steps, args.frames)
    live = []
    for row in live_rows:
        live.append((row, live_row(row, steps, warmup=5)))
        print(row.label, live[-1][1], flush=True)
    bakes = []
    for row in bake_rows:
        bakes.append((row, bake_row(row, frames)))
        print(row.label, bakes[-1][1], flush=True)
    markdown = "\n\n".join(
        (
            f"Blender {bpy.app.version_string}, {machine_line(fingerprint)}.",
            f"Live: median wall ms of {steps} updates with every target moving (after 5 unrecorded); run took "
            f"{time.perf_counter() - started:.0f} s.",
            live_table(live),
            bake_table(bakes, frames),
        )
    )
    print(markdown)
    if not (args.quick or args.no_write or args.only or args.part != "both"):
        write_results(markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
