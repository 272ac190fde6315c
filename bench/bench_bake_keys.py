"""Bake key options benchmark: how many keys each way of baking writes, and how far it plays from
the per-frame bake.

The rig and motion of `bench_bake.py` (the Rigify metarig, hands, feet and head pinned, targets
keyed every 5 frames with Bezier in between), baked by `ewbik.bake` over `--frames` frames, each
bake into an action of its own: every frame; only the frames the targets have keys on; every
frame reduced within 1 mm at the pins and 1 degree at the bones, and within 5 mm and 2 degrees. Each action is then played back
frame by frame (live solving off) and compared with the per-frame bake: the pinned bones' heads
(mm) and every keyed bone's rotation (degrees).

Usage: `python bench/bench_bake_keys.py [--frames 100] [--venvs bpy-5.2,bpy-4.2]`. Any Python
starts it; each Blender version runs in a subprocess with its venv's interpreter, with the
extension built and installed from this checkout. Prints a markdown table.
"""

import argparse
import json
import math
import pathlib
import subprocess
import sys
import tempfile
import time

import bench_bake  # first: it puts the repository on sys.path

# isort: split
from tests.support.walking_targets import KEY_EVERY, animate_targets

WAYS = {
    "every frame": {},
    "keys only": {"keys_only": True},
    "1 mm / 1°": {"tolerance_mm": 1.0, "tolerance_deg": 1.0},
    "5 mm / 2°": {"tolerance_mm": 5.0, "tolerance_deg": 2.0},
}


def _parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100)
    parser.add_argument(
        "--venvs", default="bpy-5.2,bpy-4.2", help="comma-separated venv names under VENV_DIR"
    )
    parser.add_argument("--worker", metavar="JSON", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = _parse_args(argv)
    if args.worker:
        return _worker(args)
    results = []
    for venv in args.venvs.split(","):
        python = bench_bake.VENV_DIR / venv / "bin" / "python"
        if not python.is_file():
            print(f"skipping {venv}: {python} not found (make venvs)", file=sys.stderr)
            continue
        with tempfile.TemporaryDirectory(prefix="ewbik-bench-keys-") as scratch:
            out = pathlib.Path(scratch) / "result.json"
            command = [str(python), __file__, "--worker", str(out), "--frames", str(args.frames)]
            run = subprocess.run(command, capture_output=True, text=True)
            if not out.is_file():
                print(f"{venv} failed:\n{run.stdout[-2000:]}\n{run.stderr[-6000:]}", file=sys.stderr)
                continue
            results.append(json.loads(out.read_text()))
    print(markdown(results))
    return 0 if results else 1


def markdown(results):
    """Keys written and the largest miss from the per-frame bake, per way of baking."""
    lines = [
        "| Blender | frames | way | keys | bake seconds | largest miss at a pin, mm | largest bone turn, ° | "
        "on the targets' key frames: mm, ° |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        for way, run in r["ways"].items():
            lines.append(
                f"| {r['blender']} | {r['frames']} | {way} | {run['keys']} | {run['seconds']:.2f} | "
                f"{run['miss_mm']:.3f} | {run['turn_deg']:.3f} | {run['keyed_miss_mm']:.3f}, "
                f"{run['keyed_turn_deg']:.3f} |"
            )
    return "\n".join(lines)


def _worker(args):
    bpy = bench_bake._blender_with_extension()
    frames = args.frames
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    rig, targets = bench_bake._pinned_metarig(bpy)
    animate_targets(targets, frames)
    scene.frame_set(1)
    bpy.context.view_layer.objects.active = rig
    rig.select_set(True)
    runs = {}
    for way, options in WAYS.items():
        if rig.animation_data is not None:
            rig.animation_data.action = None  # each way bakes into an action of its own
        start = time.perf_counter()
        assert bpy.ops.ewbik.bake(frame_start=1, frame_end=frames, **options) == {"FINISHED"}
        runs[way] = {"seconds": time.perf_counter() - start, "action": rig.animation_data.action}
    played = {way: _played(bpy, rig, run["action"], frames) for way, run in runs.items()}
    reference = played["every frame"]
    result = {"blender": bpy.app.version_string, "frames": frames, "ways": {}}
    metres = 1e3 * scene.unit_settings.scale_length
    target_keys = range(0, frames, KEY_EVERY)
    for way, run in runs.items():
        misses, turns = _differences(played[way], reference)
        result["ways"][way] = {
            "keys": sum(len(f.keyframe_points) for f in _fcurves(run["action"])),
            "seconds": run["seconds"],
            "miss_mm": metres * max(misses),
            "turn_deg": max(turns),
            "keyed_miss_mm": metres * max(misses[i] for i in target_keys),
            "keyed_turn_deg": max(turns[i] for i in target_keys),
        }
    pathlib.Path(args.worker).write_text(json.dumps(result))
    return 0


def _differences(played, reference):
    """Per frame: the largest pinned head distance and the largest bone turn (degrees) between two
    playbacks."""
    misses = [
        max((a - b).length for a, b in zip(ours, theirs)) for ours, theirs in zip(played[0], reference[0])
    ]
    turns = [
        max(math.degrees(a.rotation_difference(b).angle) for a, b in zip(ours, theirs))
        for ours, theirs in zip(played[1], reference[1])
    ]
    return misses, turns


def _fcurves(action):
    if not hasattr(action, "slots"):
        return list(action.fcurves)
    return [
        f
        for layer in action.layers
        for strip in layer.strips
        for bag in strip.channelbags
        for f in bag.fcurves
    ]


def _played(bpy, rig, action, frames):
    """(pinned heads in world space, every pose bone's rotation) on each frame `action` plays."""
    anim_data = rig.animation_data
    anim_data.action = action
    if hasattr(anim_data, "action_slot"):
        anim_data.action_slot = action.slots[0]
    heads, rotations = [], []
    for frame in range(1, frames + 1):
        bpy.context.scene.frame_set(frame)
        heads.append([rig.matrix_world @ rig.pose.bones[name].head for name in bench_bake.PINS])
        rotations.append([pose_bone.matrix_basis.to_quaternion() for pose_bone in rig.pose.bones])
    return heads, rotations


if __name__ == "__main__":
    sys.exit(main())
