"""Shots for the farm jobs' tests and bench: `python -m tests.support.farm_shots [--walk FRAMES]
EXTENSION_ZIP FOLDER NAME...` (from the repository's root) saves FOLDER/NAME.blend for each name.
Without --walk each is a small shot: a three-bone arm whose tip is pinned (through ewbik.pin) to a
target keyed on a path over frames 1-10, each shot on its own path. With --walk each is a
production-sized one: the Rigify human metarig (159 bones, the extension's default settings) with
hands, feet and head pinned to targets keyed on a walk-like loop over frames 1-FRAMES."""

import argparse
import pathlib
import shutil
import sys

from tests.support.bpy_blender import install_extension

ARM = (
    ("upper", None, (0.0, 0.0, 0.0), (0.0, 0.0, 1.0), 0.0),
    ("lower", "upper", (0.0, 0.0, 1.0), (0.0, 0.0, 2.0), 0.0),
    ("hand", "lower", (0.0, 0.0, 2.0), (0.0, 0.0, 2.5), 0.0),
)
FRAMES = (1, 10)


def save_shot(path, reach):
    """An arm whose pinned hand's target moves from its rest place toward (reach, 0, 1.5)."""
    import bpy

    from tests.support.blender_helpers import build_armature, pin

    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = FRAMES
    arm = build_armature("Arm", ARM, connect_touching=True)
    target = pin(arm, "hand")["hand"]
    bpy.ops.object.mode_set(mode="OBJECT")
    start = target.location.copy()
    for frame, location in zip(FRAMES, (start, (reach, 0.0, 1.5))):
        target.location = location
        target.keyframe_insert("location", frame=frame)
    bpy.ops.wm.save_as_mainfile(filepath=str(path))


def save_walk_shot(path, frames):
    """The metarig with hands, feet and head pinned, their targets walking over frames 1-`frames`."""
    import bpy

    # isort: split
    import addon_utils  # (after bpy, which makes it importable)

    from tests.support.blender_helpers import HANDS_FEET_HEAD, build_metarig, pin
    from tests.support.walking_targets import animate_targets

    bpy.ops.wm.read_homefile(use_empty=True)
    addon_utils.enable("rigify", default_set=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    targets = pin(build_metarig(), *HANDS_FEET_HEAD)
    bpy.ops.object.mode_set(mode="OBJECT")
    animate_targets(targets, frames)
    scene.frame_set(1)
    bpy.ops.wm.save_as_mainfile(filepath=str(path))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--walk", type=int, metavar="FRAMES", help="metarig shots over frames 1-FRAMES")
    parser.add_argument("extension_zip")
    parser.add_argument("folder", type=pathlib.Path)
    parser.add_argument("names", nargs="+")
    arguments = parser.parse_args(argv)
    _, user_resources = install_extension(arguments.extension_zip)
    try:
        for number, name in enumerate(arguments.names, start=1):
            path = arguments.folder / f"{name}.blend"
            if arguments.walk is None:
                save_shot(path, reach=0.5 * number)
            else:
                save_walk_shot(path, arguments.walk)
    finally:
        shutil.rmtree(user_resources, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
