"""Bake key options benchmark: how many keys each way of baking writes, and how far it plays from
the per-frame bake.

Three motions on the Rigify metarig with hands, feet and head pinned (`ewbik.pin`, which turns
Move Root on):

- the procedural motion of `bench_bake.py` over `--frames` frames: targets keyed every 5
  frames, Bezier in between;
- the CMU walk and hop of tests/data/mocap retargeted over `--clip-frames` frames: every
  frame's targets keyed at the clip's wrists, ankles and top of the neck, the clip scaled to
  the metarig's height and shifted so its hips start on the metarig's hips. The clip's 120 Hz
  are played at 30 frames a second (one clip frame in 4) from 2 s in, past the standing start.
  Clip and metarig hands and feet are turned differently at rest, so the retargeted pins are
  Position Only.

Each motion is baked by `ewbik.bake`, each bake from the rest pose into an action of its own
(a baked frame is solved from the one before it, so every way starts alike): every frame; only the
frames the targets have keys on; every frame reduced within 1 mm at the pins and 1 degree at the
bones, and within 5 mm and 2 degrees. Each action is then played back frame by frame (live
solving off) and compared with the per-frame bake: the pinned bones' heads (mm) and every keyed
bone's rotation (degrees).

Usage: `python bench/bench_bake_keys.py [--frames 100] [--clip-frames 120] [--venvs
bpy-5.2,bpy-4.2]`. Any Python starts it; each Blender version runs in a subprocess with its
venv's interpreter, with the extension built and installed from this checkout. Prints a markdown
table.
"""

import argparse
import json
import math
import pathlib
import sys
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
MOCAP_DIR = bench_bake.REPO_ROOT / "tests" / "data" / "mocap"
CLIPS = {
    "CMU 131_01 walk on the metarig": MOCAP_DIR / "cmu_131_01.bvh",
    "CMU 131_03 hop on the metarig": MOCAP_DIR / "cmu_131_03.bvh",
}
RETARGETED = {
    "hand.L": "lhand",
    "hand.R": "rhand",
    "foot.L": "LeftAnkle",
    "foot.R": "RightAnkle",
    "spine.006": "Head",
}
"""Each pinned metarig bone and the clip bone whose head its target follows."""
CLIP_HIPS = "Hips"
CLIP_START = 240  # clip frame the bake's first frame shows (2 s in at 120 Hz)
CLIP_STEP = 4  # clip frames per baked frame: 120 Hz played at 30 frames a second


def _parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100, help="frames of the procedural motion")
    parser.add_argument("--clip-frames", type=int, default=120, help="frames of each retargeted clip")
    parser.add_argument(
        "--venvs", default="bpy-5.2,bpy-4.2", help="comma-separated venv names under VENV_DIR"
    )
    parser.add_argument("--worker", metavar="JSON", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = _parse_args(argv)
    if args.worker:
        return _worker(args)
    arguments = ["--frames", str(args.frames), "--clip-frames", str(args.clip_frames)]
    results = bench_bake.worker_results(args.venvs, __file__, arguments)
    print(markdown(results))
    return 0 if results else 1


def markdown(results):
    """Keys written and the largest miss from the per-frame bake, per motion and way of baking."""
    lines = [
        "| Blender | motion | frames | way | keys | bake seconds | largest miss at a pin, mm | "
        "largest bone turn, ° | on the targets' key frames: mm, ° |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        for motion in r["motions"]:
            every_frame = motion["ways"]["every frame"]["keys"]
            for way, run in motion["ways"].items():
                share = "" if way == "every frame" else f" ({100 * run['keys'] / every_frame:.0f} %)"
                lines.append(
                    f"| {r['blender']} | {motion['motion']} | {motion['frames']} | {way} | "
                    f"{run['keys']}{share} | {run['seconds']:.2f} | {run['miss_mm']:.3f} | "
                    f"{run['turn_deg']:.3f} | {run['keyed_miss_mm']:.3f}, {run['keyed_turn_deg']:.3f} |"
                )
    return "\n".join(lines)


def _worker(args):
    bpy = bench_bake._blender_with_extension()
    sys.path.insert(0, str(bench_bake.REPO_ROOT))
    motions = [("procedural, keyed every 5 frames", args.frames, _animate_procedurally)]
    motions += [(name, args.clip_frames, _clip_animation(path)) for name, path in CLIPS.items()]
    result = {"blender": bpy.app.version_string, "motions": []}
    for name, frames, animate in motions:
        bpy.ops.wm.read_homefile(use_empty=True)
        scene = bpy.context.scene
        scene.frame_start, scene.frame_end = 1, frames
        rig, targets = bench_bake._pinned_metarig(bpy)
        target_keys = animate(bpy, rig, targets, frames)
        ways = _compare_ways(bpy, rig, frames, target_keys)
        result["motions"].append({"motion": name, "frames": frames, "ways": ways})
    pathlib.Path(args.worker).write_text(json.dumps(result))
    return 0


def _animate_procedurally(bpy, rig, targets, frames):
    """`bench_bake`'s target motion; the indices of the frames the targets have keys on."""
    animate_targets(targets, frames)
    return range(0, frames, KEY_EVERY)


def _clip_animation(path):
    """The clip at `path` retargeted to the metarig: an animation that keys the targets on every
    frame, makes their pins Position Only and returns the indices of the frames the targets have
    keys on (all of them)."""

    def animate(bpy, rig, targets, frames):
        from tests.support import mocap  # (numpy: in Blender's Python, not the one starting the bench)

        clip = mocap.load_bvh(path, height=_height(rig))
        hips = mocap.effector_targets(clip, CLIP_START, [CLIP_HIPS])[CLIP_HIPS][:3, 3]
        root = next(pose_bone for pose_bone in rig.pose.bones if pose_bone.parent is None)
        shift = tuple(rig.matrix_world @ root.head) - hips
        for frame in range(1, frames + 1):
            places = mocap.effector_targets(clip, CLIP_START + CLIP_STEP * (frame - 1), RETARGETED.values())
            for bone, clip_bone in RETARGETED.items():
                targets[bone].location = tuple(places[clip_bone][:3, 3] + shift)
                targets[bone].keyframe_insert("location", frame=frame)
        for bone in RETARGETED:
            rig.pose.bones[bone].ewbik.pin_kind = "POSITION"
        bpy.context.scene.frame_set(1)
        return range(frames)

    return animate


def _height(rig):
    """The armature's rest height: from its lowest to its highest bone end."""
    heights = [point.z for bone in rig.data.bones for point in (bone.head_local, bone.tail_local)]
    return max(heights) - min(heights)


def _compare_ways(bpy, rig, frames, target_keys):
    """Each way baked into an action of its own and played against the per-frame bake: {way:
    keys, bake seconds, largest misses (mm, degrees) over all frames and over `target_keys`}."""
    bpy.context.view_layer.objects.active = rig
    rig.select_set(True)
    runs = {}
    for way, options in WAYS.items():
        if rig.animation_data is not None:
            rig.animation_data.action = None  # each way bakes into an action of its own
        for pose_bone in rig.pose.bones:
            pose_bone.matrix_basis.identity()
        start = time.perf_counter()
        assert bpy.ops.ewbik.bake(frame_start=1, frame_end=frames, **options) == {"FINISHED"}
        runs[way] = {"seconds": time.perf_counter() - start, "action": rig.animation_data.action}
    played = {way: _played(bpy, rig, run["action"], frames) for way, run in runs.items()}
    reference = played["every frame"]
    metres = 1e3 * bpy.context.scene.unit_settings.scale_length
    ways = {}
    for way, run in runs.items():
        misses, turns = _differences(played[way], reference)
        ways[way] = {
            "keys": sum(len(f.keyframe_points) for f in _fcurves(run["action"])),
            "seconds": run["seconds"],
            "miss_mm": metres * max(misses),
            "turn_deg": max(turns),
            "keyed_miss_mm": metres * max(misses[i] for i in target_keys),
            "keyed_turn_deg": max(turns[i] for i in target_keys),
        }
    return ways


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
