"""The live handler: solves on depsgraph updates and frame changes, never re-enters, never raises."""

import bpy
import numpy as np
import pytest
from mathutils import Vector

from tests.support.blender_helpers import (
    HANDS_FEET_HEAD,
    addon_module,
    bone_world,
    build_metarig,
    distance_to_target,
    make_active,
    pin,
    pose_quaternions,
    solve_fully_on_update,
    update,
    worst_distance,
)


def drag_past_the_budget(metarig):
    """Pin hands, feet and head, then move hand.L with a budget of one iteration per update,
    so the live solve stops short and leaves a refinement pending."""
    metarig.ewbik.time_budget_ms = 0.01
    target = pin(metarig, *HANDS_FEET_HEAD)["hand.L"]
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    target.location += Vector((0.05, -0.1, 0.1))
    update()


@pytest.fixture
def counted_solves(monkeypatch):
    """Count the armature solves the live handler makes."""
    armature_solve = addon_module("ewbik_addon.solve.armature_solve")
    calls = []
    real = armature_solve.solve_armature

    def counting(obj, **kwargs):
        calls.append(obj.name)
        return real(obj, **kwargs)

    monkeypatch.setattr(armature_solve, "solve_armature", counting)
    return calls


def test_handlers_are_persistent_across_file_loads(metarig):
    live = addon_module("ewbik_addon.solve.live")
    bpy.ops.wm.read_homefile(use_empty=True)
    assert live.on_depsgraph_update in bpy.app.handlers.depsgraph_update_post
    assert live.on_frame_change in bpy.app.handlers.frame_change_post


def test_moving_a_target_solves_once_per_update(metarig, counted_solves):
    targets = pin(metarig, *HANDS_FEET_HEAD)
    update()
    counted_solves.clear()
    targets["hand.L"].location.z += 0.05
    update()
    assert counted_solves == ["metarig"]
    update()
    assert counted_solves == ["metarig"]  # nothing changed: no solve


def test_live_off_does_not_solve(metarig, counted_solves):
    targets = pin(metarig, "hand.L")
    metarig.ewbik.live = False
    update()
    before = pose_quaternions(metarig).copy()
    counted_solves.clear()
    targets["hand.L"].location.z += 0.05
    update()
    assert counted_solves == []
    assert np.array_equal(pose_quaternions(metarig), before)


def test_moving_an_unrelated_object_does_not_solve(metarig, counted_solves):
    pin(metarig, "hand.L")
    other = bpy.data.objects.new("unrelated", None)
    bpy.context.scene.collection.objects.link(other)
    update()
    counted_solves.clear()
    other.location.x += 1.0
    update()
    assert counted_solves == []


def test_suspended_pauses_live_solving(metarig, counted_solves):
    live_pause = addon_module("ewbik_addon.com.live_pause")
    solve_fully_on_update(metarig)
    target = pin(metarig, "hand.L")["hand.L"]
    update()
    counted_solves.clear()
    with live_pause.suspended():
        target.location.z += 0.05
        update()
        assert counted_solves == []
    metarig.ewbik.iterations = 201  # any armature change re-solves
    update()
    assert counted_solves == ["metarig"]
    assert distance_to_target(metarig, "hand.L") < 1e-3


def test_changing_a_setting_resolves(metarig, counted_solves):
    targets = pin(metarig, "hand.L")
    update()
    counted_solves.clear()
    metarig.ewbik.live = False
    targets["hand.L"].location.z += 0.05
    update()
    assert counted_solves == []
    solve_fully_on_update(metarig)
    metarig.ewbik.live = True
    update()
    assert counted_solves == ["metarig"]
    assert distance_to_target(metarig, "hand.L") < 1e-3


def test_two_armatures_solve_in_the_same_update(metarig):
    second = build_metarig(location=(2.0, 0.0, 0.0))
    moved = {}
    for obj in (metarig, second):
        solve_fully_on_update(obj)
        moved[obj.name] = pin(obj, "hand.R", "foot.L")["hand.R"]
    assert metarig.pose.bones["hand.R"].ewbik.target != second.pose.bones["hand.R"].ewbik.target
    for target in moved.values():
        target.location += Vector((0.04, -0.05, 0.05))
    update()
    for obj in (metarig, second):
        assert distance_to_target(obj, "hand.R") < 1e-3, obj.name
        assert distance_to_target(obj, "foot.L") < 1e-3, obj.name


@pytest.fixture
def crowd(metarig):
    """Three metarigs, hands and feet pinned, live, each with a target per hand and foot."""
    rigs = [metarig, build_metarig(location=(2.0, 0.0, 0.0)), build_metarig(location=(4.0, 0.0, 0.0))]
    targets = {}
    for obj in rigs:
        solve_fully_on_update(obj)
        targets[obj.name] = pin(obj, "hand.L", "hand.R", "foot.L", "foot.R")
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    return rigs, targets


def solver_calls(monkeypatch):
    """The bone count of every skeleton the live solves hand to the solver from now on."""
    skeletons = []
    real = addon_module("solver").solve

    def recording(skeleton, *args, **kwargs):
        skeletons.append(len(skeleton.names))
        return real(skeleton, *args, **kwargs)

    for name in ("ewbik_addon.solve.armature_solve", "ewbik_addon.solve.crowd_solve"):
        monkeypatch.setattr(addon_module(name), "solve", recording)
    return skeletons


def test_live_armatures_are_solved_together_in_one_solver_call(crowd, monkeypatch):
    rigs, targets = crowd
    skeletons = solver_calls(monkeypatch)
    for step in range(2):
        for obj in rigs:
            targets[obj.name]["hand.L"].location += Vector((0.03, -0.04, 0.04))
            targets[obj.name]["foot.R"].location += Vector((0.0, -0.02, 0.03))
        update()
        assert skeletons == [3 * 159] * (step + 1)
        for obj in rigs:
            for bone in ("hand.L", "hand.R", "foot.L", "foot.R"):
                assert distance_to_target(obj, bone) < 1e-3, (obj.name, bone, step)
            assert obj.ewbik.status.startswith("4 pins reached"), obj.ewbik.status


def test_a_crowd_armature_with_a_rotation_only_pin_is_solved_on_its_own(crowd, monkeypatch):
    """A rotation-only pin needs a solve that places it first, so its armature leaves the crowd's
    shared problem: the other two are one solve of two trees, it is solved alone."""
    rigs, targets = crowd
    rigs[2].pose.bones["hand.L"].ewbik.pin_kind = "ROTATION"
    update()
    skeletons = solver_calls(monkeypatch)
    for obj in rigs:
        targets[obj.name]["foot.R"].location += Vector((0.0, -0.02, 0.03))
    update()
    assert 2 * 159 in skeletons and 3 * 159 not in skeletons, skeletons
    for obj in rigs:
        assert distance_to_target(obj, "foot.R") < 1e-3, obj.name


def test_a_broken_armature_in_a_crowd_reports_while_the_others_solve(crowd):
    rigs, targets = crowd
    broken = rigs[1]
    broken.scale = (0.0, 0.0, 0.0)
    update()
    for obj in rigs:
        targets[obj.name]["hand.L"].location += Vector((0.03, -0.04, 0.04))
    update()
    assert "zero scale" in broken.ewbik.status
    for obj in (rigs[0], rigs[2]):
        assert distance_to_target(obj, "hand.L") < 1e-3, obj.name
        assert obj.ewbik.status.startswith("4 pins reached"), obj.ewbik.status


def test_an_exception_in_the_solve_stays_inside_the_handler(metarig, monkeypatch, capfd):
    armature_solve = addon_module("ewbik_addon.solve.armature_solve")
    target = pin(metarig, "hand.L")["hand.L"]
    update()
    before = pose_quaternions(metarig).copy()

    def broken(obj, **kwargs):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(armature_solve, "solve_armature", broken)
    target.location.z += 0.05
    update()
    assert "ZeroDivisionError: boom" in metarig.ewbik.status
    assert np.array_equal(pose_quaternions(metarig), before)
    assert "Traceback" not in capfd.readouterr().err


def test_animated_target_is_followed_on_frame_change(metarig):
    solve_fully_on_update(metarig)
    target = pin(metarig, "hand.L")["hand.L"]
    bpy.ops.object.mode_set(mode="OBJECT")
    start = target.location.copy()
    target.keyframe_insert("location", frame=1)
    target.location = start + Vector((0.0, -0.1, 0.1))
    target.keyframe_insert("location", frame=10)
    scene = bpy.context.scene
    for frame in (5, 10):
        scene.frame_set(frame)
        assert distance_to_target(metarig, "hand.L") < 1e-3, frame


def test_solves_cut_short_by_the_budget_continue_from_the_timer(metarig):
    """Timers never fire in the bpy module: call the timer's body as Blender would."""
    live = addon_module("ewbik_addon.solve.live")
    drag_past_the_budget(metarig)
    first = distance_to_target(metarig, "hand.L")
    assert first > 1e-3
    assert bpy.app.timers.is_registered(live.refine_unconverged)
    live.refine_unconverged()
    update()
    assert not live.has_unconverged()  # one solve without the budget gives the answer
    assert distance_to_target(metarig, "hand.L") < 1e-3


def test_refinements_reuse_the_cached_bone_settings(metarig, monkeypatch):
    """The timer's tag is the extension's own: it must not cost a rescan of every bone's settings."""
    live = addon_module("ewbik_addon.solve.live")
    pin_reading = addon_module("ewbik_addon.bridge.pin_reading")
    drag_past_the_budget(metarig)
    rescans = []
    real_pinned_targets = pin_reading.pinned_targets

    def recorded(obj, *, rescan=True):
        rescans.append(rescan)
        return real_pinned_targets(obj, rescan=rescan)

    monkeypatch.setattr(pin_reading, "pinned_targets", recorded)
    before = distance_to_target(metarig, "hand.L")
    for _tick in range(5):
        live.refine_unconverged()
        update()
    assert rescans and not any(rescans)
    assert distance_to_target(metarig, "hand.L") < before


def test_loading_a_file_forgets_pending_refinements(metarig):
    """The refinement timer does not survive a file load; neither may its bookkeeping."""
    live = addon_module("ewbik_addon.solve.live")
    drag_past_the_budget(metarig)
    assert live.has_unconverged()
    bpy.ops.wm.read_homefile(use_empty=True)
    assert not live.has_unconverged()


def test_refinement_stops_for_unreachable_targets(metarig, counted_solves):
    live = addon_module("ewbik_addon.solve.live")
    metarig.ewbik.time_budget_ms = 0.01
    target = pin(metarig, "hand.L", "foot.L")["hand.L"]
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    target.location.x += 5.0
    update()
    counted_solves.clear()
    for _tick in range(10):
        live.refine_unconverged()
        update()
    assert len(counted_solves) <= 1


def test_undo_restores_the_pose_and_pins(metarig):
    solve_fully_on_update(metarig)
    target = pin(metarig, "hand.L")["hand.L"]
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    bpy.ops.ed.undo_push(message="pinned")
    before = pose_quaternions(metarig).copy()
    target.location.z += 0.08
    update()
    assert not np.allclose(pose_quaternions(metarig), before)
    bpy.ops.ed.undo_push(message="moved")
    bpy.ops.ed.undo()
    update()
    restored = bpy.data.objects["metarig"]
    assert np.allclose(pose_quaternions(restored), before, atol=1e-6)
    assert restored.pose.bones["hand.L"].ewbik.target is not None
    assert distance_to_target(restored, "hand.L") < 1e-3


def test_settings_and_pins_survive_save_and_reload(metarig, tmp_path):
    metarig.ewbik.auto_limits = False  # the only cone is the one added below
    metarig.ewbik.iterations = 42
    metarig.ewbik.time_budget_ms = 0.0
    target_name = pin(metarig, "hand.L", "foot.L")["hand.L"].name
    metarig.pose.bones["forearm.L"].ewbik.stiffness = 0.25
    cone = metarig.data.bones["forearm.L"].ewbik.cones.add()
    cone.radius = 1.2
    bpy.ops.object.mode_set(mode="OBJECT")
    path = str(tmp_path / "pinned.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)

    bpy.ops.wm.open_mainfile(filepath=path)
    rig = bpy.data.objects["metarig"]
    assert rig.ewbik.iterations == 42
    assert rig.pose.bones["forearm.L"].ewbik.stiffness == pytest.approx(0.25)
    assert rig.pose.bones["forearm.L"].bone.ewbik.cones[0].radius == pytest.approx(1.2)
    moved = rig.pose.bones["hand.L"].ewbik.target
    assert moved.name == target_name
    moved.location.z += 0.05
    update()
    assert distance_to_target(rig, "hand.L") < 1e-3


def test_deleting_the_armature_while_live_is_harmless(crowd):
    """The handler swallows every exception, so what a failure would leave is checked instead: an
    error reported, the deleted rig still cached, or the other armatures no longer solving."""
    rigs, targets = crowd
    live = addon_module("ewbik_addon.solve.live")
    rig_cache = addon_module("ewbik_addon.bridge.rig_cache")
    deleted = rigs.pop(1)
    uid = deleted.session_uid
    orphaned = targets.pop(deleted.name)
    assert uid in rig_cache._rigs
    bpy.data.objects.remove(deleted)
    for target in orphaned.values():
        target.location.z += 0.05
    for obj in rigs:
        targets[obj.name]["hand.L"].location += Vector((0.03, -0.04, 0.04))
    update()
    assert live._state["reports"] == []
    assert uid not in rig_cache._rigs
    for obj in rigs:
        assert not obj.ewbik.status_is_error and obj.ewbik.status.startswith("4 pins reached"), (
            obj.ewbik.status
        )
        assert distance_to_target(obj, "hand.L") < 1e-3, obj.name


def test_the_evaluated_pose_and_what_hangs_off_it_follow_each_drag(metarig):
    """The write-back's refresh tag must make Blender re-evaluate the pose and its dependents
    (an object parented to a bone, a mesh deformed by the armature) on every supported version."""
    scene = bpy.context.scene
    child = bpy.data.objects.new("on hand.L", None)
    scene.collection.objects.link(child)
    child.parent, child.parent_type, child.parent_bone = metarig, "BONE", "hand.L"
    mesh = bpy.data.meshes.new("skin")
    mesh.from_pydata([tuple(metarig.matrix_world @ metarig.data.bones["hand.L"].tail_local)], [], [])
    skin = bpy.data.objects.new("skin", mesh)
    scene.collection.objects.link(skin)
    skin.vertex_groups.new(name="hand.L").add([0], 1.0, "REPLACE")
    skin.modifiers.new("armature", "ARMATURE").object = metarig
    metarig.ewbik.time_budget_ms = 0.0  # no budget: the pose reached does not depend on the machine's load
    metarig.ewbik.iterations = 200
    target = pin(metarig, *HANDS_FEET_HEAD)["hand.L"]
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    for step in range(3):
        target.location += Vector((0.02, -0.03, 0.04))
        update()
        depsgraph = bpy.context.evaluated_depsgraph_get()
        evaluated = metarig.evaluated_get(depsgraph)
        hand = evaluated.matrix_world @ evaluated.pose.bones["hand.L"].matrix
        assert (hand.translation - target.matrix_world.translation).length < 1e-4, step
        tail = evaluated.matrix_world @ evaluated.pose.bones["hand.L"].tail
        assert (child.evaluated_get(depsgraph).matrix_world.translation - tail).length < 1e-5, step
        vertex = skin.evaluated_get(depsgraph).to_mesh().vertices[0].co
        assert (skin.matrix_world @ vertex - tail).length < 1e-4, step


def test_a_quick_drag_with_the_default_settings_shows_what_solve_gives(metarig):
    """A quick 52 cm hand move across the body: once the timer has run (if the budget cut the
    update), the pose is the one Solve gives for the same targets, every pin on its target."""
    live = addon_module("ewbik_addon.solve.live")
    targets = pin(metarig, *HANDS_FEET_HEAD)
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    targets["hand.L"].location += Vector((-0.3, -0.3, 0.3))
    update()
    if live.has_unconverged():
        live.refine_unconverged()
        update()
    shown = pose_quaternions(metarig).copy()
    assert worst_distance(metarig, HANDS_FEET_HEAD) < 1e-3
    bpy.ops.object.mode_set(mode="POSE")
    assert bpy.ops.ewbik.solve() == {"FINISHED"}
    np.testing.assert_allclose(pose_quaternions(metarig), shown, atol=1e-6)


def test_solve_keeps_its_pose_under_a_tight_time_budget(metarig):
    """Solve's write is not solved again by the live handler within its Time Budget: with 1 ms, that
    second solve stopped after one iteration and replaced Solve's pose (0.6 apart in a quaternion)."""
    metarig.ewbik.time_budget_ms = 1.0
    targets = pin(metarig, *HANDS_FEET_HEAD)
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    targets["hand.L"].location += Vector((-0.3, -0.3, 0.3))
    update()
    bpy.ops.object.mode_set(mode="POSE")
    assert bpy.ops.ewbik.solve() == {"FINISHED"}
    solved = pose_quaternions(metarig).copy()
    update()
    np.testing.assert_array_equal(pose_quaternions(metarig), solved)
    assert worst_distance(metarig, HANDS_FEET_HEAD) < 1e-3


def test_a_new_live_error_is_reported_once_with_an_error_icon(metarig, capfd):
    live = addon_module("ewbik_addon.solve.live")
    target = pin(metarig, "hand.L")["hand.L"]
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    metarig.pose.bones["forearm.L"].ewbik.stiffness = float("nan")
    for _step in range(3):
        target.location.z += 0.01
        metarig.update_tag()
        update()
    assert metarig.ewbik.status_is_error and "stiffness is NaN" in metarig.ewbik.status
    assert len(live._state["reports"]) == 1
    live.report_pending()
    out = capfd.readouterr().out
    assert out.count("stiffness is NaN") == 1 and "Error" in out
    metarig.pose.bones["forearm.L"].ewbik.stiffness = 0.0
    update()
    assert not metarig.ewbik.status_is_error
    assert live._state["reports"] == []


def test_deleted_armatures_leave_the_rig_cache(metarig):
    rig_cache = addon_module("ewbik_addon.bridge.rig_cache")
    pin(metarig, "hand.L")
    update()
    uid = metarig.session_uid
    assert uid in rig_cache._rigs
    make_active(metarig)
    bpy.ops.object.delete()
    assert "metarig" not in bpy.data.objects
    update()
    assert uid not in rig_cache._rigs


def test_renaming_a_pinned_bone_in_edit_mode_shows_the_edit_mode_message(metarig):
    target = pin(metarig, "hand.L", "foot.L")["hand.L"]
    update()
    bpy.ops.object.mode_set(mode="EDIT")
    metarig.data.edit_bones["hand.L"].name = "wrist_ctrl.L"
    update()
    assert "Edit Mode" in metarig.ewbik.status and "KeyError" not in metarig.ewbik.status
    bpy.ops.object.mode_set(mode="POSE")
    update()
    assert not metarig.ewbik.status_is_error
    assert metarig.pose.bones["wrist_ctrl.L"].ewbik.target == target
    assert target.name == "metarig wrist_ctrl.L target"


def test_a_target_driven_by_the_bone_it_pins_is_refused(metarig):
    target = pin(metarig, "hand.L", "foot.L")["hand.L"]
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    driver = target.driver_add("location", 0).driver
    variable = driver.variables.new()
    variable.type = "TRANSFORMS"
    variable.targets[0].id = metarig
    variable.targets[0].bone_target = "hand.L"
    variable.targets[0].transform_type = "LOC_X"
    driver.expression = f"{variable.name} + 0.3"
    start = bone_world(metarig, "hand.L").translation.copy()
    for _step in range(5):
        target.location.y += 0.01
        update()
    assert "feedback loop" in metarig.ewbik.status and "'hand.L'" in metarig.ewbik.status
    assert (bone_world(metarig, "hand.L").translation - start).length < 1e-6
