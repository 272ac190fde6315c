"""`make gallery`: the moves animators make, as numbers and as pictures, on two rigs.

For the Rigify human metarig and the CMU 131_01 BVH rig (frame 1), pins bones with `ewbik.pin`
and drags targets through the moves of tests/support/moves.py (shared with
tests/blender/test_natural_moves.py): crouch, knee lift, reach and hand to mouth without limits
and with Presets > Humanoid; knee lift, a low crouch, a squat, reaches to the knee and to the
floor and a lone hand with every setting as a new user finds it. Prints a table (pin errors,
planted-foot slide, elbow and knee bends and whether they bend the anatomical way, the trunk's
lean), writes it to docs/gallery/measurements.md, renders one Workbench picture per (rig, move,
config) from a three-quarter front view of the rig's skinned mannequin (tools/mannequin.py:
pinned parts orange, each target a red ring), and contact sheets per rig: `<rig>_sheet.png`
(rows: no limits, humanoid; columns: their moves) and `<rig>_defaults_sheet.png` (the default
settings' moves in one row).

    python tools/pose_gallery.py [--rig metarig] [--move reach] [--size 400] [--out DIR]
"""

import argparse
import pathlib
import shutil
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "tools"))
sys.path.insert(0, str(REPO_ROOT))

import demo  # noqa: E402  (sets BLENDER_USER_RESOURCES to a temporary directory before importing bpy)

# isort: split
import addon_utils  # noqa: E402
import bpy  # noqa: E402
import mannequin  # noqa: E402
import numpy as np  # noqa: E402
from mathutils import Matrix, Vector  # noqa: E402

from tests.support import moves  # noqa: E402

CONFIG_LABELS = {"free": "no limits", "humanoid": "humanoid limits", "default": "default settings"}
SHEETS = {"sheet": ("free", "humanoid"), "defaults_sheet": ("default",)}  # file suffix: its rows


def add_bone_shapes(obj, pinned):
    """Renders do not show armatures: give every body bone an octahedral mesh that follows it (the
    bones view, where the bones themselves explain something: joint limits)."""
    skipped = set()
    if "face" in obj.data.bones:
        skipped = {bone.name for bone in obj.data.bones["face"].children_recursive} | {"face"}
    collection = bpy.data.collections.new("Gallery bone shapes")
    bpy.context.scene.collection.children.link(collection)
    for pose_bone in obj.pose.bones:
        length = pose_bone.bone.length
        if pose_bone.name in skipped or length < 0.01:
            continue
        r, neck = 0.12 * length, 0.2 * length
        mesh = bpy.data.meshes.new(f"shape {pose_bone.name}")
        mesh.from_pydata(
            [(0, 0, 0), (r, neck, r), (-r, neck, r), (-r, neck, -r), (r, neck, -r), (0, length, 0)],
            [],
            [(0, 1, 2), (0, 2, 3), (0, 3, 4), (0, 4, 1), (5, 2, 1), (5, 3, 2), (5, 4, 3), (5, 1, 4)],
        )
        shape = bpy.data.objects.new(mesh.name, mesh)
        shape.color = mannequin.PINNED_COLOUR if pose_bone.name in pinned else mannequin.BODY_COLOUR
        collection.objects.link(shape)
        shape.parent = obj
        shape.parent_type = "BONE"
        shape.parent_bone = pose_bone.name
        shape.matrix_parent_inverse = Matrix.Translation(
            (0.0, -length, 0.0)
        )  # bone parenting attaches at the tail


def _points(obj, targets):
    points = [obj.matrix_world @ p for b in obj.pose.bones for p in (b.head, b.tail)]
    return points + [t.matrix_world.translation for t in targets.values()]


def aim_camera(camera, points, toward_camera):
    """Place the camera along toward_camera so that every point is inside the middle 80 % of its view."""
    low = Vector([min(p[i] for p in points) for i in range(3)])
    high = Vector([max(p[i] for p in points) for i in range(3)])
    centre = (low + high) / 2.0
    rotation = (-toward_camera).to_track_quat("-Z", "Y")
    right, up = rotation @ Vector((1.0, 0.0, 0.0)), rotation @ Vector((0.0, 1.0, 0.0))
    half_view = 0.8 * 18.0 / camera.data.lens  # a 36 mm sensor, square picture
    distance = max(
        (p - centre).dot(toward_camera)
        + max(abs((p - centre).dot(right)), abs((p - centre).dot(up))) / half_view
        for p in points
    )
    camera.location = centre + toward_camera * distance
    camera.rotation_euler = rotation.to_euler()


def add_label(camera, text):
    """Text in the top left corner of the view of a 50 mm camera, one metre in front of it."""
    curve = bpy.data.curves.new("Gallery label", type="FONT")
    curve.body = text
    curve.size = 0.025
    label = bpy.data.objects.new("Gallery label", curve)
    label.color = (0.05, 0.05, 0.05, 1.0)
    bpy.context.scene.collection.objects.link(label)
    label.parent = camera
    label.location = (-0.34, 0.31, -1.0)


def stage(obj, spec, targets, label):
    """Floor, the rig's mannequin with its target rings, a three-quarter front camera from the
    figure's right, a label."""
    points = _points(obj, targets)
    floor = min(p.z for p in points)
    height = max(p.z for p in points) - floor
    feet = sum((obj.matrix_world @ obj.pose.bones[foot].head for foot in spec.feet), Vector()) / 2.0
    bpy.ops.mesh.primitive_plane_add(size=1.2 * height, location=(feet.x, feet.y, floor))
    bpy.context.object.color = (0.35, 0.37, 0.4, 1.0)
    mannequin.add(obj, set(targets))
    mannequin.add_target_rings(obj, targets)
    left, forward = moves.body_frame(obj, spec)
    camera = bpy.data.objects.new("Gallery camera", bpy.data.cameras.new("Gallery camera"))
    camera.data.lens = 50.0
    bpy.context.scene.collection.objects.link(camera)
    aim_camera(camera, points, (0.75 * forward - 0.66 * left + 0.2 * moves.UP).normalized())
    bpy.context.scene.camera = camera
    add_label(camera, label)


def render(png_path, size):
    scene = bpy.context.scene
    scene.render.engine = "BLENDER_WORKBENCH"
    scene.world = bpy.data.worlds.new("Gallery world")
    scene.world.color = (0.8, 0.82, 0.85)
    shading = scene.display.shading
    shading.light = "STUDIO"
    shading.color_type = "OBJECT"
    shading.show_shadows = False
    shading.show_cavity = False
    scene.render.resolution_x = scene.render.resolution_y = size
    scene.render.resolution_percentage = 100
    settings = scene.render.image_settings
    settings.file_format = "PNG"
    settings.color_mode = "RGB"
    settings.compression = 100
    scene.render.filepath = str(png_path)
    bpy.ops.render.render(write_still=True)
    save_png(load_pixels(png_path), png_path)


def save_png(pixels, png_path):
    """Write (height, width, 4) floats as an RGB PNG, quantized to 32 levels per channel (a quarter of the bytes)."""
    levels = 31.0
    pixels = np.round(pixels * levels) / levels
    image = bpy.data.images.new("Gallery picture", pixels.shape[1], pixels.shape[0])
    image.pixels.foreach_set(np.ascontiguousarray(pixels, dtype=np.float32).ravel())
    image.filepath_raw = str(png_path)
    image.file_format = "PNG"
    image.save()
    bpy.data.images.remove(image)


def load_pixels(png_path):
    image = bpy.data.images.load(str(png_path))
    width, height = image.size
    pixels = np.empty(width * height * 4, dtype=np.float32)
    image.pixels.foreach_get(pixels)
    bpy.data.images.remove(image)
    return pixels.reshape(height, width, 4)


def contact_sheet(tiles, sheet_path):
    """tiles: rows of PNG paths (bottom row last); each tile halved by averaging 2x2 blocks."""
    rows = []
    for row in tiles:
        shrunk = []
        for png_path in row:
            pixels = load_pixels(png_path)
            h, w = pixels.shape[0] // 2 * 2, pixels.shape[1] // 2 * 2
            shrunk.append(pixels[:h, :w].reshape(h // 2, 2, w // 2, 2, 4).mean(axis=(1, 3)))
        rows.append(np.concatenate(shrunk, axis=1))
    save_png(np.concatenate(rows[::-1], axis=0), sheet_path)  # Blender images start at the bottom row


def _yes_no(flags):
    return "/".join("ok" if flag else "NO" for flag in flags)


def table_row(outcome):
    pins = " ".join(f"{bone} {error:.2f}" for bone, error in outcome.pin_error_mm.items())
    slide = " ".join(f"{bone} {mm:.2f}" for bone, mm in outcome.foot_slide_mm.items())
    elbows = " ".join(f"{b:.0f}({h:.0f})" for b, h in zip(outcome.elbow_bend_deg, outcome.elbow_hinge_deg))
    knees = " ".join(f"{b:.0f}({f:+.0f})" for b, f in zip(outcome.knee_bend_deg, outcome.knee_front_mm))
    raised = " ".join(f"{mm:+.0f}" for mm in outcome.elbow_above_shoulder_mm)
    return (
        f"| {outcome.rig} | {outcome.move} | {outcome.config} | {pins} | {slide} | {elbows} | "
        f"{_yes_no(outcome.elbows_anatomical)} | {raised} | {knees} | {_yes_no(outcome.knees_forward)} | "
        f"{outcome.torso_twist_deg:.0f} | {outcome.lean_deg:.0f} | {outcome.head_front_mm:.0f} | "
        f"{'yes' if outcome.finite else 'NO'} |"
    )


TABLE_HEADER = (
    "| rig | move | config | pin error (mm) | planted foot slide (mm) | elbow L R bend deg (hinge deg) "
    "| elbows anatomical | elbow L R above shoulder (mm) | knee L R bend deg (front mm) | knees forward "
    "| torso twist deg | trunk lean deg | head in front of hips mm | finite |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def picture(obj, rig_name, move, config, targets, png_path, size):
    """Stage and render one case; False (with the reason on stderr) where Workbench cannot render."""
    stage(
        obj, moves.RIGS[rig_name], targets, f"{rig_name}  {move.replace('_', ' ')}  {CONFIG_LABELS[config]}"
    )
    try:
        render(png_path, size)
    except RuntimeError as error:
        print(
            f"gallery: no pictures, rendering failed ({error}); needs Mesa's software OpenGL: "
            "apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri",
            file=sys.stderr,
        )
        return False
    return True


def run(rig_names, move_names, out_dir, picture_size):
    """Perform every case, print its table row; render pictures and sheets while picture_size is not 0."""
    rows = []
    for rig_name in rig_names:
        for suffix, configs in SHEETS.items():
            sheet = []
            for config in configs:
                row = []
                for move in [move for move in move_names if config in moves.MOVES[move].configs]:
                    bpy.ops.wm.read_homefile(use_empty=True)
                    obj, targets, outcome = moves.perform(rig_name, move, config)
                    rows.append(table_row(outcome))
                    print(rows[-1], flush=True)
                    png_path = out_dir / f"{rig_name}_{move}_{config}.png"
                    if picture_size and not picture(
                        obj, rig_name, move, config, targets, png_path, picture_size
                    ):
                        picture_size = 0
                    row.append(png_path)
                if row:
                    sheet.append(row)
            if picture_size and sheet:
                contact_sheet(sheet, out_dir / f"{rig_name}_{suffix}.png")
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rig", choices=sorted(moves.RIGS), action="append")
    parser.add_argument("--move", choices=list(moves.MOVES), action="append")
    parser.add_argument(
        "--size", type=int, default=400, help="picture width and height in pixels (0: no pictures)"
    )
    parser.add_argument("--out", type=pathlib.Path, default=REPO_ROOT / "docs" / "gallery")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    demo.install_extension()
    addon_utils.enable("io_anim_bvh", default_set=True)
    print(TABLE_HEADER)
    try:
        rows = run(args.rig or list(moves.RIGS), args.move or list(moves.MOVES), args.out, args.size)
    finally:
        shutil.rmtree(demo.USER_RESOURCES, ignore_errors=True)
    if not args.rig and not args.move:
        (args.out / "measurements.md").write_text(
            TABLE_HEADER + "\n" + "\n".join(rows) + "\n", encoding="utf-8"
        )


if __name__ == "__main__":
    main()
