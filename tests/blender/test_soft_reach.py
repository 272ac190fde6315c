"""Soft reach on the metarig: a keyed hand target passing through the arm's full reach plays
without the elbow popping straight, and pins short of the soft zone stay where they were.

The elbow angle is measured on the pose Blender evaluated (the heads of upper_arm.L, forearm.L and
hand.L)."""

import math

import bpy
import numpy as np
from mathutils import Vector

from tests.support.blender_helpers import HANDS_FEET_HEAD, bone_world, pin, settle

FRAMES = 61


def arm(obj):
    bones = obj.pose.bones
    return [obj.matrix_world @ bones[b].head for b in ("upper_arm.L", "forearm.L", "hand.L")]


def elbow_deg(obj):
    shoulder, elbow, wrist = arm(obj)
    return math.degrees((elbow - shoulder).angle(wrist - elbow))


def played_elbow(obj, soft):
    """(elbow angle per frame, hand.L's miss per frame, its target's distance from the shoulder
    over the arm's length per frame): hands, feet and head pinned, the bones above the arm stiff, hand.L's target keyed from
    0.85 to 1.15 of the arm's length out from the shoulder (Blender's default easing)."""
    obj.ewbik.soft_reach = soft
    obj.ewbik.time_budget_ms = 0.0
    for bone in obj.pose.bones["upper_arm.L"].parent_recursive:
        bone.ewbik.stiffness = 1.0  # the body above the arm held: the arm alone reaches
    targets = pin(obj, *HANDS_FEET_HEAD)
    bpy.ops.object.mode_set(mode="OBJECT")
    shoulder, elbow, wrist = arm(obj)
    length = (elbow - shoulder).length + (wrist - elbow).length
    way = (wrist - shoulder + Vector((0.0, 0.0, -0.1))).normalized()
    target = targets["hand.L"]
    for frame, share in ((1, 0.85), (FRAMES, 1.15)):
        target.location = shoulder + share * length * way
        target.keyframe_insert("location", frame=frame)
    angles, misses, shares = [], [], []
    for frame in range(1, FRAMES + 1):
        bpy.context.scene.frame_set(frame)
        settle()
        angles.append(elbow_deg(obj))
        misses.append((bone_world(obj, "hand.L").translation - target.matrix_world.translation).length)
        shares.append((target.matrix_world.translation - arm(obj)[0]).length / length)
    return np.array(angles), np.array(misses), np.array(shares)


def test_a_keyed_target_through_full_reach_plays_without_a_pop(metarig):
    angles, misses, shares = played_elbow(metarig, 0.05)
    changes = np.abs(np.diff(angles))
    assert changes.max() < 3.0 * changes.mean()  # 2.6 degrees against a mean of 1
    assert (misses[shares > 1.0] > 0.0).all()  # stopping short: the arm is never straight
    assert misses[shares < 0.95].max() < 1e-4


def test_without_soft_reach_the_elbow_pops(metarig):
    angles, misses, shares = played_elbow(metarig, 0.0)
    changes = np.abs(np.diff(angles))
    assert changes.max() > 8.0 * changes.mean()  # 13 degrees in one frame against a mean of 1
