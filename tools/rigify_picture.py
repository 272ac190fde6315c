"""The README's picture of a generated Rigify character posed by EWBIK.

Generates a rig from the human metarig, selects the deform bones of the hands, feet and head and
presses Pin (which pins the FK hands, switching the arms to FK, the IK feet and the head control),
drags the targets into a reach with a knee lift, solves, and renders a mannequin skinned to the deform
bones (what a character's mesh follows) with Workbench: docs/rigify.png.

    python tools/rigify_picture.py [--size 480] [--out docs/rigify.png]
"""

import argparse
import math
import pathlib
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "tools"))

import pose_gallery  # noqa: E402  (through demo: a temporary BLENDER_USER_RESOURCES before bpy)

# isort: split

import bpy  # noqa: E402
import mannequin  # noqa: E402
from mathutils import Euler, Matrix, Vector  # noqa: E402

DEFORM_PINS = ("DEF-hand.L", "DEF-hand.R", "DEF-foot.L", "DEF-foot.R", "DEF-spine.006")
# Control -> (world offset, extra turn in degrees): reach forward and up with the left hand, the
# right hand toward the lifted left knee, the head turned toward the reaching hand.
MOVES = {
    "hand_fk.L": (Vector((-0.1, -0.35, 0.3)), (0.0, 0.0, -30.0)),
    "hand_fk.R": (Vector((0.2, -0.25, 0.25)), (0.0, 0.0, 30.0)),
    "foot_ik.L": (Vector((0.0, -0.2, 0.3)), (-30.0, 0.0, 0.0)),
    "head": (Vector((0.0, 0.0, 0.0)), (10.0, 0.0, 25.0)),
}


def posed_rig():
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.object.armature_human_metarig_add()
    bpy.ops.pose.rigify_generate()
    rig = bpy.data.objects["rig"]
    rig.ewbik.time_budget_ms = 0.0
    rig.ewbik.iterations = 200
    bpy.ops.object.mode_set(mode="POSE")
    for pose_bone in rig.pose.bones:
        pose_bone.select = pose_bone.name in DEFORM_PINS
    bpy.ops.ewbik.pin()
    bpy.ops.object.mode_set(mode="OBJECT")
    targets = {
        name: pose_bone.ewbik.target for name, pose_bone in rig.pose.bones.items() if pose_bone.ewbik.target
    }
    for name, (offset, degrees) in MOVES.items():
        location, rotation, scale = targets[name].matrix_world.decompose()
        turn = Euler([math.radians(d) for d in degrees]).to_quaternion()
        targets[name].matrix_world = Matrix.LocRotScale(location + offset, turn @ rotation, scale)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.ewbik.solve()
    print(rig.ewbik.status)
    return rig, targets


def shown(name):
    return name.startswith("DEF-")


def stage(rig, targets):
    """Floor, the mannequin on the deform bones (pinned ones orange), the targets as red rings, a
    camera from the figure's front right."""
    bpy.context.view_layer.update()
    deform = [pose_bone for pose_bone in rig.pose.bones if shown(pose_bone.name)]
    points = [rig.matrix_world @ p for b in deform for p in (b.head, b.tail)]
    points += [target.matrix_world.translation for target in targets.values()]
    floor = min(p.z for p in points)
    bpy.ops.mesh.primitive_plane_add(size=2.4, location=(0.0, 0.0, floor))
    bpy.context.object.color = (0.35, 0.37, 0.4, 1.0)
    mannequin.add(rig, set(DEFORM_PINS))
    mannequin.add_target_rings(rig, targets)
    camera = bpy.data.objects.new("Picture camera", bpy.data.cameras.new("Picture camera"))
    camera.data.lens = 50.0
    bpy.context.scene.collection.objects.link(camera)
    pose_gallery.aim_camera(camera, points, Vector((-0.8, -0.55, 0.25)).normalized())
    bpy.context.scene.camera = camera
    pose_gallery.add_label(camera, "Rigify rig: FK arms solved, IK feet placed")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=480)
    parser.add_argument("--out", type=pathlib.Path, default=REPO_ROOT / "docs" / "rigify.png")
    args = parser.parse_args(argv)
    pose_gallery.demo.install_extension()
    rig, targets = posed_rig()
    stage(rig, targets)
    pose_gallery.render(args.out, args.size)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
