"""A rig from real motion capture (CMU 131_01 through Blender's BVH importer: Euler bones, animated)."""

import bpy
from mathutils import Vector

from tests.support.blender_helpers import bone_world, pin, solve_fully_on_update, update

PINNED = ("LeftWrist", "RightWrist", "LeftAnkle", "RightAnkle", "Head")


def test_mocap_rig_reaches_posed_targets_live(mocap_rig):
    assert {b.rotation_mode for b in mocap_rig.pose.bones} - {"QUATERNION", "AXIS_ANGLE"}  # Euler bones
    solve_fully_on_update(mocap_rig, 100)
    mocap_rig.ewbik.auto_limits = False  # reaching free targets; limits are tested elsewhere
    targets = pin(mocap_rig, *PINNED)
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    offsets = {
        "LeftWrist": Vector((0.05, 0.08, 0.1)),
        "RightWrist": Vector((-0.05, 0.06, -0.08)),
        "Head": Vector((0.0, 0.04, -0.03)),
    }
    for bone, offset in offsets.items():
        targets[bone].location += offset
    update()
    for bone in PINNED:
        reached = bone_world(mocap_rig, bone).translation
        assert (reached - targets[bone].matrix_world.translation).length < 2e-3, bone


def test_mocap_rig_follows_targets_across_animated_frames(mocap_rig):
    solve_fully_on_update(mocap_rig, 100)
    targets = pin(mocap_rig, "LeftWrist", "LeftAnkle", "RightAnkle")
    bpy.ops.object.mode_set(mode="OBJECT")
    hand = targets["LeftWrist"]
    hand.location += Vector((0.0, 0.1, 0.05))
    scene = bpy.context.scene
    for frame in (2, 30):
        scene.frame_set(frame)  # the clip's animation re-poses the rig; live solving pulls the wrist back
        reached = bone_world(mocap_rig, "LeftWrist").translation
        assert (reached - hand.matrix_world.translation).length < 2e-3, frame
