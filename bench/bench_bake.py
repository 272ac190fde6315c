"""Bake benchmark: `ewbik.bake` against Blender's own bake of Blender's own IK.

A 5-pin humanoid (the Rigify human metarig, hands, feet and head pinned with `ewbik.pin`) gets
procedurally animated targets over a few hundred frames. On that rig, in the same process:

- EWBIK bake: `bpy.ops.ewbik.bake` over the range (each frame solved from its pose underneath, as
  live solving solves it; key rotations),
  with the armature's default time budget, as live solving runs, and again without a budget
  (every frame solved to convergence or the iteration cap);
- EWBIK bake with Move Root off: the hips stay where the pose underneath has them, as Blender's
  IK keeps them (its chains end at the root);
- EWBIK live: the same frames played with live solving on, no keys (what a baked frame is
  measured against: a baked frame should cost no more than a live solve of that frame);
- frame change only: the same frames with nothing solving, the depsgraph's share of both;
- Blender bake: IK constraints (Standard solver, rotation on) on the same five bones, each chain
  running up to the hips (`spine`, the root), aimed at the same targets (at the bone's tail,
  Blender's IK goal), baked by `bpy.ops.nla.bake(visual_keying=True)` on the chain bones'
  rotations.

Each baked result is played back (live solving off, constraints muted) and the effectors'
distance to their targets is reported, so speed is not bought with accuracy. Runs alternate
(EWBIK, Blender, EWBIK, ...) and the best wall-clock and CPU times of `--repeats` are kept, so
both see the same load. CPU time (this process, all threads) is the steadier number on a busy
machine.

Usage: `python bench/bench_bake.py [--frames 300] [--repeats 3] [--venvs bpy-5.2,bpy-4.2]`.
Any Python starts it; each Blender version runs in a subprocess with its venv's interpreter and
its own BLENDER_USER_RESOURCES, with the extension built and installed from this checkout like
a user would. Prints a markdown table.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
VENV_DIR = pathlib.Path(
    os.environ.get(
        "EWBIK_VENV_DIR",
        os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "ewbik", "venvs"),
    )
)
sys.path.insert(0, str(REPO_ROOT))
from tests.support.walking_targets import animate_targets  # noqa: E402

PINS = ("hand.L", "hand.R", "foot.L", "foot.R", "spine.006")


def _parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each bake; the fastest counts")
    parser.add_argument(
        "--venvs", default="bpy-5.2,bpy-4.2", help="comma-separated venv names under VENV_DIR"
    )
    parser.add_argument("--worker", metavar="JSON", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = _parse_args(argv)
    if args.worker:
        return _worker(args)
    results = worker_results(
        args.venvs, __file__, ["--frames", str(args.frames), "--repeats", str(args.repeats)]
    )
    print(markdown(results))
    return 0 if results else 1


def worker_results(venvs, script, arguments):
    """Run `script --worker OUT *arguments` in each venv of `venvs` (comma-separated names under
    VENV_DIR) and gather the JSON each worker wrote; a venv missing or failing is said and skipped."""
    results = []
    for venv in venvs.split(","):
        python = VENV_DIR / venv / "bin" / "python"
        if not python.is_file():
            print(f"skipping {venv}: {python} not found (make venvs)", file=sys.stderr)
            continue
        with tempfile.TemporaryDirectory(prefix="ewbik-bench-") as scratch:
            out = pathlib.Path(scratch) / "result.json"
            run = subprocess.run(
                [str(python), str(script), "--worker", str(out), *arguments], capture_output=True, text=True
            )
            if not out.is_file():  # not the exit status: bpy 4.2 can crash tearing down after Rigify
                print(f"{venv} failed:\n{run.stdout[-2000:]}\n{run.stderr[-6000:]}", file=sys.stderr)
                continue
            results.append(json.loads(out.read_text()))
    return results


def markdown(results):
    """The result table: frames per second of each way to get keys, and how well they hit."""
    lines = [
        "| Blender | frames | EWBIK bake fps | Blender `nla.bake` + IK fps | speed ratio (wall / CPU) | "
        "CPU ms per frame: EWBIK bake / live solve / frame change only | EWBIK error mean / max mm | "
        "Blender IK error mean / max mm | EWBIK without time budget: fps, error mean / max mm | "
        "EWBIK with Move Root off: fps, error mean / max mm |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        ewbik, blender, live, bare = r["ewbik_bake"], r["blender_bake"], r["ewbik_live"], r["frame_change"]
        converged, root_kept = r["ewbik_converged"], r["ewbik_root_kept"]
        cpu_ratio = blender["cpu_ms_per_frame"] / ewbik["cpu_ms_per_frame"]
        lines.append(
            f"| {r['blender']} | {r['frames']} | {ewbik['fps']:.1f} | {blender['fps']:.1f} | "
            f"**{ewbik['fps'] / blender['fps']:.1f}x** / {cpu_ratio:.1f}x | "
            f"{ewbik['cpu_ms_per_frame']:.2f} / {live['cpu_ms_per_frame']:.2f} / {bare['cpu_ms_per_frame']:.2f} | "
            f"{ewbik['error_mean_mm']:.2f} / {ewbik['error_max_mm']:.2f} | "
            f"{blender['error_mean_mm']:.2f} / {blender['error_max_mm']:.2f} | "
            f"{converged['fps']:.1f}, {converged['error_mean_mm']:.2f} / {converged['error_max_mm']:.2f} | "
            f"{root_kept['fps']:.1f}, {root_kept['error_mean_mm']:.2f} / {root_kept['error_max_mm']:.2f} |"
        )
    return "\n".join(lines)


def _worker(args):
    bpy = _blender_with_extension()
    scene = bpy.context.scene
    frames = args.frames
    scene.frame_start, scene.frame_end = 1, frames
    rig, targets = _pinned_metarig(bpy)
    animate_targets(targets, frames)
    scene.frame_set(1)
    chains = _blender_ik(bpy, rig, targets)
    default_budget = rig.ewbik.time_budget_ms
    runs = _measure(bpy, rig, targets, chains, frames, max(1, args.repeats))
    result = {
        "blender": bpy.app.version_string,
        "python": sys.version.split()[0],
        "frames": frames,
        "pins": list(PINS),
        "chains": chains,
        "time_budget_ms": default_budget,
    }
    for name, timings in runs.items():
        seconds = min(timing[0] for (timing, _) in timings)
        cpu = min(timing[1] for (timing, _) in timings)
        errors = timings[0][1]
        result[name] = {"seconds": seconds, "fps": frames / seconds, "cpu_ms_per_frame": 1e3 * cpu / frames}
        if errors is not None:
            result[name].update(error_mean_mm=1e3 * sum(errors) / len(errors), error_max_mm=1e3 * max(errors))
    pathlib.Path(args.worker).write_text(json.dumps(result))
    return 0


def _blender_with_extension():
    """bpy in an empty file with the extension built, installed and enabled, and Rigify on."""
    os.environ["BLENDER_USER_RESOURCES"] = tempfile.mkdtemp(prefix="ewbik-bench-bake-user-")
    import bpy

    # isort: split
    import addon_utils  # (after bpy, which makes it importable)

    sys.path.insert(0, str(REPO_ROOT / "tools"))
    import build_extension

    bpy.ops.wm.read_homefile(use_empty=True)
    package = build_extension.build(tempfile.mkdtemp(prefix="ewbik-bench-bake-dist-"))
    assert bpy.ops.extensions.package_install_files(
        filepath=str(package), repo="user_default", enable_on_install=True
    ) == {"FINISHED"}
    addon_utils.enable("rigify", default_set=True)
    return bpy


def _measure(bpy, rig, targets, chains, frames, repeats):
    """{run name: [((seconds, cpu seconds), per-frame errors or None)] per repeat}."""
    scene = bpy.context.scene
    default_budget, pinned_root = rig.ewbik.time_budget_ms, rig.ewbik.translate_root

    def ewbik_bake(time_budget_ms, translate_root=pinned_root):
        _reset(bpy, rig)
        rig.ewbik.live = True
        rig.ewbik.time_budget_ms = time_budget_ms
        rig.ewbik.translate_root = translate_root
        seconds = _timed(lambda: bpy.ops.ewbik.bake(frame_start=1, frame_end=frames))
        rig.ewbik.time_budget_ms = default_budget
        rig.ewbik.translate_root = pinned_root
        return seconds, _errors(bpy, rig, targets, frames)

    def playback(live):
        _reset(bpy, rig)
        rig.ewbik.live = live
        return _timed(lambda: [scene.frame_set(frame) for frame in range(1, frames + 1)])

    runs = {
        "ewbik_bake": [],
        "blender_bake": [],
        "ewbik_live": [],
        "frame_change": [],
        "ewbik_converged": [],
        "ewbik_root_kept": [],
    }
    for _ in range(repeats):
        runs["ewbik_bake"].append(ewbik_bake(default_budget))
        runs["ewbik_root_kept"].append(ewbik_bake(default_budget, translate_root=False))
        runs["blender_bake"].append(_blender_bake(bpy, rig, targets, chains, frames))
        runs["ewbik_converged"].append(ewbik_bake(0.0))
        runs["ewbik_live"].append((playback(True), None))
        runs["frame_change"].append((playback(False), None))
    return runs


def _blender_bake(bpy, rig, targets, chains, frames):
    """Blender's own IK constraints baked with visual keying: (timing, per-frame errors)."""
    _reset(bpy, rig)
    rig.ewbik.live = False
    _enable_constraints(rig, chains, True)
    bpy.ops.object.mode_set(mode="POSE")
    for pose_bone in rig.pose.bones:
        _select(pose_bone, any(pose_bone.name in chain for chain in chains.values()))
    seconds = _timed(lambda: blender_ik_bake(bpy, frames))
    _enable_constraints(rig, chains, False)
    return seconds, _errors(bpy, rig, targets, frames)


def blender_ik_bake(bpy, frames):
    """The baseline every bake is compared with: `nla.bake` of the selected bones' IK results,
    visual keying, rotation channels, frames 1..frames; returns the operator's result."""
    return bpy.ops.nla.bake(
        frame_start=1,
        frame_end=frames,
        only_selected=True,
        visual_keying=True,
        bake_types={"POSE"},
        channel_types={"ROTATION"},
    )


def _pinned_metarig(bpy):
    """The Rigify human metarig with the five effectors pinned through `ewbik.pin`."""
    bpy.ops.object.armature_human_metarig_add()
    rig = bpy.context.object
    rig.ewbik.auto_limits = False
    bpy.ops.object.mode_set(mode="POSE")
    for pose_bone in rig.pose.bones:
        _select(pose_bone, pose_bone.name in PINS)
    assert bpy.ops.ewbik.pin() == {"FINISHED"}
    bpy.ops.object.mode_set(mode="OBJECT")
    return rig, {name: rig.pose.bones[name].ewbik.target for name in PINS}


def _select(pose_bone, state):
    owner = pose_bone if "select" in pose_bone.bl_rna.properties else pose_bone.bone
    owner.select = state


def _blender_ik(bpy, rig, targets):
    """Standard-solver IK constraints (muted for now) from each pinned bone up to the root.

    Blender's IK brings the bone's tail to its target; a child empty one bone length along the
    target's Y axis is where the tail is when the head and axes match the EWBIK target.
    """
    rig.pose.ik_solver = "LEGACY"
    chains = {}
    for name, target in targets.items():
        pose_bone = rig.pose.bones[name]
        tail_goal = bpy.data.objects.new(f"{target.name} tail", None)
        bpy.context.scene.collection.objects.link(tail_goal)
        tail_goal.parent = target
        tail_goal.location = (0.0, pose_bone.bone.length, 0.0)
        constraint = pose_bone.constraints.new("IK")
        constraint.target = tail_goal
        constraint.use_tail = True
        constraint.use_rotation = True
        constraint.use_stretch = False
        chain = [bone.name for bone in (pose_bone, *pose_bone.parent_recursive)]
        constraint.chain_count = len(chain)
        constraint.enabled = False
        chains[name] = chain
    return chains


def _enable_constraints(rig, chains, enabled):
    for name in chains:
        for constraint in rig.pose.bones[name].constraints:
            constraint.enabled = enabled


def _reset(bpy, rig):
    """No action, rest pose, first frame, object mode: every run starts from the same state."""
    if bpy.context.object.mode != "OBJECT":
        bpy.ops.object.mode_set(mode="OBJECT")
    if rig.animation_data is not None:
        action = rig.animation_data.action
        rig.animation_data_clear()
        if action is not None:
            bpy.data.actions.remove(action)
    rig.ewbik.live = False
    for pose_bone in rig.pose.bones:
        pose_bone.matrix_basis.identity()
    bpy.context.scene.frame_set(1)


def _timed(call):
    """(wall-clock seconds, CPU seconds of this process, all threads) of one call."""
    start, start_cpu = time.perf_counter(), time.process_time()
    result = call()
    seconds, cpu = time.perf_counter() - start, time.process_time() - start_cpu
    if isinstance(result, set):
        assert result == {"FINISHED"}, result
    return seconds, cpu


def _errors(bpy, rig, targets, frames):
    """Distance (m) of each pinned bone's head to its target on every frame, playing the keys."""
    rig.ewbik.live = False
    errors = []
    for frame in range(1, frames + 1):
        bpy.context.scene.frame_set(frame)
        for name, target in targets.items():
            head = rig.matrix_world @ rig.pose.bones[name].head
            errors.append((head - target.matrix_world.translation).length)
    return errors


if __name__ == "__main__":
    sys.exit(main())
