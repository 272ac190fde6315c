"""`make demo`: the extension at work in Blender-as-a-module, start to finish.

Builds the extension zip and installs it like a user would (into a temporary
user-resources directory, so the real Blender config is untouched), adds the
Rigify human metarig with the humanoid joint-limit preset, pins hands, feet
and head with the Pin operator, then drags the targets step by step into a
reach-and-crouch while the live handler solves on every depsgraph update. Writes out/demo.blend and a Workbench render
out/demo.png (a skinned mannequin of the rig, the pinned parts orange, each target a red ring), and
prints the time per live update and every pin's error.
"""

import os
import pathlib
import sys
import tempfile

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT_DIR = REPO_ROOT / "out"
USER_RESOURCES = tempfile.mkdtemp(prefix="ewbik-demo-user-")
os.environ["BLENDER_USER_RESOURCES"] = USER_RESOURCES  # before bpy: never touch the real config

import importlib  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402

import bpy  # noqa: E402  (first: it makes addon_utils importable)

# isort: split
import addon_utils  # noqa: E402
from mathutils import Euler, Matrix, Vector  # noqa: E402

sys.path.insert(0, str(REPO_ROOT / "tools"))
sys.path.insert(0, str(REPO_ROOT))
import build_extension  # noqa: E402
import mannequin  # noqa: E402

PINS = ("hand.L", "hand.R", "foot.L", "foot.R", "spine.006")
# Where each target goes (world-space offset from its start, then an extra turn in degrees):
# the figure crouches and leans in (head down and forward), reaches forward with the left hand
# and down toward the floor with the right, and keeps both feet planted; every target stays within
# reach, so each live update ends with every pin on its target.
MOVES = {
    "spine.006": (Vector((0.0, -0.22, -0.34)), (30.0, 0.0, 0.0)),
    "hand.L": (Vector((-0.25, -0.50, 0.0)), (0.0, 0.0, -40.0)),
    "hand.R": (Vector((0.28, -0.42, -0.62)), (50.0, 0.0, 30.0)),
    "foot.L": (Vector((0.0, 0.0, 0.0)), (0.0, 0.0, 0.0)),
    "foot.R": (Vector((0.04, 0.06, 0.0)), (0.0, 0.0, -10.0)),
}
DRAG_STEPS = 60
SOLVE_ITERATIONS = 2000


def install_extension():
    zip_path = build_extension.build(pathlib.Path(USER_RESOURCES) / "dist", only_here=True)
    result = bpy.ops.extensions.package_install_files(
        filepath=str(zip_path), repo="user_default", enable_on_install=True
    )
    if result != {"FINISHED"}:
        raise SystemExit(f"demo: installing {zip_path} failed: {result}")
    addon_utils.enable("rigify", default_set=True)
    print(f"installed {zip_path.name} as bl_ext.user_default.ewbik")


def add_metarig():
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.object.armature_human_metarig_add()
    rig = bpy.context.object
    rig.ewbik.translate_root = True  # the hips may drop: that is what a crouch is
    bpy.ops.ewbik.apply_limit_preset(preset="humanoid")  # knees and elbows bend the human way
    return rig


def pin_bones(rig):
    select_flag_on_pose_bone = "select" in bpy.types.PoseBone.bl_rna.properties
    bpy.ops.object.mode_set(mode="POSE")
    for pose_bone in rig.pose.bones:
        owner = pose_bone if select_flag_on_pose_bone else pose_bone.bone
        owner.select = pose_bone.name in PINS
    bpy.ops.ewbik.pin()
    bpy.ops.object.mode_set(mode="OBJECT")
    return {bone: rig.pose.bones[bone].ewbik.target for bone in PINS}


def drag(targets, after_step=None):
    """Move the targets in small steps, letting Blender evaluate after each, as a mouse drag does;
    `after_step(step)` runs after each step's update (the drag strip renders some of them)."""
    starts = {bone: target.matrix_world.copy() for bone, target in targets.items()}
    timings = []
    for step in range(1, DRAG_STEPS + 1):
        t = step / DRAG_STEPS
        ease = t * t * (3.0 - 2.0 * t)
        for bone, (offset, degrees) in MOVES.items():
            location, rotation, scale = starts[bone].decompose()
            turn = Euler([ease * d * 3.141592653589793 / 180.0 for d in degrees]).to_quaternion()
            targets[bone].matrix_world = Matrix.LocRotScale(location + ease * offset, turn @ rotation, scale)
        started = time.perf_counter()
        bpy.context.view_layer.update()
        timings.append((time.perf_counter() - started) * 1e3)
        if after_step is not None:
            after_step(step)
    return timings


def settle():
    """What Blender's timer does after the mouse stops: solve once more without the time budget
    when the last solve ran out of it."""
    live = importlib.import_module("bl_ext.user_default.ewbik.ewbik_addon.solve.live")
    if not live.has_unconverged():
        return 0
    live.refine_unconverged()
    bpy.context.view_layer.update()
    return 1


def pin_report(rig):
    lines = []
    for bone in PINS:
        pose = rig.matrix_world @ rig.pose.bones[bone].matrix
        target = rig.pose.bones[bone].ewbik.target.matrix_world
        distance = (pose.translation - target.translation).length
        angle = pose.to_quaternion().rotation_difference(target.to_quaternion()).angle
        lines.append(f"  {bone:10s} {distance * 1000:8.2f} mm {angle * 57.29577951308232:7.2f} deg")
    return "\n".join(lines)


def stage(width=960, height=720):
    """Floor, a three-quarter side camera and Workbench settings for the demo's pictures."""
    scene = bpy.context.scene
    bpy.ops.mesh.primitive_plane_add(size=6.0)
    bpy.context.object.color = (0.35, 0.37, 0.4, 1.0)
    camera_data = bpy.data.cameras.new("Demo camera")
    camera_data.lens = 50.0
    camera = bpy.data.objects.new("Demo camera", camera_data)
    scene.collection.objects.link(camera)
    camera.location = (3.3, -2.2, 1.35)  # three-quarter side view: the bent knees and the reach read best
    look_at = Vector((0.0, -0.2, 0.8))
    camera.rotation_euler = (look_at - camera.location).to_track_quat("-Z", "Y").to_euler()
    scene.camera = camera
    scene.render.engine = "BLENDER_WORKBENCH"
    scene.world = bpy.data.worlds.new("Demo world")
    scene.world.color = (0.8, 0.82, 0.85)
    scene.display.shading.light = "STUDIO"
    scene.display.shading.color_type = "OBJECT"
    scene.display.shading.show_shadows = True
    scene.display.shading.show_cavity = True
    scene.render.resolution_x = width
    scene.render.resolution_y = height
    scene.render.resolution_percentage = 100
    scene.render.image_settings.file_format = "PNG"


def render(png_path):
    bpy.context.scene.render.filepath = str(png_path)
    bpy.ops.render.render(write_still=True)


def main():
    OUT_DIR.mkdir(exist_ok=True)
    install_extension()
    rig = add_metarig()
    targets = pin_bones(rig)
    timings = drag(targets)
    timings.sort()
    print(
        f"live: {len(timings)} depsgraph updates with 5 pins, "
        f"median {timings[len(timings) // 2]:.2f} ms, max {timings[-1]:.2f} ms per update"
    )
    print(f"status: {rig.ewbik.status}")
    print("at the end of the drag (distance, angle to target):")
    print(pin_report(rig))
    updates = settle()
    print(f"after {updates} refinement updates from the live timer:")
    print(pin_report(rig))
    bpy.context.view_layer.objects.active = rig
    rig.ewbik.iterations = SOLVE_ITERATIONS
    bpy.ops.ewbik.solve()
    bpy.context.view_layer.update()
    print(f"after ewbik.solve ({SOLVE_ITERATIONS} iterations, no time budget):")
    print(pin_report(rig))
    mannequin.add(rig, PINS)
    mannequin.add_target_rings(rig, targets)
    blend_path = OUT_DIR / "demo.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(blend_path))
    print(f"saved {blend_path}")
    png_path = OUT_DIR / "demo.png"
    try:
        stage()
        render(png_path)
        print(f"rendered {png_path}")
    except RuntimeError as error:
        print(
            f"render failed ({error}); needs Mesa's software OpenGL: apt-get install libegl1 libegl-mesa0 "
            "libgl1-mesa-dri",
            file=sys.stderr,
        )
    bpy.ops.wm.save_as_mainfile(filepath=str(blend_path))
    shutil.rmtree(USER_RESOURCES, ignore_errors=True)


if __name__ == "__main__":
    main()
