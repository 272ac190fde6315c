"""Short live drags on the metarig and what they leave in the pose channels (Blender tests)."""

import bpy
import numpy as np
from mathutils import Quaternion, Vector

from tests.support.blender_helpers import update

# Target moves of a short drag (metres, added to every target in turn), all within reach.
DRAG = [Vector((0.01 * k, -0.015 * k, 0.02 * k)) for k in (1, 2, 3, 2, 1, 0, -1, -2)]


def channels(obj):
    """Every bone's quaternion and Euler channels as Blender holds them."""
    quaternions = np.empty(len(obj.pose.bones) * 4, np.float32)
    eulers = np.empty(len(obj.pose.bones) * 3, np.float32)
    obj.pose.bones.foreach_get("rotation_quaternion", quaternions)
    obj.pose.bones.foreach_get("rotation_euler", eulers)
    return quaternions, eulers


def drag(targets, moves):
    starts = {bone: target.location.copy() for bone, target in targets.items()}
    for k, move in enumerate(moves):
        for i, (bone, target) in enumerate(targets.items()):
            target.location = starts[bone] + (move if (i + k) % 2 else -move)
        update()


def keyed_finger_after_drags_across_a_frame_change(obj, targets):
    """Radians between an unsolved finger's key on frame 5 and its channel after drags on frame 1
    and then on frame 5: the second drag must start from the keyed channels, not from the pose
    the last solve wrote."""
    finger = obj.pose.bones["f_index.01.L"]
    turn = Quaternion((0.0, 0.0, 1.0), 0.5)
    finger.rotation_quaternion = turn
    finger.keyframe_insert("rotation_quaternion", frame=5)
    finger.rotation_quaternion = Quaternion()
    finger.keyframe_insert("rotation_quaternion", frame=1)
    bpy.context.scene.frame_set(1)
    drag(targets, DRAG[:2])
    bpy.context.scene.frame_set(5)
    drag(targets, DRAG[2:4])
    return finger.rotation_quaternion.rotation_difference(turn).angle
