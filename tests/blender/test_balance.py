"""Balance on the Rigify metarig, driven as an animator does: feet and right hand pinned (the
first Pin plants the feet and turns Move Root on), the Balance option set in the sidebar's
property, the hand's target dragged forward and down to below the hips, then Solve and the
bake. The centre of mass and the support polygon are measured as the overlay draws them, on the
pose Blender shows."""

import bpy
import numpy as np
from mathutils import Vector

from tests.support.blender_helpers import addon_module, pin, settle, update, worst_distance

PINNED = ("hand.R", "foot.L", "foot.R")
REACH = Vector((0.1, -0.7, -0.9))  # the right hand's way: forward (-Y) and down, below the hips
FRAMES = 12


def inside(obj):
    """How far the centre of mass's ground projection lies inside the support polygon (the
    overlay's geometry; negative: outside)."""
    balance = addon_module("solver.balance")
    geometry = addon_module("ewbik_addon.viewport.overlay").balance_geometry(obj)
    com = geometry["centre_of_mass"][0].mean(0)
    corners = geometry["support"][:, 0]
    return balance.Support(corners, balance._ground_axes(np.array([0.0, 0.0, 1.0])), None).depth(com)


def dragged(obj, target):
    """(share of the drag's frames with the centre of mass over the feet, largest pin miss)."""
    start = target.location.copy()
    over, miss = 0, 0.0
    for frame in range(FRAMES):
        target.location = start + REACH * (frame / (FRAMES - 1))
        update()
        settle()
        over += inside(obj) >= 0.0
        miss = max(miss, worst_distance(obj, PINNED))
    target.location = start
    update()
    settle()
    return over / FRAMES, miss


def test_dragging_a_hand_keeps_the_centre_of_mass_over_the_feet(metarig):
    targets = pin(metarig, *PINNED)
    bpy.ops.object.mode_set(mode="OBJECT")
    assert metarig.ewbik.translate_root and not metarig.ewbik.balance  # off by default
    off, _ = dragged(metarig, targets["hand.R"])
    metarig.ewbik.balance = True
    on, miss = dragged(metarig, targets["hand.R"])
    print(f"centre of mass over the feet: balance off {off:.2f}, on {on:.2f}; pins missed by {miss:.1e}")
    assert off < 0.8
    assert on >= 0.95
    assert miss <= 1e-5


def test_solve_and_the_bake_honour_the_keyed_option(metarig):
    targets = pin(metarig, *PINNED)
    bpy.ops.object.mode_set(mode="OBJECT")
    hand = targets["hand.R"]
    far = hand.location + REACH
    hand.keyframe_insert("location", frame=1)
    hand.location = far
    hand.keyframe_insert("location", frame=5)
    metarig.ewbik.balance = False
    metarig.keyframe_insert("ewbik.balance", frame=1)
    metarig.ewbik.balance = True
    metarig.keyframe_insert("ewbik.balance", frame=5)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 5
    metarig.ewbik.live = False
    scene.frame_set(5)
    assert metarig.ewbik.balance  # the key sets the option
    bpy.context.view_layer.objects.active = metarig
    assert bpy.ops.ewbik.solve() == {"FINISHED"}
    assert inside(metarig) >= 0.0 and worst_distance(metarig, PINNED) <= 1e-5
    solved = {b.name: b.matrix.copy() for b in metarig.pose.bones}
    metarig.ewbik.live = True
    assert bpy.ops.ewbik.bake() == {"FINISHED"}
    metarig.ewbik.live = False
    scene.frame_set(4)
    scene.frame_set(5)
    assert (
        inside(metarig) >= 0.0 and worst_distance(metarig, PINNED) <= 1e-5
    )  # the keys play the balanced pose
    for bone in metarig.pose.bones:
        assert (bone.matrix.translation - solved[bone.name].translation).length < 1e-4, bone.name
    metarig.animation_data.action = None
    metarig.ewbik.balance = False
    metarig.ewbik.live = True
    scene.frame_set(5)
    update()
    settle()
    assert inside(metarig) < 0.0  # off, the reach tips the body over its toes


def test_the_overlay_draws_the_centre_of_mass_and_the_polygon_only_when_on(metarig):
    pin(metarig, *PINNED)
    bpy.ops.object.mode_set(mode="OBJECT")
    overlay = addon_module("ewbik_addon.viewport.overlay")
    metarig.ewbik.show_limits = False
    assert "support" not in overlay.overlay_geometry(metarig)
    metarig.ewbik.balance = True
    geometry = overlay.overlay_geometry(metarig)
    assert {"support", "centre_of_mass"} <= set(geometry)
    corners = geometry["support"][:, 0]
    assert np.allclose(corners[:, 2], corners[0, 2])  # on the ground


def test_the_body_a_solve_weighs_follows_the_pose_underneath(metarig):
    """The chains' body is kept between updates of a drag, and made again when the pose
    underneath changes: the free left arm raised by hand moves its mass, so the chains' body's
    centre of mass moves with it."""
    pin(metarig, *PINNED)
    bpy.ops.object.mode_set(mode="OBJECT")
    metarig.ewbik.balance = True
    update()
    settle()
    rig = addon_module("ewbik_addon.bridge.rig_cache").rig_for(metarig, False)
    balance_body = addon_module("ewbik_addon.rigs.balance_body")
    underneath = addon_module("ewbik_addon.bridge.pose_underneath")

    def chains_centre():
        body = balance_body.chains_body(metarig, rig, underneath.start_pose(rig))
        skeleton = rig.chains.skeleton
        rotations = np.tile([1.0, 0.0, 0.0, 0.0], (len(skeleton), 1))
        return addon_module("solver.balance").pose_centre_of_mass(
            skeleton, body, rotations, np.zeros((len(skeleton), 3))
        )

    before = chains_centre()
    assert chains_centre() is not None and np.array_equal(chains_centre(), before)
    arm = metarig.pose.bones["upper_arm.L"]
    arm.rotation_mode = "QUATERNION"
    arm.rotation_quaternion = (0.7071, 0.0, 0.0, 0.7071)
    update()
    settle()
    assert np.linalg.norm(chains_centre() - before) > 0.005
