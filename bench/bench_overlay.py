"""Limits overlay benchmark: what one viewport redraw costs with every limited bone of a humanoid shown.

Run with the Python of a bpy venv, e.g. `~/.cache/ewbik/venvs/bpy-5.2/bin/python bench/bench_overlay.py`.
Builds and installs the extension zip into a throw-away user-resources directory (as the Blender
tests do), adds the Rigify human metarig, applies the humanoid limit preset to all bones, and
shows every limited bone's Kusudama (scope All, pose mode). One redraw is what the draw handler
does: `armature_batches` (the cache check, and the numpy geometry plus GPU batches when it
misses) and `draw_batches` into a 1280x720 offscreen buffer, timed as wall and process CPU time
(CPU time is the steadier number on the shared machine). Rows:

- *unchanged*: nothing changed since the last redraw (orbiting the view, moving the mouse);
- *pose changed*: one bone turned before each redraw (posing, or the live solve moving bones);
- *limit edited*: one cone radius changed before each redraw (dragging a handle): one bone's
  region is cut again;
- *first show*: every bone's region cut from scratch (switching the scope to All once).

Results go to stdout and into docs/BENCHMARKS.md between the overlay markers.
"""

import os
import pathlib
import sys
import tempfile

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
USER_RESOURCES = tempfile.mkdtemp(prefix="ewbik-bench-overlay-")
os.environ["BLENDER_USER_RESOURCES"] = USER_RESOURCES  # before bpy: never touch the real config

import argparse  # noqa: E402
import math  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402

import bpy  # noqa: E402  (first: it makes addon_utils importable)

# isort: split
import addon_utils  # noqa: E402
import gpu  # noqa: E402
import numpy as np  # noqa: E402
from mathutils import Matrix, Quaternion, Vector  # noqa: E402

sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "bench"))
from bench_solver import machine_line, markdown_table, solver_fingerprint, stats  # noqa: E402

from tests.support.blender_helpers import (  # noqa: E402
    addon_module,
    build_metarig,
    extension_enabled,
    load_build_tool,
    make_active,
)

BENCHMARKS_MD = REPO_ROOT / "docs" / "BENCHMARKS.md"
OVERLAY_BEGIN = "<!-- bench:overlay -->"
OVERLAY_END = "<!-- /bench:overlay -->"
WIDTH, HEIGHT = 1280, 720
BUDGET_MS = 1.0


def install_extension():
    zip_path = load_build_tool().build(pathlib.Path(USER_RESOURCES) / "dist")
    result = bpy.ops.extensions.package_install_files(
        filepath=str(zip_path), repo="user_default", enable_on_install=True
    )
    if result != {"FINISHED"} or not extension_enabled():
        raise SystemExit(f"bench_overlay: installing {zip_path} failed: {result}")
    addon_utils.enable("rigify", default_set=True)


def start_gpu():
    """One tiny Workbench render: headless Blender's `gpu` module works only after it."""
    scene = bpy.context.scene
    camera = bpy.data.objects.new("bench camera", bpy.data.cameras.new("bench camera"))
    scene.collection.objects.link(camera)
    scene.camera = camera
    scene.render.engine = "BLENDER_WORKBENCH"
    scene.render.resolution_x = scene.render.resolution_y = 8
    bpy.ops.render.render()


def humanoid_rig():
    """The metarig in pose mode with the humanoid preset on every bone it recognises, all shown."""
    obj = build_metarig()
    make_active(obj)
    bpy.ops.object.mode_set(mode="POSE")
    preset = addon_module("solver.presets").available_presets()[0][0]
    assert bpy.ops.ewbik.apply_limit_preset(preset=preset) == {"FINISHED"}
    obj.ewbik.limits_scope = "ALL"
    obj.data.bones.active = obj.data.bones["forearm.L"]
    return obj


def view_matrices(obj):
    """A camera 4 m in front of the rig, looking at its chest."""
    target = obj.matrix_world @ Vector((0.0, 0.0, 1.2))
    eye = target + Vector((0.0, -4.0, 0.3))
    forward = (target - eye).normalized()
    right = forward.cross(Vector((0.0, 0.0, 1.0))).normalized()
    up = right.cross(forward)
    view = Matrix((right, up, -forward)).to_4x4() @ Matrix.Translation(-eye)
    f = 1.0 / math.tan(math.radians(25.0))
    near, far = 0.1, 100.0
    projection = Matrix(
        (
            (f * HEIGHT / WIDTH, 0, 0, 0),
            (0, f, 0, 0),
            (0, 0, (far + near) / (near - far), 2 * far * near / (near - far)),
            (0, 0, -1, 0),
        )
    )
    return view, projection


def redraw(overlay, obj, offscreen, view, projection):
    """One draw-handler call into the offscreen buffer.

    Returns (wall ms, CPU ms) of the batches (cache check or rebuild), then of the whole redraw
    with the GPU's drawing finished (a pixel read waits for it).
    """
    with offscreen.bind():
        gpu.state.active_framebuffer_get().clear(color=(0.0, 0.0, 0.0, 1.0), depth=1.0)
        gpu.state.viewport_set(0, 0, WIDTH, HEIGHT)
        with gpu.matrix.push_pop(), gpu.matrix.push_pop_projection():
            gpu.matrix.load_matrix(view)
            gpu.matrix.load_projection_matrix(projection)
            wall, cpu = time.perf_counter(), time.process_time()
            batches = overlay.armature_batches(obj)
            built = 1000.0 * (time.perf_counter() - wall), 1000.0 * (time.process_time() - cpu)
            overlay.draw_batches(batches, (WIDTH, HEIGHT), False)
            gpu.state.active_framebuffer_get().read_color(0, 0, 1, 1, 4, 0, "UBYTE")
            return (*built, 1000.0 * (time.perf_counter() - wall), 1000.0 * (time.process_time() - cpu))


def measure(obj, count):
    overlay = addon_module("ewbik_addon.viewport.overlay")
    view, projection = view_matrices(obj)
    offscreen = gpu.types.GPUOffScreen(WIDTH, HEIGHT)
    arm = obj.pose.bones["upper_arm.L"]
    arm.rotation_mode = "QUATERNION"
    cone = obj.pose.bones["forearm.L"].bone.ewbik.cones[0]
    rows = {}
    try:
        overlay._regions.clear()
        overlay._batches.clear()
        rows["first show (every region cut)"] = [redraw(overlay, obj, offscreen, view, projection)]
        for _ in range(5):
            redraw(overlay, obj, offscreen, view, projection)
        rows["unchanged"] = [redraw(overlay, obj, offscreen, view, projection) for _ in range(count)]
        samples = []
        for step in range(count):
            arm.rotation_quaternion = Quaternion((1.0, 0.0, 0.0), 0.3 * math.sin(step * 0.1))
            bpy.context.view_layer.update()
            samples.append(redraw(overlay, obj, offscreen, view, projection))
        rows["pose changed"] = samples
        samples = []
        for step in range(count // 4):
            cone.radius = math.radians(40.0 + 0.1 * step)
            bpy.context.view_layer.update()
            samples.append(redraw(overlay, obj, offscreen, view, projection))
        rows["limit edited (one bone)"] = samples
    finally:
        offscreen.free()
    return rows


def report(obj, rows, count):
    overlay = addon_module("ewbik_addon.viewport.overlay")
    shown = overlay.shown_bones(obj)
    geometry = overlay.overlay_geometry(obj)
    triangles = sum(len(geometry[kind]) for kind in overlay.FILLS if kind in geometry)
    lines = [
        machine_line(solver_fingerprint()),
        "",
        (
            f"Blender {bpy.app.version_string}; Rigify metarig, humanoid preset, {len(shown)} limited bones shown "
            f"(scope All), {triangles} filled triangles, {WIDTH}x{HEIGHT} offscreen; {count} redraws per row "
            f"(limit edited: {count // 4}); each cell median / p95. Budget: {BUDGET_MS:.0f} ms of batch work "
            "per unchanged redraw."
        ),
        "",
    ]
    table_rows = []
    for label, samples in rows.items():
        cells = [label]
        for column in range(4):
            median, p95, _ = stats([s[column] for s in samples])
            cells.append(f"{median:.3f} / {p95:.3f}")
        table_rows.append(cells + [str(len(samples))])
    header = [
        "redraw",
        "batches wall ms",
        "batches CPU ms",
        "whole redraw wall ms",
        "whole redraw CPU ms",
        "redraws",
    ]
    lines.append(markdown_table(header, table_rows))
    return "\n".join(lines)


def write_results(markdown):
    """Replace the overlay block of docs/BENCHMARKS.md, adding an "Overlay" section if it has none."""
    block = f"{OVERLAY_BEGIN}\n{markdown}\n{OVERLAY_END}"
    text = BENCHMARKS_MD.read_text()
    if OVERLAY_BEGIN in text and OVERLAY_END in text:
        head, rest = text.split(OVERLAY_BEGIN, 1)
        text = head + block + rest.split(OVERLAY_END, 1)[1]
    else:
        text = text.rstrip() + "\n\n## Limits overlay\n\n`bench/bench_overlay.py`.\n\n" + block + "\n"
    BENCHMARKS_MD.write_text(text)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redraws", type=int, default=200, help="redraws per row")
    parser.add_argument("--no-write", action="store_true", help="do not update docs/BENCHMARKS.md")
    args = parser.parse_args(argv)
    install_extension()
    bpy.ops.wm.read_homefile(use_empty=True)
    start_gpu()
    obj = humanoid_rig()
    rows = measure(obj, args.redraws)
    markdown = report(obj, rows, args.redraws)
    print(markdown)
    if not args.no_write:
        write_results(markdown)
        print(f"\nwrote {BENCHMARKS_MD}")
    shutil.rmtree(USER_RESOURCES, ignore_errors=True)
    unchanged = np.median([s[1] for s in rows["unchanged"]])
    if unchanged > BUDGET_MS:
        print(
            f"bench_overlay: batches of an unchanged redraw cost {unchanged:.3f} CPU ms, over the {BUDGET_MS} ms budget"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
