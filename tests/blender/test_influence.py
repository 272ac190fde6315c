"""The armature's Influence on the Rigify metarig: the solve blended over the keyed animation underneath."""

import bpy
import numpy as np
from mathutils import Quaternion, Vector

from tests.support.blender_helpers import pin, pose_quaternions, solve_fully_on_update
from tests.support.ui_layout import RecordingLayout


def action_quaternions(obj, frame):
    """Every bone's rotation as the action alone gives it at `frame` (the F-curves, evaluated by hand)."""
    rotations = np.tile([1.0, 0.0, 0.0, 0.0], (len(obj.pose.bones), 1))
    index = {name: i for i, name in enumerate(obj.pose.bones.keys())}
    for fcurve in animation_fcurves(obj):
        if fcurve.data_path.endswith(".rotation_quaternion"):
            bone = fcurve.data_path.split('"')[1]
            rotations[index[bone], fcurve.array_index] = fcurve.evaluate(frame)
    return rotations


def animation_fcurves(obj):
    action = obj.animation_data.action
    if hasattr(action, "fcurves") and len(getattr(action, "fcurves", ())):
        return list(action.fcurves)
    slot = obj.animation_data.action_slot
    return [
        fcurve
        for layer in action.layers
        for strip in layer.strips
        for fcurve in strip.channelbag(slot).fcurves
    ]


def key_values(obj):
    return [tuple(point.co) for fcurve in animation_fcurves(obj) for point in fcurve.keyframe_points]


def angles_between(a, b):
    return 2.0 * np.arccos(np.clip(np.abs(np.einsum("ij,ij->i", a, b)), 0.0, 1.0))


def keyed_arm_with_pinned_hand(metarig, influence):
    """Every bone keyed (the arm swinging from frame 1 to 10), hand.L and foot.R pinned, the hand's
    target moved away; the armature at `influence`, solved fully on each update."""
    solve_fully_on_update(metarig)
    for frame, angle in ((1, 0.0), (10, 0.6)):
        metarig.pose.bones["upper_arm.L"].rotation_quaternion = Quaternion((1.0, 0.0, 0.0), angle)
        for pose_bone in metarig.pose.bones:
            pose_bone.keyframe_insert("rotation_quaternion", frame=frame)
    targets = pin(metarig, "hand.L", "foot.R")
    metarig.ewbik.influence = influence
    bpy.ops.object.mode_set(mode="OBJECT")
    targets["hand.L"].location += Vector((0.1, -0.15, 0.2))
    bpy.context.scene.frame_set(5)
    return targets


def test_at_zero_the_keyed_animation_plays_untouched(metarig):
    keyed_arm_with_pinned_hand(metarig, influence=1.0)
    keys = key_values(metarig)
    solved = pose_quaternions(metarig)
    assert angles_between(solved, action_quaternions(metarig, 5)).max() > 0.1  # at 1 the solve shows
    metarig.ewbik.influence = 0.0
    for frame in (5, 7):
        bpy.context.scene.frame_set(frame)
        np.testing.assert_allclose(pose_quaternions(metarig), action_quaternions(metarig, frame), atol=1e-6)
    assert key_values(metarig) == keys


def test_half_influence_is_halfway_between_animation_and_solve(metarig):
    """One pose per set of targets: the solve a half influence blends is the pose full influence
    shows for the same targets and animation; the geodesic midpoint is the oracle."""
    keyed_arm_with_pinned_hand(metarig, influence=0.5)
    animation = action_quaternions(metarig, 5)
    blended = pose_quaternions(metarig)
    metarig.ewbik.influence = 1.0
    bpy.context.view_layer.update()
    solved = pose_quaternions(metarig)
    animation /= np.linalg.norm(animation, axis=1, keepdims=True)  # F-curves interpolate off the unit sphere
    whole = angles_between(animation, solved)
    quaternion_mode = np.array([bone.rotation_mode == "QUATERNION" for bone in metarig.pose.bones])
    index = np.flatnonzero((whole > 0.01) & quaternion_mode)
    assert {metarig.pose.bones[i].name for i in index} >= {"upper_arm.L", "forearm.L"}
    np.testing.assert_allclose(
        angles_between(animation[index], blended[index]), whole[index] / 2.0, atol=1e-5
    )
    np.testing.assert_allclose(angles_between(blended[index], solved[index]), whole[index] / 2.0, atol=1e-5)


def test_repeated_updates_at_partial_influence_do_not_creep_toward_the_solve(metarig):
    """The first update after pinning may settle the redundant arm (its solve starts from another
    pose than the pinning solve did); every later one must leave the blend where it is."""
    targets = keyed_arm_with_pinned_hand(metarig, influence=0.5)
    poses = []
    for _ in range(4):
        targets["hand.R"] = 0  # an unrelated edit: the depsgraph updates, the handler solves again
        targets["hand.L"].location += Vector((0.0, 0.0, 0.0))
        metarig.update_tag()
        bpy.context.view_layer.update()
        poses.append(pose_quaternions(metarig))
    for pose in poses[1:]:
        np.testing.assert_allclose(pose, poses[0], atol=1e-5)


def test_influence_is_animatable(metarig):
    keyed_arm_with_pinned_hand(metarig, influence=1.0)
    metarig.ewbik.influence = 0.0
    metarig.keyframe_insert("ewbik.influence", frame=1)
    metarig.ewbik.influence = 1.0
    metarig.keyframe_insert("ewbik.influence", frame=3)
    bpy.context.scene.frame_set(1)
    assert metarig.ewbik.influence == 0.0
    np.testing.assert_allclose(pose_quaternions(metarig), action_quaternions(metarig, 1), atol=1e-6)
    bpy.context.scene.frame_set(3)
    assert metarig.ewbik.influence == 1.0
    assert angles_between(pose_quaternions(metarig), action_quaternions(metarig, 3)).max() > 0.1


def test_bake_at_zero_influence_keys_the_animation_underneath(metarig):
    keyed_arm_with_pinned_hand(metarig, influence=0.0)
    expected = {frame: action_quaternions(metarig, frame) for frame in (2, 5, 9)}
    make_pose_mode_context(metarig)
    assert bpy.ops.ewbik.bake(frame_start=1, frame_end=10) == {"FINISHED"}
    for frame, rotations in expected.items():
        np.testing.assert_allclose(action_quaternions(metarig, frame), rotations, atol=1e-5)


def test_bake_at_full_influence_keys_the_solve(metarig):
    keyed_arm_with_pinned_hand(metarig, influence=1.0)
    before = action_quaternions(metarig, 5)
    make_pose_mode_context(metarig)
    assert bpy.ops.ewbik.bake(frame_start=1, frame_end=10) == {"FINISHED"}
    assert angles_between(action_quaternions(metarig, 5), before).max() > 0.1


def make_pose_mode_context(obj):
    for other in bpy.context.view_layer.objects:
        other.select_set(other == obj)
    bpy.context.view_layer.objects.active = obj


def test_the_solver_panel_shows_the_influence_slider(metarig):
    log = []
    bpy.types.EWBIK_PT_solver.draw(type("FakePanel", (), {"layout": RecordingLayout(log)})(), bpy.context)
    assert ("prop", "influence") in log
