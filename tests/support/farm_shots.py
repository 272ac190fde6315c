"""Small shots for the farm jobs' tests: `python -m tests.support.farm_shots EXTENSION_ZIP FOLDER NAME...`
(from the repository's root) saves
FOLDER/NAME.blend for each name, each a three-bone arm whose tip is pinned (through ewbik.pin) to a
target keyed on a path over frames 1-10, each shot on its own path."""

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


def main(extension_zip, folder, names):
    _, user_resources = install_extension(extension_zip)
    try:
        for number, name in enumerate(names, start=1):
            save_shot(pathlib.Path(folder) / f"{name}.blend", reach=0.5 * number)
    finally:
        shutil.rmtree(user_resources, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
