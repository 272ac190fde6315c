"""Pictures of joint limits in the viewport for the README: a shoulder, a knee, a spine, a drag.

Renders the Rigify human metarig with the humanoid limit preset in Workbench (bone shapes as in
`make gallery`), then draws the extension's own limits overlay offscreen with the same camera
and lays it over the render. The overlay is drawn twice, over black and over white, which gives
each pixel's colour and coverage exactly. The drag picture shows a shoulder cone's rim being
pulled wider through `LimitEdit` (the handle's own code), its handles as markers and the header
text the viewport would show.

    python tools/limit_pictures.py [--size 420] [--out docs/limits]
"""

import argparse
import importlib
import math
import pathlib
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "tools"))
sys.path.insert(0, str(REPO_ROOT))

import demo  # noqa: E402  (sets BLENDER_USER_RESOURCES to a temporary directory before importing bpy)

# isort: split

import addon_utils  # noqa: E402
import bpy  # noqa: E402
import gpu  # noqa: E402
import numpy as np  # noqa: E402
import pose_gallery  # noqa: E402
from mathutils import Quaternion, Vector  # noqa: E402

PICTURES = (
    # (file, bone, toward the camera in the bone's limit frame, bones posed {name: (axis, degrees)}, label)
    (
        "shoulder",
        "upper_arm.L",
        (1.0, 0.3, 0.6),
        {"upper_arm.L": ((0.0, 0.0, 1.0), -30.0)},
        "Shoulder (upper_arm.L)",
    ),
    (
        "knee",
        "shin.L",
        (0.45, 0.35, 1.0),  # across the hinge's plane: seen along it, the band is a rim
        {"thigh.L": ((1.0, 0.0, 0.0), -40.0), "shin.L": ((1.0, 0.0, 0.0), 60.0)},
        "Knee (shin.L)",
    ),
    (
        "spine",
        "spine.003",
        (0.4, 0.6, 1.0),
        {"spine.003": ((0.0, 0.0, 1.0), 25.0)},
        "Chest (spine.003), past its limit",
    ),
)
DRAG = ("drag", "upper_arm.L", (1.0, 0.3, 0.6), {"upper_arm.L": ((0.0, 0.0, 1.0), -30.0)})


def addon(name):
    return importlib.import_module(f"bl_ext.user_default.ewbik.{name}")


def humanoid_metarig():
    """The demo's metarig (humanoid limits on), in pose mode, live solving off."""
    obj = demo.add_metarig()
    obj.ewbik.live = False
    bpy.ops.object.mode_set(mode="POSE")
    return obj


def pose(obj, turns):
    for name, (axis, degrees) in turns.items():
        pose_bone = obj.pose.bones[name]
        pose_bone.rotation_mode = "QUATERNION"
        pose_bone.rotation_quaternion = Quaternion(Vector(axis).normalized(), math.radians(degrees))
    bpy.context.view_layer.update()


def overlay_layer(obj, camera, size):
    """(size, size, 4) float RGBA of the overlay alone, straight alpha, bottom row first."""
    overlay = addon("ewbik_addon.viewport.overlay")
    view = camera.matrix_world.inverted()
    projection = camera.calc_matrix_camera(bpy.context.evaluated_depsgraph_get(), x=size, y=size)
    drawn = []
    offscreen = gpu.types.GPUOffScreen(size, size)
    try:
        for background in (0.0, 1.0):
            with offscreen.bind():
                framebuffer = gpu.state.active_framebuffer_get()
                framebuffer.clear(color=(background, background, background, 1.0), depth=1.0)
                gpu.state.viewport_set(0, 0, size, size)
                with gpu.matrix.push_pop(), gpu.matrix.push_pop_projection():
                    gpu.matrix.load_matrix(view)
                    gpu.matrix.load_projection_matrix(projection)
                    overlay.draw_limits_overlay()
                buffer = framebuffer.read_color(0, 0, size, size, 4, 0, "FLOAT")
            buffer.dimensions = size * size * 4
            drawn.append(np.array(buffer.to_list(), dtype=np.float32).reshape(size, size, 4)[..., :3])
    finally:
        offscreen.free()
    over_black, over_white = drawn
    alpha = np.clip(1.0 - (over_white - over_black).mean(axis=-1, keepdims=True), 0.0, 1.0)
    colour = np.where(alpha > 1e-3, over_black / np.maximum(alpha, 1e-3), 0.0)
    return np.concatenate([np.clip(colour, 0.0, 1.0), alpha], axis=-1)


def stage(obj, bone_name, toward, label):
    """Bone shapes and a camera looking at the bone's limit sphere from `toward` (limit frame)."""
    overlay = addon("ewbik_addon.viewport.overlay")
    pose_bone = obj.pose.bones[bone_name]
    frame = overlay.limit_frame(obj, pose_bone)
    head = frame.to_translation()
    reach = pose_bone.length * obj.matrix_world.median_scale * 1.15
    points = [
        head + Vector(offset) * reach
        for offset in ((1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1))
    ]
    camera = bpy.data.objects.new("Limits camera", bpy.data.cameras.new("Limits camera"))
    camera.data.lens = 50.0
    bpy.context.scene.collection.objects.link(camera)
    pose_gallery.aim_camera(camera, points, (frame.to_3x3() @ Vector(toward)).normalized())
    bpy.context.scene.camera = camera
    pose_gallery.add_label(camera, label)
    return camera


def handle_markers(obj, bone_name):
    """Small spheres where the viewport's handles of the bone sit, in the handles' colours."""
    gizmos = addon("ewbik_addon.viewport.limit_gizmos")
    pose_bone = obj.pose.bones[bone_name]
    corners = [Vector(corner) * 0.05 * pose_bone.length for corner in gizmos.octahedron()]
    for kind, index, point in gizmos.handle_points(obj, pose_bone):
        mesh = bpy.data.meshes.new(f"handle {kind} {index}")
        mesh.from_pydata(corners, [], [(i, i + 1, i + 2) for i in range(0, len(corners), 3)])
        marker = bpy.data.objects.new(mesh.name, mesh)
        marker.location = point
        marker.color = (*gizmos.HANDLE_COLORS[kind], 1.0)
        bpy.context.scene.collection.objects.link(marker)


def picture(name, bone_name, toward, turns, label, out_dir, size, drag=False):
    obj = humanoid_metarig()
    obj.data.bones.active = obj.data.bones[bone_name]
    pose(obj, turns)
    if drag:
        gizmos = addon("ewbik_addon.viewport.limit_gizmos")
        edit = gizmos.LimitEdit(obj, bone_name, "radius", 0)
        cone = obj.pose.bones[bone_name].bone.ewbik.cones[0]
        rim = Quaternion(Vector(cone.direction).orthogonal(), cone.radius + math.radians(23.0)) @ Vector(
            cone.direction
        )
        edit.set_direction(rim, snap=True)
        label = "Dragging a cone's rim: " + edit.header().split("   ")[0]
        handle_markers(obj, bone_name)
        bpy.context.view_layer.update()
    pose_gallery.add_bone_shapes(obj, set())
    camera = stage(obj, bone_name, toward, label)
    png_path = out_dir / f"{name}.png"
    pose_gallery.render(png_path, size)
    base = pose_gallery.load_pixels(png_path)
    layer = overlay_layer(obj, camera, size)
    composed = base.copy()
    composed[..., :3] = base[..., :3] * (1.0 - layer[..., 3:]) + layer[..., :3] * layer[..., 3:]
    pose_gallery.save_png(composed, png_path)
    print(f"wrote {png_path}")
    return png_path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=420)
    parser.add_argument("--out", type=pathlib.Path, default=REPO_ROOT / "docs" / "limits")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    addon_utils.enable("rigify", default_set=True)
    demo.install_extension()
    for name, bone, toward, turns, label in PICTURES:
        picture(name, bone, toward, turns, label, args.out, args.size)
    picture(*DRAG, "", args.out, args.size, drag=True)


if __name__ == "__main__":
    main(sys.argv[1:])
