"""Balance on the Rigify metarig: a hand swept forward and down, hands, feet and head pinned,
Move Root on; the centre of mass and the support polygon measured as the overlay draws them."""

import bpy
from mathutils import Vector

from tests.support.blender_helpers import HANDS_FEET_HEAD, addon_module, bone_world, pin, settle, update

FRAMES = 10
REACH = Vector((0.1, -0.35, -0.3))  # the right hand's way, forward (-Y) and down, within reach


def swept(obj, targets):
    """(share of frames with the centre of mass over the polygon, largest pin miss) of a sweep."""
    overlay = addon_module("ewbik_addon.overlay")
    balance = addon_module("solver.balance")
    start = targets["hand.R"].location.copy()
    inside, miss = 0, 0.0
    for frame in range(FRAMES):
        targets["hand.R"].location = start + REACH * (frame / (FRAMES - 1))
        update()
        settle()
        geometry = overlay.balance_geometry(obj)
        com = geometry["centre_of_mass"][0].mean(0)
        corners = geometry["support"][:, 0]
        support = balance.Support(corners, balance._ground_axes(Vector((0, 0, 1))), None)
        inside += support.depth(com) >= 0.0
        for bone in HANDS_FEET_HEAD:
            reached = (
                bone_world(obj, bone).translation - obj.pose.bones[bone].ewbik.target.matrix_world.translation
            )
            miss = max(miss, reached.length)
    targets["hand.R"].location = start
    update()
    return inside / FRAMES, miss


def test_balance_keeps_the_centre_of_mass_over_the_feet(metarig):
    targets = pin(metarig, *HANDS_FEET_HEAD)
    bpy.ops.object.mode_set(mode="OBJECT")
    metarig.ewbik.translate_root = True
    metarig.ewbik.balance = False
    off, _ = swept(metarig, targets)
    metarig.ewbik.balance = True
    on, miss = swept(metarig, targets)
    print(f"balance off {off:.2f}, on {on:.2f}, pin miss {miss:.2e}")
    assert on >= 0.95
    assert miss < 1e-3
