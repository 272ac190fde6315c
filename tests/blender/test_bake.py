"""`ewbik.bake` on the Rigify metarig: keys that play back the solved pose, and nothing else touched.

The modal path (progress bar, Esc) runs on timers, which never fire in the bpy module, so these
tests drive `PoseBake`, the object the modal advances one frame at a time, and the operator's
`execute`, which runs the same object in one go.
"""

import math
import pathlib
import types

import bpy
import numpy as np
import pytest
from mathutils import Euler, Quaternion, Vector

from tests.support.blender_helpers import addon_module, fcurve_keys, pin, select_pose_bones
from tests.support.modal_bake import RunningBake
from tests.support.ui_layout import RecordingLayout

HAND_CHAIN = ("hand.L", "forearm.L", "upper_arm.L", "shoulder.L")
BYSTANDER = "f_index.01.R"  # a finger: in no pinned chain
MATRIX_TOLERANCE = 1e-5  # pose matrices of a 2 m rig, float32 keys


@pytest.fixture
def bake_engine():
    return addon_module("ewbik_addon.bake.bake_engine")


@pytest.fixture
def live_module():
    return addon_module("ewbik_addon.solve.live")


@pytest.fixture
def rig(metarig):
    """Hand and opposite foot pinned; the hand's target is animated across frames 1-20."""
    metarig.ewbik.stand_on_pin = False  # only the bones asked for: no feet planted by the first Pin
    targets = pin(metarig, "hand.L", "foot.R")
    hand = targets["hand.L"]
    start = hand.location.copy()
    hand.keyframe_insert("location", frame=1)
    hand.location = start + Vector((0.15, -0.2, 0.25))
    hand.keyframe_insert("location", frame=20)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 20
    scene.frame_set(1)
    return metarig


def options(bake_engine, start=1, end=20, **kwargs):
    return bake_engine.BakeOptions(frame_start=start, frame_end=end, **kwargs)


def pose_matrices(obj, names=HAND_CHAIN):
    bpy.context.view_layer.update()
    return {name: obj.pose.bones[name].matrix.copy() for name in names}


def bake_recording(bake_engine, live_module, obj, bake_options):
    """Bake frame by frame like the modal does; returns {frame: solved matrices} and the summary."""
    bake = bake_engine.PoseBake(bpy.context, obj, bake_options)
    solved = {}
    while not bake.done:
        frame = bake.frame
        bake.solve_next()
        with addon_module("ewbik_addon.com.live_pause").suspended():
            solved[frame] = pose_matrices(obj)
    return solved, bake.finish()


def fcurves(obj, bake_engine):
    return fcurve_keys().action_fcurves(obj.animation_data) or ()


def action_state(obj, bake_engine):
    """Everything the bake could touch in the action: every key field of every F-curve."""
    return {
        (fcurve.data_path, fcurve.array_index): {
            name: values.tolist() for name, values in fcurve_keys().read_keys(fcurve.keyframe_points).items()
        }
        for fcurve in fcurves(obj, bake_engine)
    }


def pose_state(obj, bake_engine):
    bpy.context.view_layer.update()  # let pending live solves run first: they are not the bake's doing
    channels = addon_module("ewbik_addon.com.pose_channels").read_pose_channels(obj.pose.bones)
    return {name: values.tolist() for name, values in channels.items()}


def add_keys(obj, bone, channel, frames_values):
    pose_bone = obj.pose.bones[bone]
    for frame, value in frames_values:
        setattr(pose_bone, channel, value)
        pose_bone.keyframe_insert(channel, frame=frame)


def assert_continuous(solved, max_degrees=10.0):
    frames = sorted(solved)
    for previous, frame in zip(frames, frames[1:]):
        for name in HAND_CHAIN:
            step = (
                solved[frame][name]
                .to_quaternion()
                .rotation_difference(solved[previous][name].to_quaternion())
            )
            assert math.degrees(abs(step.angle)) < max_degrees, (
                f"{name} jumps {math.degrees(step.angle):.1f} deg at frame {frame}"
            )


def assert_matrices_close(actual, expected, frame):
    for name, matrix in expected.items():
        difference = np.abs(np.array(actual[name]) - np.array(matrix)).max()
        assert difference < MATRIX_TOLERANCE, f"frame {frame}, {name}: baked pose differs by {difference}"


def test_baked_keys_play_back_the_solved_pose(rig, bake_engine, live_module):
    rig.ewbik.time_budget_ms = 0.0  # every frame solved to the iteration cap, whatever the machine's load
    solved, summary = bake_recording(bake_engine, live_module, rig, options(bake_engine))

    assert summary.frames == 20 and summary.bones >= len(HAND_CHAIN)
    assert rig.ewbik.live is False
    hand_target = rig.pose.bones["hand.L"].ewbik.target
    for frame, expected in solved.items():
        bpy.context.scene.frame_set(frame)
        assert_matrices_close(pose_matrices(rig), expected, frame)
        hand = rig.matrix_world @ rig.pose.bones["hand.L"].head
        assert (hand - hand_target.matrix_world.translation).length < 5e-3, f"frame {frame}: hand off its pin"


def test_consecutive_frames_are_continuous(rig, bake_engine, live_module):
    """Warm-started frames: the hand target moves a few centimetres a frame, so do the bones."""
    rig.ewbik.time_budget_ms = 0.0
    solved, _ = bake_recording(bake_engine, live_module, rig, options(bake_engine))
    assert_continuous(solved)


def played_back(obj, frames):
    """{frame: the hand chain's pose matrices} as live playback shows them."""
    shown = {}
    for frame in frames:
        bpy.context.scene.frame_set(frame)
        shown[frame] = pose_matrices(obj)
    return shown


def test_each_frame_is_solved_from_its_own_keys_as_playback_solves_it(rig, bake_engine, live_module):
    """Old keys on the chain jump back and forth every frame: they are the pose underneath, so each
    frame is solved from its own keys, the same way live playback solves it."""
    rig.ewbik.time_budget_ms = 0.0
    for frame in range(1, 21):
        sign = 1 if frame % 2 else -1
        add_keys(rig, "forearm.L", "rotation_quaternion", [(frame, Quaternion((0.0, 0.0, 1.0), sign * 0.8))])
        add_keys(
            rig, "upper_arm.L", "rotation_quaternion", [(frame, Quaternion((1.0, 0.0, 0.0), -sign * 0.8))]
        )
    shown = played_back(rig, range(20, 0, -1))

    solved, _ = bake_recording(bake_engine, live_module, rig, options(bake_engine, 1, 20))

    for frame in range(1, 21):
        assert_matrices_close(solved[frame], shown[frame], frame)


def test_4d_lock_flags_on_euler_bones_do_not_hold_them_in_the_bake(rig, bake_engine, live_module):
    """Blender ignores the 4D lock flags on Euler bones, and so does the live solve: the bake must too,
    solving each frame from its jumping old keys as playback does rather than keeping them as if locked."""
    rig.ewbik.time_budget_ms = 0.0
    for bone, axis in (("forearm.L", 2), ("upper_arm.L", 0)):
        pose_bone = rig.pose.bones[bone]
        pose_bone.rotation_mode = "XYZ"
        pose_bone.lock_rotations_4d = True
        pose_bone.lock_rotation_w = True
        for frame in range(1, 21):
            angles = [0.0, 0.0, 0.0]
            angles[axis] = 0.8 if frame % 2 else -0.8
            add_keys(rig, bone, "rotation_euler", [(frame, Euler(angles))])
    bpy.context.scene.frame_set(1)

    shown = played_back(rig, range(20, 0, -1))

    solved, _ = bake_recording(bake_engine, live_module, rig, options(bake_engine, 1, 20))

    for frame in range(1, 21):
        assert_matrices_close(solved[frame], shown[frame], frame)


def test_operator_keys_moved_bones_with_the_scene_range(rig, bake_engine):
    assert bpy.ops.ewbik.bake() == {"FINISHED"}

    keyed = {fcurve.data_path for fcurve in fcurves(rig, bake_engine)}
    for name in (*HAND_CHAIN, BYSTANDER):
        pose_bone = rig.pose.bones[name]
        path = pose_bone.path_from_id(
            addon_module("ewbik_addon.com.rotation_channels").rotation_channel(pose_bone.rotation_mode)
        )
        assert (path in keyed) == (name != BYSTANDER), path
    assert not any(path.endswith(".location") for path in keyed), "the root does not translate"
    preferences = bpy.context.preferences.edit
    for fcurve in fcurves(rig, bake_engine):
        frames = [key.co[0] for key in fcurve.keyframe_points]
        assert frames == list(range(1, 21)), fcurve.data_path
        key = fcurve.keyframe_points[7]
        assert key.interpolation == preferences.keyframe_new_interpolation_type
        assert key.handle_left_type == key.handle_right_type == preferences.keyframe_new_handle_type
    assert bpy.context.scene.frame_current == 1


def second_metarig_with_a_keyed_hand_target():
    """(armature, target): a metarig beside the first, its right hand pinned to a target keyed
    on frames 1 and 20."""
    from tests.support.blender_helpers import build_metarig

    second = build_metarig(location=(2.0, 0.0, 0.0))
    hand = pin(second, "hand.R")["hand.R"]
    hand.keyframe_insert("location", frame=1)
    hand.location += Vector((-0.1, -0.2, 0.2))
    hand.keyframe_insert("location", frame=20)
    bpy.ops.object.mode_set(mode="OBJECT")
    return second, hand


def test_selected_armatures_bake_in_one_pass_over_the_frames(rig, bake_engine):
    from tests.support.blender_helpers import make_active

    second, hand = second_metarig_with_a_keyed_hand_target()
    bpy.context.scene.frame_set(1)
    make_active(rig)
    second.select_set(True)
    frame_changes = []
    counter = lambda scene, depsgraph=None: frame_changes.append(scene.frame_current)  # noqa: E731
    bpy.app.handlers.frame_change_post.append(counter)
    try:
        assert bpy.ops.ewbik.bake() == {"FINISHED"}
    finally:
        bpy.app.handlers.frame_change_post.remove(counter)

    # every frame is set once for both armatures, then the scene returns to frame 1 once for both
    assert frame_changes == [*range(1, 21), 1]
    for obj, bone, target in (
        (rig, "hand.L", rig.pose.bones["hand.L"].ewbik.target),
        (second, "hand.R", hand),
    ):
        assert obj.ewbik.live is False and len(fcurves(obj, bake_engine)) > 0
        for frame in (5, 20):
            bpy.context.scene.frame_set(frame)
            reached = (obj.matrix_world @ obj.pose.bones[bone].matrix).translation
            assert (reached - target.matrix_world.translation).length < 1e-3, (obj.name, frame)


def test_a_cancelled_crowd_bake_puts_every_armature_back(rig, bake_engine):
    second, hand = second_metarig_with_a_keyed_hand_target()
    existing_animation(rig, bake_engine)
    bpy.context.scene.frame_set(3)
    before = {obj: (action_state(obj, bake_engine), pose_state(obj, bake_engine)) for obj in (rig, second)}

    bake = bake_engine.CrowdBake(bpy.context, [rig, second], options(bake_engine, 6, 14))
    for _ in range(4):
        bake.solve_next()
    assert all(pose_state(obj, bake_engine) != state[1] for obj, state in before.items())
    bake.cancel()

    for obj, state in before.items():
        assert_nothing_changed(obj, bake_engine, state)
    assert bpy.context.scene.frame_current == 3


def test_step_keys_every_nth_frame_and_the_end(rig, bake_engine):
    assert bpy.ops.ewbik.bake(frame_start=2, frame_end=11, step=4) == {"FINISHED"}

    for fcurve in fcurves(rig, bake_engine):
        assert [key.co[0] for key in fcurve.keyframe_points] == [2, 6, 10, 11]


@pytest.mark.parametrize("rotation_mode", ["QUATERNION", "XYZ", "ZXY", "YZX", "AXIS_ANGLE"])
def test_each_rotation_mode_keys_its_own_channel(rig, bake_engine, live_module, rotation_mode):
    for pose_bone in rig.pose.bones:
        pose_bone.rotation_mode = rotation_mode
    channel, size = {
        "QUATERNION": ("rotation_quaternion", 4),
        "AXIS_ANGLE": ("rotation_axis_angle", 4),
    }.get(rotation_mode, ("rotation_euler", 3))

    solved, _ = bake_recording(bake_engine, live_module, rig, options(bake_engine, 1, 12))

    keyed = {(fcurve.data_path, fcurve.array_index) for fcurve in fcurves(rig, bake_engine)}
    for name in HAND_CHAIN:
        for index in range(size):
            assert (f'pose.bones["{name}"].{channel}', index) in keyed
    assert all(path.endswith(channel) for path, _ in keyed), keyed
    for frame, expected in solved.items():
        bpy.context.scene.frame_set(frame)
        assert_matrices_close(pose_matrices(rig), expected, frame)


def existing_animation(obj, bake_engine):
    """Keys before, inside and after frames 6-14 on a baked channel, a neighbour channel and a bystander."""
    tilt = Quaternion((1.0, 0.0, 0.0), 0.3)
    add_keys(
        obj, "forearm.L", "rotation_quaternion", [(-5, tilt), (2, tilt), (10, tilt), (18, tilt), (30, tilt)]
    )
    add_keys(
        obj, "forearm.L", "location", [(1, (0.0, 0.01, 0.0)), (10, (0.0, 0.02, 0.0)), (20, (0.0, 0.0, 0.0))]
    )
    add_keys(obj, BYSTANDER, "rotation_quaternion", [(1, tilt), (8, Quaternion()), (20, tilt)])
    for fcurve in fcurves(obj, bake_engine):
        if fcurve.data_path.endswith("rotation_quaternion") and fcurve.data_path.startswith(
            'pose.bones["forearm'
        ):
            fcurve.keyframe_points[0].interpolation = "CONSTANT"
            fcurve.keyframe_points[-1].handle_left_type = "FREE"
            fcurve.keyframe_points[-1].handle_left = (27.0, 0.5)
    bpy.context.scene.frame_set(1)


@pytest.mark.parametrize("replace_range", [True, False])
def test_keys_outside_the_range_and_other_channels_stay(rig, bake_engine, replace_range):
    existing_animation(rig, bake_engine)
    before = action_state(rig, bake_engine)

    assert bpy.ops.ewbik.bake(frame_start=6, frame_end=14, step=2, replace_range=replace_range) == {
        "FINISHED"
    }

    after = action_state(rig, bake_engine)
    assert after.keys() >= before.keys()
    for channel, keys in before.items():
        if channel[0].endswith("rotation_quaternion") and "forearm.L" in channel[0]:
            continue
        assert after[channel] == keys, f"{channel} changed"
    for index in range(4):
        old = before[('pose.bones["forearm.L"].rotation_quaternion', index)]
        new = after[('pose.bones["forearm.L"].rotation_quaternion', index)]
        old_frames = [co[0] for co in old["co"]]
        new_frames = [co[0] for co in new["co"]]
        expected = [-5, 2, 6, 8, 10, 12, 14, 18, 30]
        assert new_frames == expected, new_frames
        for far in (-5, 30):
            old_key = {name: values[old_frames.index(far)] for name, values in old.items()}
            new_key = {name: values[new_frames.index(far)] for name, values in new.items()}
            assert new_key == old_key
        for near in (2, 18):
            for name in ("co", "interpolation", "handle_left_type", "handle_right_type", "type", "easing"):
                assert new[name][new_frames.index(near)] == old[name][old_frames.index(near)], (near, name)


def test_locked_rotation_axis_keeps_its_own_animation(rig, bake_engine):
    """A locked Euler axis is never keyed, and an animated unkeyed location is never flattened."""
    forearm = rig.pose.bones["forearm.L"]
    forearm.rotation_mode = "XYZ"
    forearm.lock_rotation[0] = True
    add_keys(rig, "forearm.L", "rotation_euler", [(1, Euler((0.1, 0.0, 0.0))), (20, Euler((0.6, 0.0, 0.0)))])
    add_keys(rig, "forearm.L", "location", [(1, Vector((0.0, 0.0, 0.0))), (20, Vector((0.0, 0.02, 0.0)))])
    before = action_state(rig, bake_engine)

    assert bpy.ops.ewbik.bake(frame_start=1, frame_end=20) == {"FINISHED"}

    after = action_state(rig, bake_engine)
    locked = ('pose.bones["forearm.L"].rotation_euler', 0)
    assert after[locked] == before[locked]
    for index in range(3):
        channel = ('pose.bones["forearm.L"].location', index)
        assert after[channel] == before[channel]
    free = ('pose.bones["forearm.L"].rotation_euler', 1)
    assert len(after[free]["co"]) == 20
    scene = bpy.context.scene
    for frame, expected in ((5, 0.1 + 0.5 * 4 / 19), (13, 0.1 + 0.5 * 12 / 19)):
        scene.frame_set(frame)
        assert forearm.rotation_euler[0] == pytest.approx(expected, abs=0.05)


def test_replace_range_off_keeps_keys_between_baked_frames(rig, bake_engine):
    add_keys(rig, "forearm.L", "rotation_quaternion", [(7, Quaternion((1.0, 0.0, 0.0), 0.3))])

    assert bpy.ops.ewbik.bake(frame_start=6, frame_end=10, step=2, replace_range=False) == {"FINISHED"}

    curve = next(
        f for f in fcurves(rig, bake_engine) if f.data_path == 'pose.bones["forearm.L"].rotation_quaternion'
    )
    assert [key.co[0] for key in curve.keyframe_points] == [6, 7, 8, 10]


def test_keys_land_in_the_active_action_and_its_slot(rig, bake_engine):
    action = bpy.data.actions.new("Existing")
    rig.animation_data_create().action = action

    assert bpy.ops.ewbik.bake(frame_start=1, frame_end=5) == {"FINISHED"}

    assert rig.animation_data.action == action
    assert len(bpy.data.actions) == 2  # the target's action and this one: none created
    if hasattr(rig.animation_data, "action_slot"):
        assert rig.animation_data.action_slot is not None
        assert rig.animation_data.action_slot.target_id_type == "OBJECT"
    assert len(fcurves(rig, bake_engine)) > 0


@pytest.mark.skipif(not hasattr(bpy.types, "ActionSlot"), reason="actions have slots from Blender 4.4")
def test_a_shared_action_keeps_the_other_objects_slot(rig, bake_engine):
    """Baking an armature whose action has no slot assigned never keys another object's slot."""
    other = bpy.data.objects.new("Other", None)
    bpy.context.scene.collection.objects.link(other)
    other.location = (1.0, 2.0, 3.0)
    other.keyframe_insert("location", frame=1)
    action = other.animation_data.action
    theirs = {
        (f.data_path, f.array_index): list(f.keyframe_points[0].co)
        for f in fcurve_keys().action_fcurves(other.animation_data)
    }
    rig.animation_data_create().action = action
    rig.animation_data.action_slot = None

    assert bpy.ops.ewbik.bake(frame_start=1, frame_end=5) == {"FINISHED"}

    assert rig.animation_data.action_slot not in (None, other.animation_data.action_slot)
    after = {
        (f.data_path, f.array_index): list(f.keyframe_points[0].co)
        for f in fcurve_keys().action_fcurves(other.animation_data)
    }
    assert after == theirs
    assert any(f.data_path.startswith("pose.bones") for f in fcurves(rig, bake_engine))


def test_creates_an_action_when_there_is_none(rig, bake_engine):
    assert rig.animation_data is None
    assert bpy.ops.ewbik.bake(frame_start=1, frame_end=5) == {"FINISHED"}
    assert rig.animation_data.action is not None
    assert len(fcurves(rig, bake_engine)) > 0


def test_only_selected_keys_only_selected_bones(rig, bake_engine):
    bpy.ops.object.mode_set(mode="POSE")
    select_pose_bones(rig, ["forearm.L", BYSTANDER])

    assert bpy.ops.ewbik.bake(frame_start=1, frame_end=5, only_selected=True) == {"FINISHED"}

    assert {fcurve.data_path for fcurve in fcurves(rig, bake_engine)} == {
        'pose.bones["forearm.L"].rotation_quaternion'
    }


def test_moving_root_keys_its_location(rig, bake_engine):
    rig.ewbik.translate_root = True

    assert bpy.ops.ewbik.bake(frame_start=1, frame_end=5) == {"FINISHED"}

    keyed = {(fcurve.data_path, fcurve.array_index) for fcurve in fcurves(rig, bake_engine)}
    assert {('pose.bones["spine"].location', index) for index in range(3)} <= keyed
    assert not any(path.endswith(".location") and 'spine"]' not in path for path, _ in keyed)


def test_live_stays_on_when_asked(rig, bake_engine):
    assert bpy.ops.ewbik.bake(frame_start=1, frame_end=3, disable_live=False) == {"FINISHED"}
    assert rig.ewbik.live is True


def test_one_undo_step_restores_the_action(rig, bake_engine):
    existing_animation(rig, bake_engine)
    name = rig.name
    before = action_state(rig, bake_engine)
    bpy.ops.ed.undo_push(message="before bake")

    assert bpy.ops.ewbik.bake("EXEC_DEFAULT", True, frame_start=6, frame_end=14) == {"FINISHED"}
    assert action_state(rig, bake_engine) != before
    bpy.ops.ed.undo()

    rig = bpy.data.objects[name]
    assert action_state(rig, bake_engine) == before
    assert rig.ewbik.live is True


def test_modal_steps_advance_frame_by_frame(rig, bake_engine):
    """What each timer tick of the modal does: at least one frame, more while time allows."""
    bake = bake_engine.PoseBake(bpy.context, rig, options(bake_engine, 3, 9, step=2))
    assert (bake.solved, bake.frame) == (0, 3)

    bake.solve_for(seconds=0.0)
    assert (bake.solved, bake.frame, bpy.context.scene.frame_current) == (1, 5, 3)
    bake.solve_for(seconds=60.0)
    assert bake.done and bake.solved == 4 and bake.frame == 9

    assert str(bake.finish()).startswith("Baked 4 frames (3-9)")
    assert bpy.context.scene.frame_current == 1


def test_modal_runs_on_timer_events_to_the_end(rig, bake_engine):
    running = RunningBake(bake_engine.PoseBake(bpy.context, rig, options(bake_engine, 1, 20)))

    results = [running.send("MOUSEMOVE"), running.send("TIMER")]
    while results[-1] == {"RUNNING_MODAL"}:
        results.append(running.send("TIMER"))

    assert results[0] == {"RUNNING_MODAL"} and results[-1] == {"FINISHED"}
    [(kinds, message)] = running.reports
    assert kinds == {"INFO"} and message.startswith("Baked 20 frames (1-20)")
    assert len(fcurves(rig, bake_engine)) > 0 and rig.ewbik.live is False


def test_esc_cancels_the_modal_and_puts_everything_back(rig, bake_engine):
    existing_animation(rig, bake_engine)
    before = (action_state(rig, bake_engine), pose_state(rig, bake_engine))
    running = RunningBake(bake_engine.PoseBake(bpy.context, rig, options(bake_engine, 1, 20)))
    running._bake.solve_next()

    assert running.send("ESC") == {"CANCELLED"}

    assert running.reports == [({"WARNING"}, "Bake cancelled; the action is unchanged")]
    assert_nothing_changed(rig, bake_engine, before)


def test_modal_reports_a_frame_that_fails(rig, bake_engine):
    target = rig.pose.bones["foot.R"].ewbik.target
    target.keyframe_insert("hide_viewport", frame=1)
    target.hide_viewport = True
    target.keyframe_insert("hide_viewport", frame=4)
    bpy.context.scene.frame_set(1)
    before = (action_state(rig, bake_engine), pose_state(rig, bake_engine))
    running = RunningBake(bake_engine.PoseBake(bpy.context, rig, options(bake_engine, 1, 20)))

    results = [running.send("TIMER")]
    while results[-1] == {"RUNNING_MODAL"}:
        results.append(running.send("TIMER"))

    assert results[-1] == {"CANCELLED"}
    [(kinds, message)] = running.reports
    assert kinds == {"ERROR"} and message.startswith("Frame 4: pin 'foot.R'")
    assert_nothing_changed(rig, bake_engine, before)


def test_cancel_puts_everything_back(rig, bake_engine):
    existing_animation(rig, bake_engine)
    bpy.context.scene.frame_set(3)
    before = (action_state(rig, bake_engine), pose_state(rig, bake_engine))

    bake = bake_engine.PoseBake(bpy.context, rig, options(bake_engine, 6, 14))
    for _ in range(4):
        bake.solve_next()
    assert pose_state(rig, bake_engine) != before[1]
    bake.cancel()

    assert_same_keys_and_pose(rig, bake_engine, before)
    assert bpy.context.scene.frame_current == 3
    assert rig.ewbik.live is True


@pytest.mark.parametrize("action", ["animated", "empty", "none"])
def test_failure_while_writing_restores_the_action(rig, bake_engine, monkeypatch, action):
    if action == "animated":
        existing_animation(rig, bake_engine)
    elif action == "empty":
        rig.animation_data_create().action = bpy.data.actions.new("Empty")
    before = action_state(rig, bake_engine)
    actions = {
        existing.name: (len(getattr(existing, "layers", ())), len(getattr(existing, "slots", ())))
        for existing in bpy.data.actions
    }
    slot = getattr(rig.animation_data, "action_slot", None)
    write = fcurve_keys().KeyWriter.write
    calls = []

    def write_then_fail(self, *args, **kwargs):
        calls.append(args[0])
        if len(calls) == 6:
            raise RuntimeError("disk full")
        return write(self, *args, **kwargs)

    monkeypatch.setattr(fcurve_keys().KeyWriter, "write", write_then_fail)
    bake = bake_engine.PoseBake(bpy.context, rig, options(bake_engine, 6, 14))
    while not bake.done:
        bake.solve_next()
    with pytest.raises(RuntimeError, match="disk full"):
        bake.finish()

    assert action_state(rig, bake_engine) == before
    assert {
        existing.name: (len(getattr(existing, "layers", ())), len(getattr(existing, "slots", ())))
        for existing in bpy.data.actions
    } == actions
    assert getattr(rig.animation_data, "action_slot", None) == slot
    if action == "none":
        assert rig.animation_data is None
    assert rig.ewbik.live is True


def report_of(operator_call):
    with pytest.raises(RuntimeError) as error:
        operator_call()
    return str(error.value)


def assert_same_keys_and_pose(obj, bake_engine, before):
    """Keys exactly as before; the pose as before up to float32 rounding: a live armature re-solves
    the restored pose, and a warm start may land a few ulps away."""
    keys, pose = before
    assert action_state(obj, bake_engine) == keys
    now = pose_state(obj, bake_engine)
    assert now.keys() == pose.keys()
    for channel, values in pose.items():
        np.testing.assert_allclose(now[channel], values, atol=1e-6, err_msg=channel)


def assert_nothing_changed(rig, bake_engine, before):
    assert_same_keys_and_pose(rig, bake_engine, before)
    assert rig.ewbik.live is True


def test_start_after_end_is_refused(rig, bake_engine):
    before = (action_state(rig, bake_engine), pose_state(rig, bake_engine))
    message = report_of(lambda: bpy.ops.ewbik.bake(frame_start=12, frame_end=3))
    assert "start frame 12 is after end frame 3" in message
    assert_nothing_changed(rig, bake_engine, before)


def test_no_pins_is_refused(metarig, bake_engine):
    before = (action_state(metarig, bake_engine), pose_state(metarig, bake_engine))
    message = report_of(lambda: bpy.ops.ewbik.bake())
    assert "pinned" in message
    assert_same_keys_and_pose(metarig, bake_engine, before)


def test_target_missing_on_some_frames_is_refused(rig, bake_engine):
    existing_animation(rig, bake_engine)
    target = rig.pose.bones["foot.R"].ewbik.target
    target.keyframe_insert("hide_viewport", frame=1)
    target.hide_viewport = True
    target.keyframe_insert("hide_viewport", frame=9)
    target.hide_viewport = False
    bpy.context.scene.frame_set(1)
    before = (action_state(rig, bake_engine), pose_state(rig, bake_engine))

    message = report_of(lambda: bpy.ops.ewbik.bake(frame_start=1, frame_end=20))

    assert "Frame 9" in message and "foot.R" in message and target.name in message
    assert_nothing_changed(rig, bake_engine, before)
    assert bpy.context.scene.frame_current == 1


def test_target_outside_the_scene_is_refused(rig, bake_engine):
    target = rig.pose.bones["foot.R"].ewbik.target
    for collection in target.users_collection:
        collection.objects.unlink(target)
    bpy.data.collections.new("not in the scene").objects.link(target)  # in no collection at all = deleted
    before = (action_state(rig, bake_engine), pose_state(rig, bake_engine))

    message = report_of(lambda: bpy.ops.ewbik.bake(frame_start=1, frame_end=20))

    assert "Frame 1" in message and "foot.R" in message and "not in the armature's scene" in message
    assert_nothing_changed(rig, bake_engine, before)


def test_locked_channel_is_refused(rig, bake_engine):
    existing_animation(rig, bake_engine)
    for fcurve in fcurves(rig, bake_engine):
        if fcurve.data_path == 'pose.bones["forearm.L"].rotation_quaternion':
            fcurve.lock = True
    before = (action_state(rig, bake_engine), pose_state(rig, bake_engine))

    message = report_of(lambda: bpy.ops.ewbik.bake(frame_start=6, frame_end=14))

    assert "forearm.L" in message and "locked" in message
    assert_nothing_changed(rig, bake_engine, before)


def test_linked_action_is_refused(rig, bake_engine, tmp_path):
    library = pathlib.Path(tmp_path) / "library.blend"
    action = bpy.data.actions.new("Shared")
    bpy.data.libraries.write(str(library), {action})
    bpy.data.actions.remove(action)
    with bpy.data.libraries.load(str(library), link=True) as (source, linked):
        linked.actions = ["Shared"]
    rig.animation_data_create().action = linked.actions[0]
    before = (action_state(rig, bake_engine), pose_state(rig, bake_engine))

    message = report_of(lambda: bpy.ops.ewbik.bake(frame_start=1, frame_end=5))

    assert "Shared" in message and "linked" in message
    assert_nothing_changed(rig, bake_engine, before)


def test_quaternion_keys_stay_in_one_hemisphere(bake_engine):
    angles = np.linspace(0.0, 1.0, 6)
    quaternions = np.array([tuple(Quaternion((0.0, 0.0, 1.0), a)) for a in angles])
    quaternions[[2, 3, 5]] *= -1

    continuous = fcurve_keys().continuous_quaternions(quaternions)

    assert np.all(np.einsum("ij,ij->i", continuous[1:], continuous[:-1]) > 0)
    assert np.allclose(np.abs(continuous), np.abs(quaternions))


def test_euler_keys_do_not_flip(bake_engine):
    order = "XYZ"
    rotations = [Euler((0.2, 1.2 + 0.1 * i, 0.3 * i), order) for i in range(6)]
    eulers = np.array([tuple(e) for e in rotations])
    flipped = Euler((eulers[3][0] + math.pi, math.pi - eulers[3][1], eulers[3][2] + math.pi), order)
    eulers[3] = tuple(flipped)
    eulers[4][2] += 2 * math.pi

    continuous = fcurve_keys().continuous_eulers(eulers, order)

    assert np.abs(np.diff(continuous, axis=0)).max() < 0.5
    for expected, value in zip(rotations, continuous):
        difference = expected.to_matrix() - Euler(value, order).to_matrix()
        assert max(abs(x) for row in difference for x in row) < 1e-6


def test_axis_angle_keys_keep_the_axis_side(bake_engine):
    axis_angles = np.array([[0.5, 0.0, 0.0, 1.0], [-0.55, 0.0, 0.0, -1.0], [0.6, 0.0, 0.1, 0.995]])
    continuous = fcurve_keys().continuous_axis_angles(axis_angles)
    assert np.allclose(continuous[:, 3], [1.0, 1.0, 0.995])
    assert np.allclose(continuous[:, 0], [0.5, 0.55, 0.6])


class OwnerRecordingLayout(RecordingLayout):
    """The recording layout, noting whose property each field shows (the scene's or the operator's)."""

    def prop(self, data, name, **kwargs):
        super().prop(data, name, **kwargs)
        self.log[-1] = (data.bl_rna.identifier, name)


def test_panel_offers_the_range_the_options_and_the_button(rig, bake_engine):
    panel = addon_module("panels.bake").EWBIK_PT_bake
    assert panel.poll(bpy.context)
    scene = bpy.context.scene

    log = []
    panel.draw(types.SimpleNamespace(layout=OwnerRecordingLayout(log)), bpy.context)
    scene.use_preview_range = True
    preview_log = []
    panel.draw(types.SimpleNamespace(layout=OwnerRecordingLayout(preview_log)), bpy.context)

    names = (
        "step",
        "keys_only",
        "tolerance_mm",
        "tolerance_deg",
        "only_selected",
        "replace_range",
        "new_action",
        "disable_live",
    )
    options = [("EWBIK_OT_bake", name) for name in names]
    assert log == [("Scene", "frame_start"), ("Scene", "frame_end"), *options, ("operator", "ewbik.bake")]
    assert preview_log[:2] == [("Scene", "frame_preview_start"), ("Scene", "frame_preview_end")]
    assert bpy.ops.ewbik.bake.poll()


def test_panel_and_operator_need_an_armature(bake_engine):
    assert not addon_module("panels.bake").EWBIK_PT_bake.poll(bpy.context)
    assert not bpy.ops.ewbik.bake.poll()


def test_an_action_another_armature_plays_keeps_its_keys(rig):
    """Before action slots (4.2), baking into an action another armature plays is refused, naming it;
    with slots the bake keys its own slot. Either way the other armature's keys stay as they were."""
    other = rig.copy()
    other.data = rig.data.copy()
    other.name = "Other rig"
    bpy.context.scene.collection.objects.link(other)
    other.select_set(False)
    for pose_bone in other.pose.bones:
        pose_bone.ewbik.target = None  # only plays the action; not an armature to bake
    hand = other.pose.bones["hand.L"]
    hand.rotation_mode = "QUATERNION"
    for frame, angle in ((1, 0.3), (5, 0.6), (10, 0.9)):
        hand.rotation_quaternion = Quaternion((1.0, 0.0, 0.0), angle)
        hand.keyframe_insert("rotation_quaternion", frame=frame)
    action = other.animation_data.action
    theirs = {
        (f.data_path, f.array_index): [tuple(k.co) for k in f.keyframe_points]
        for f in fcurve_keys().action_fcurves(other.animation_data)
    }
    rig.animation_data_create().action = action
    if fcurve_keys().LAYERED_ACTIONS:
        rig.animation_data.action_slot = None
        assert bpy.ops.ewbik.bake(frame_start=1, frame_end=10) == {"FINISHED"}
    else:
        with pytest.raises(RuntimeError, match="also animates 'Other rig'"):
            bpy.ops.ewbik.bake(frame_start=1, frame_end=10)
        assert rig.animation_data.action == action
    after = {
        (f.data_path, f.array_index): [tuple(k.co) for k in f.keyframe_points]
        for f in fcurve_keys().action_fcurves(other.animation_data)
    }
    assert after == theirs
