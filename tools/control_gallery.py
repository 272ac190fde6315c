"""`make control-gallery`: one picture per solver control, on the Rigify metarig with the default settings.

Pins bones with `ewbik.pin` as a new user does (Humanoid Limits on Pin; Stand on Pin: Move Root
on and the feet planted), drags targets in live-solved steps, presses Solve and renders the pose
with tools/pose_gallery.py's stage (Workbench, the mannequin, pinned parts orange, each target a
red ring):

- `metarig_pole_knee.png`: hips dropped into a crouch, the left foot's pole out to the side and
  forward; the left knee turns out toward it (the pole a blue ball).
- `metarig_aim_head.png`: the head an AIM pin at an empty up, ahead and to the left (a blue
  ball), its gaze (the aimed -Z axis from the head bone's head, as long as the way to the ball) drawn
  as a blue line; hands and feet held.
- `metarig_reach_balance_off.png`, `metarig_reach_balance_on.png`: the right hand dragged
  forward and down below the hips, the feet planted, Balance off and on, seen from the side; the
  support polygon of the feet drawn on the floor (blue) and the centre of mass's ground
  projection (yellow, red where it lies outside the polygon) with a line up to the centre of mass.

    python tools/control_gallery.py [--size 400] [--out docs/gallery]
"""

import argparse
import importlib
import pathlib
import shutil
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "tools"))
sys.path.insert(0, str(REPO_ROOT))

import demo  # noqa: E402  (sets BLENDER_USER_RESOURCES to a temporary directory before importing bpy)

# isort: split
import bpy  # noqa: E402
import pose_gallery  # noqa: E402
from mathutils import Vector  # noqa: E402

from tests.support import moves  # noqa: E402

PACKAGE = "bl_ext.user_default.ewbik"
STEPS = 8
BLUE, YELLOW, RED = (0.15, 0.4, 0.95, 1.0), (1.0, 0.85, 0.1, 1.0), (0.9, 0.1, 0.1, 1.0)


def addon(name):
    return importlib.import_module(f"{PACKAGE}.{name}")


def pinned(obj, *names):
    """Pin `names` with the operator, as a user does; {bone: target}."""
    bpy.context.view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="POSE")
    flag_on_pose_bone = "select" in bpy.types.PoseBone.bl_rna.properties
    for pose_bone in obj.pose.bones:
        (pose_bone if flag_on_pose_bone else pose_bone.bone).select = pose_bone.name in names
    bpy.ops.ewbik.pin()
    bpy.ops.object.mode_set(mode="OBJECT")
    return {bone: obj.pose.bones[bone].ewbik.target for bone in names}


def dragged(moved):
    """Move each target of `moved` {target: offset} in live-solved steps, then press Solve."""
    starts = {target: target.location.copy() for target in moved}
    for step in range(1, STEPS + 1):
        for target, offset in moved.items():
            target.location = starts[target] + offset * (step / STEPS)
        bpy.context.view_layer.update()
    demo.settle()
    assert bpy.ops.ewbik.solve() == {"FINISHED"}


def ball(location, radius, colour):
    bpy.ops.mesh.primitive_uv_sphere_add(radius=radius, location=location)
    bpy.context.object.color = colour


def pole_knee(obj):
    targets = pinned(obj, "spine", "foot.L", "foot.R", "hand.L", "hand.R", "spine.006")
    bpy.context.view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="POSE")
    flag_on_pose_bone = "select" in bpy.types.PoseBone.bl_rna.properties
    for pose_bone in obj.pose.bones:
        (pose_bone if flag_on_pose_bone else pose_bone.bone).select = pose_bone.name == "foot.L"
    obj.data.bones.active = obj.data.bones["foot.L"]
    assert bpy.ops.ewbik.add_pole() == {"FINISHED"}
    bpy.ops.object.mode_set(mode="OBJECT")
    pole = obj.pose.bones["foot.L"].ewbik.pole
    knee = obj.matrix_world @ obj.pose.bones["shin.L"].head
    pole.location = knee + Vector((0.8, -0.1, 0.1))
    down = Vector((0.0, 0.0, -0.45))
    dragged({targets[b]: down for b in ("spine", "hand.L", "hand.R", "spine.006")})
    ball(pole.matrix_world.translation, 0.04, BLUE)
    return targets, "left foot's pole out to the side: the knee turns out", [pole.matrix_world.translation]


def aim_head(obj):
    targets = pinned(obj, "hand.L", "hand.R", "foot.L", "foot.R", "spine.006")
    props = obj.pose.bones["spine.006"].ewbik
    props.pin_kind, props.aim_axis = "AIM", "-Z"
    looked_at = targets.pop("spine.006")
    head = obj.matrix_world @ obj.pose.bones["spine.006"].head
    looked_at.location = head + Vector((0.0, -1.0, 0.0))
    bpy.context.view_layer.update()
    dragged({looked_at: Vector((0.6, 0.0, 0.5))})
    ball(looked_at.matrix_world.translation, 0.04, BLUE)
    head_matrix = obj.matrix_world @ obj.pose.bones["spine.006"].matrix
    gaze = -head_matrix.to_3x3().normalized().col[2]
    start = head_matrix.translation
    line(start, start + (looked_at.matrix_world.translation - start).length * gaze, BLUE)
    return targets, "head an AIM pin: its gaze (blue line) on the ball", [looked_at.matrix_world.translation]


def line(start, end, colour):
    """A thin rod from `start` to `end`."""
    way = end - start
    bpy.ops.mesh.primitive_cylinder_add(radius=0.006, depth=way.length, location=(start + end) / 2)
    rod = bpy.context.object
    rod.rotation_mode = "QUATERNION"
    rod.rotation_quaternion = way.to_track_quat("Z", "Y")
    rod.color = colour


def reach(obj, balance):
    targets = pinned(obj, "hand.R", "foot.L", "foot.R")
    obj.ewbik.balance = balance
    dragged({targets["hand.R"]: Vector((0.1, -0.7, -0.9))})
    com, corners = addon("ewbik_addon.rigs.balance_body").balance_shape(
        obj, addon("ewbik_addon.bridge.rig_cache").rig_for(obj, False)
    )
    floor = min(c[2] for c in corners)
    mesh = bpy.data.meshes.new("support")
    mesh.from_pydata([(c[0], c[1], floor + 0.003) for c in corners], [], [list(range(len(corners)))])
    polygon = bpy.data.objects.new("support", mesh)
    polygon.color = BLUE
    bpy.context.scene.collection.objects.link(polygon)
    ground = Vector((com[0], com[1], floor + 0.006))
    support = addon("solver.balance").Support(
        corners, addon("solver.balance")._ground_axes([0.0, 0.0, 1.0]), None
    )
    ball(ground, 0.03, YELLOW if support.depth(com) >= 0.0 else RED)
    bpy.ops.mesh.primitive_cylinder_add(
        radius=0.005, depth=com[2] - floor, location=(com[0], com[1], (com[2] + floor) / 2)
    )
    bpy.context.object.color = YELLOW
    ball(Vector(com), 0.025, YELLOW)
    return targets, f"hand reaching below the hips, Balance {'on' if balance else 'off'}", []


CASES = {
    "pole_knee": (pole_knee, "front"),
    "aim_head": (aim_head, "side"),
    "reach_balance_off": (lambda obj: reach(obj, False), "side"),
    "reach_balance_on": (lambda obj: reach(obj, True), "side"),
}


def run(out_dir, size):
    spec = moves.RIGS["metarig"]
    for name, (perform, view) in CASES.items():
        bpy.ops.wm.read_homefile(use_empty=True)
        obj = moves.build_rig("metarig")
        targets, label, extra = perform(obj)
        pose_gallery.stage(obj, spec, targets, f"metarig  {label}")
        left, forward = moves.body_frame(obj, spec)
        points = pose_gallery._points(obj, targets) + extra
        if view == "front":
            pose_gallery.aim_camera(
                bpy.context.scene.camera, points, (forward - 0.2 * left + 0.6 * moves.UP).normalized()
            )
        else:
            pose_gallery.aim_camera(
                bpy.context.scene.camera, points, (-left + 0.15 * forward + 0.15 * moves.UP).normalized()
            )
        png_path = out_dir / f"metarig_{name}.png"
        pose_gallery.render(png_path, size)
        print(f"{png_path.name}: {label}", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=400, help="picture width and height in pixels")
    parser.add_argument("--out", type=pathlib.Path, default=REPO_ROOT / "docs" / "gallery")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    demo.install_extension()
    try:
        run(args.out, args.size)
    finally:
        shutil.rmtree(demo.USER_RESOURCES, ignore_errors=True)


if __name__ == "__main__":
    main()
