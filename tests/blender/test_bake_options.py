"""`ewbik.bake`'s key options on the Rigify metarig: keys only where the source has keys, fewer keys
within a tolerance (checked by playing both actions back in Blender), and a bake into a new action
that leaves the armature's action as it was."""

import math

import bpy
import numpy as np
import pytest
from mathutils import Quaternion, Vector

from tests.support.blender_helpers import addon_module, fcurve_keys, pin

TOLERANCE_MM = 1.0
TOLERANCE_DEG = 1.0
FLOAT_SLACK = 1e-3  # float32 keys, in mm and degrees


@pytest.fixture
def bake_engine():
    return addon_module("ewbik_addon.bake.bake_engine")


@pytest.fixture
def rig(metarig):
    """Hand and opposite foot pinned; the hand's target keyed on frames 1, 7 and 20 along a curve."""
    metarig.ewbik.stand_on_pin = False
    targets = pin(metarig, "hand.L", "foot.R")
    hand = targets["hand.L"]
    start = hand.location.copy()
    for frame, offset in ((1, (0.0, 0.0, 0.0)), (7, (0.2, -0.1, 0.3)), (20, (0.1, -0.3, -0.1))):
        hand.location = start + Vector(offset)
        hand.keyframe_insert("location", frame=frame)
    bpy.context.scene.frame_set(1)
    return metarig


def bake(obj, bake_engine, **kwargs):
    """Bake frames 1-20 in one go (what the operator's `execute` runs); returns the summary."""
    crowd = bake_engine.CrowdBake(
        bpy.context, [obj], bake_engine.BakeOptions(frame_start=1, frame_end=20, **kwargs)
    )
    while not crowd.done:
        crowd.solve_next()
    return crowd.finish().summaries[0]


def key_frames(obj):
    """{(data path, index): key frames} of every F-curve the armature plays."""
    keys = {}
    for fcurve in fcurve_keys().action_fcurves(obj.animation_data):
        co = np.empty(len(fcurve.keyframe_points) * 2, dtype=np.float32)
        fcurve.keyframe_points.foreach_get("co", co)
        keys[(fcurve.data_path, fcurve.array_index)] = co[0::2].tolist()
    return keys


def test_keys_only_keys_exactly_the_frames_the_sources_have_keys_on(rig, bake_engine):
    foot = rig.pose.bones["foot.R"].ewbik.target
    carrier = bpy.data.objects.new("Foot carrier", None)
    bpy.context.scene.collection.objects.link(carrier)
    foot.parent = carrier
    carrier.keyframe_insert("location", frame=12)
    finger = rig.pose.bones["f_index.01.R"]  # in no pinned chain: its key only says "a key here"
    finger.keyframe_insert("rotation_quaternion", frame=15)
    finger.keyframe_insert("rotation_quaternion", frame=40)  # outside the range

    summary = bake(rig, bake_engine, keys_only=True)

    assert summary.frames == 5
    baked = {path: frames for path, frames in key_frames(rig).items() if "f_index" not in path[0]}
    assert baked
    assert all(frames == [1.0, 7.0, 12.0, 15.0, 20.0] for frames in baked.values()), baked


def test_keys_only_with_no_key_in_the_range_is_refused(rig, bake_engine):
    with pytest.raises(
        addon_module("ewbik_addon.com.armature_checks").RigError, match="no key in frames 30-40"
    ):
        bake_engine.PoseBake(
            bpy.context, rig, bake_engine.BakeOptions(frame_start=30, frame_end=40, keys_only=True)
        )


def played_back(obj, action, slot_identifier, frames, bones):
    """(pinned heads in mm (F, P, 3), bone rotations (F, B) as quaternions) `action` plays."""
    anim_data = obj.animation_data
    anim_data.action = action
    if fcurve_keys().LAYERED_ACTIONS:
        anim_data.action_slot = next(s for s in action.slots if s.identifier == slot_identifier)
    scene = bpy.context.scene
    metres = scene.unit_settings.scale_length
    heads, rotations = [], []
    for frame in frames:
        scene.frame_set(frame)
        heads.append([tuple(obj.matrix_world @ obj.pose.bones[b].head * (1000.0 * metres)) for b in PINNED])
        rotations.append([obj.pose.bones[b].matrix_basis.to_quaternion() for b in bones])
    return np.array(heads), rotations


PINNED = ("hand.L", "foot.R")


def test_a_tolerance_keeps_fewer_keys_and_plays_within_it_on_every_frame(rig, bake_engine):
    bake(rig, bake_engine, new_action=True)
    every_frame = rig.animation_data.action
    slot = rig.animation_data.action_slot.identifier if fcurve_keys().LAYERED_ACTIONS else None
    full = sum(len(frames) for frames in key_frames(rig).values())

    summary = bake(rig, bake_engine, new_action=True, tolerance_mm=TOLERANCE_MM, tolerance_deg=TOLERANCE_DEG)
    reduced = rig.animation_data.action
    kept = sum(len(frames) for frames in key_frames(rig).values())

    assert reduced != every_frame and summary.reduced
    assert kept == summary.keys and kept < full, (kept, full)
    bones = sorted({path.split('"')[1] for path, _ in key_frames(rig)})
    frames = range(1, 21)
    heads, rotations = played_back(rig, every_frame, slot, frames, bones)
    heads_reduced, rotations_reduced = played_back(rig, reduced, slot, frames, bones)
    misses = np.linalg.norm(heads_reduced - heads, axis=-1)
    assert misses.max() <= TOLERANCE_MM + FLOAT_SLACK, misses.max()
    turns = [
        math.degrees(a.rotation_difference(b).angle)
        for frame_a, frame_b in zip(rotations, rotations_reduced)
        for a, b in zip(frame_a, frame_b)
    ]
    assert max(turns) <= TOLERANCE_DEG + FLOAT_SLACK, max(turns)


def test_a_tolerance_refuses_to_keep_keys_between_the_kept_ones(rig, bake_engine):
    with pytest.raises(
        addon_module("ewbik_addon.com.armature_checks").RigError, match="Replace Keys in Range"
    ):
        bake_engine.BakeOptions(frame_start=1, frame_end=20, tolerance_mm=1.0, replace_range=False).frames()


def keyed_action(obj):
    """The armature's own action with keys on a chain bone (inside the range) and on a finger."""
    forearm, finger = obj.pose.bones["forearm.L"], obj.pose.bones["f_index.01.R"]
    for frame, angle in ((1, 0.1), (10, 0.5), (30, 0.2)):
        for bone in (forearm, finger):
            bone.rotation_mode = "QUATERNION"
            bone.rotation_quaternion = Quaternion((1.0, 0.0, 0.0), angle)
            bone.keyframe_insert("rotation_quaternion", frame=frame)
    return obj.animation_data.action


def every_key(action, obj):
    """Every field of every key of every F-curve of the action, in every slot it has."""
    read_keys = fcurve_keys().read_keys
    if not fcurve_keys().LAYERED_ACTIONS:
        curves = list(action.fcurves)
    else:
        curves = [
            fcurve
            for layer in action.layers
            for strip in layer.strips
            for bag in strip.channelbags
            for fcurve in bag.fcurves
        ]
    return [
        (f.data_path, f.array_index, {name: v.tobytes() for name, v in read_keys(f.keyframe_points).items()})
        for f in curves
    ]


def test_a_new_action_leaves_the_action_bit_for_bit_and_plays_the_baked_copy(rig, bake_engine):
    action = keyed_action(rig)
    before = every_key(action, rig)

    bake(rig, bake_engine, new_action=True)

    copy = rig.animation_data.action
    assert copy != action and every_key(action, rig) == before
    assert action.use_fake_user  # kept when the file is saved, though nothing plays it
    played = key_frames(rig)
    assert played[('pose.bones["forearm.L"].rotation_quaternion', 0)] == [float(f) for f in range(1, 21)] + [
        30.0
    ]
    assert played[('pose.bones["f_index.01.R"].rotation_quaternion', 0)] == [1.0, 10.0, 30.0]
    if fcurve_keys().LAYERED_ACTIONS:
        assert rig.animation_data.action_slot in list(copy.slots)


def test_a_new_action_is_taken_back_when_the_bake_fails_while_writing(rig, bake_engine, monkeypatch):
    action = keyed_action(rig)
    before = every_key(action, rig)
    actions = set(bpy.data.actions)
    writer = fcurve_keys().KeyWriter

    def failing_write(self, *args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(writer, "write", failing_write)
    with pytest.raises(RuntimeError, match="disk full"):
        bake(rig, bake_engine, new_action=True)

    assert rig.animation_data.action == action and set(bpy.data.actions) == actions
    assert every_key(action, rig) == before and not action.use_fake_user


def test_the_operator_bakes_a_crowd_on_every_armatures_key_frames_within_the_tolerance(rig):
    from tests.blender.test_bake import second_metarig_with_a_keyed_hand_target
    from tests.support.blender_helpers import make_active

    second, _ = second_metarig_with_a_keyed_hand_target()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 20
    make_active(rig)
    second.select_set(True)

    assert bpy.ops.ewbik.bake(keys_only=True, tolerance_mm=TOLERANCE_MM, new_action=True) == {"FINISHED"}

    for obj in (rig, second):
        frames = set().union(*key_frames(obj).values())
        assert frames <= {1.0, 7.0, 20.0} and {1.0, 20.0} <= frames, (obj.name, frames)
