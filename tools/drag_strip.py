"""The README's strip of a live drag: the demo's drag, its mannequin rendered at five moments.

Pins the Rigify metarig's hands, feet and head as `make demo` does, skins the mannequin to it
first (so it follows the live solves), then drags the targets step by step; at the start, every
quarter of the drag and the end it renders a Workbench frame, and lays the frames side by side:
docs/drag_strip.png. Every frame is a live update's own pose (no Solve pressed).

    python tools/drag_strip.py [--size 300] [--out docs/drag_strip.png]
"""

import argparse
import pathlib
import sys
import tempfile

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "tools"))

import demo  # noqa: E402  (sets BLENDER_USER_RESOURCES to a temporary directory before importing bpy)

# isort: split

import mannequin  # noqa: E402
import numpy as np  # noqa: E402
import pose_gallery  # noqa: E402

SHOWN_STEPS = tuple(round(demo.DRAG_STEPS * share) for share in (0.0, 0.25, 0.5, 0.75, 1.0))


def frames(size, scratch):
    """PNG paths of the drag at SHOWN_STEPS, in order."""
    rig = demo.add_metarig()
    targets = demo.pin_bones(rig)
    mannequin.add(rig, demo.PINS)
    mannequin.add_target_rings(rig, targets)
    demo.stage(size, round(size * 1.2))
    rendered = []

    def render(step):
        if step in SHOWN_STEPS:
            rendered.append(scratch / f"step_{step:03d}.png")
            demo.render(rendered[-1])

    render(0)
    demo.drag(targets, after_step=render)
    return rendered


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=300, help="width of one frame in pixels")
    parser.add_argument("--out", type=pathlib.Path, default=REPO_ROOT / "docs" / "drag_strip.png")
    args = parser.parse_args(argv)
    demo.install_extension()
    with tempfile.TemporaryDirectory() as scratch:
        paths = frames(args.size, pathlib.Path(scratch))
        strip = np.concatenate([pose_gallery.load_pixels(path) for path in paths], axis=1)
    pose_gallery.save_png(strip, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
