"""Pinning through the operators on the Rigify metarig, and the bones reaching their dragged targets."""

import bpy
import pytest
from mathutils import Vector

from tests.support.blender_helpers import (
    HANDS_FEET_HEAD,
    addon_module,
    bone_world,
    distance_to_target,
    make_active,
    pin,
    select_pose_bones,
    solve_fully_on_update,
    update,
)
from tests.support.limit_rigs import is_limited


def test_pin_creates_one_empty_per_bone_at_its_pose(metarig):
    metarig.ewbik.stand_on_pin = False  # only the bones asked for: no feet planted by the first Pin
    targets = pin(metarig, "hand.L", "forearm.R", "spine.006")
    collection = bpy.data.collections["EWBIK Targets metarig"]
    assert set(collection.objects) == set(targets.values())
    assert collection.name in bpy.context.scene.collection.children
    for bone, target in targets.items():
        assert metarig.pose.bones[bone].ewbik.target == target
        assert target.type == "EMPTY"
        expected = bone_world(metarig, bone)
        for row in range(3):
            assert (Vector(target.matrix_world[row]) - Vector(expected[row])).length < 1e-5


def test_target_empties_show_their_axes_and_reach_out_of_the_bone(metarig):
    """A pin holds rotation, so its empty shows axes, drawn in front of the body, at least the
    bone's length (the hand's arrows reach past the hand) and scaled with the rig."""
    height = max(metarig.dimensions)
    hand = pin(metarig, "hand.L")["hand.L"]
    assert hand.empty_display_type == "ARROWS" and hand.show_in_front
    assert hand.empty_display_size >= metarig.data.bones["hand.L"].length
    assert hand.empty_display_size >= 0.05 * height
    unscaled = hand.empty_display_size
    bpy.ops.ewbik.unpin(all_bones=True)
    bpy.ops.object.mode_set(mode="OBJECT")
    metarig.scale = (2.0, 2.0, 2.0)
    update()
    assert pin(metarig, "hand.L")["hand.L"].empty_display_size == pytest.approx(2.0 * unscaled, rel=1e-4)


def test_pin_follows_the_armature_transform(metarig):
    metarig.location = (1.0, 2.0, 0.5)
    metarig.rotation_euler = (0.0, 0.0, 1.0)
    update()
    target = pin(metarig, "hand.L")["hand.L"]
    assert (target.matrix_world.translation - bone_world(metarig, "hand.L").translation).length < 1e-5


def test_pinning_a_pinned_bone_reuses_its_target(metarig):
    metarig.ewbik.stand_on_pin = False  # only the bones asked for: no feet planted by the first Pin
    first = pin(metarig, "hand.L")["hand.L"]
    objects_before = len(bpy.data.objects)
    second = pin(metarig, "hand.L", "foot.L")
    assert second["hand.L"] == first
    assert len(bpy.data.objects) == objects_before + 1


def test_pin_without_selection_reports_and_changes_nothing(metarig):
    make_active(metarig)
    bpy.ops.object.mode_set(mode="POSE")
    select_pose_bones(metarig, [])
    objects_before = len(bpy.data.objects)
    with pytest.raises(RuntimeError, match="Select the pose bones to pin"):
        bpy.ops.ewbik.pin()
    assert len(bpy.data.objects) == objects_before


def test_pin_needs_pose_mode(metarig):
    make_active(metarig)
    assert not bpy.ops.ewbik.pin.poll()
    with pytest.raises(RuntimeError, match="Pose Mode"):
        bpy.ops.ewbik.pin()


def test_unpin_removes_only_the_extensions_unused_empties(metarig):
    targets = pin(metarig, "hand.L", "hand.R", "foot.L")
    own_empty = bpy.data.objects.new("my control", None)
    bpy.context.scene.collection.objects.link(own_empty)
    metarig.pose.bones["spine.006"].ewbik.target = own_empty
    follower = bpy.data.objects.new("follower", None)
    bpy.context.scene.collection.objects.link(follower)
    follower.parent = targets["hand.R"]

    select_pose_bones(metarig, ["hand.L", "hand.R", "spine.006"])
    assert bpy.ops.ewbik.unpin() == {"FINISHED"}

    for bone in ("hand.L", "hand.R", "spine.006"):
        assert metarig.pose.bones[bone].ewbik.target is None
    assert "metarig hand.L target" not in bpy.data.objects
    assert bpy.data.objects.get("metarig hand.R target") is not None  # still parents "follower"
    assert bpy.data.objects.get("my control") is not None  # not created by the extension
    assert metarig.pose.bones["foot.L"].ewbik.target == targets["foot.L"]


def test_unpin_all_removes_the_collection(metarig):
    pin(metarig, *HANDS_FEET_HEAD)
    assert bpy.ops.ewbik.unpin(all_bones=True) == {"FINISHED"}
    assert not [b for b in metarig.pose.bones if b.ewbik.target is not None]
    assert "EWBIK Targets metarig" not in bpy.data.collections
    assert not [o for o in bpy.data.objects if o.type == "EMPTY"]


@pytest.mark.parametrize(
    ("bone", "offset"),
    [
        ("hand.L", (0.05, -0.04, 0.06)),
        ("foot.R", (0.05, -0.06, 0.08)),
        ("spine.006", (0.0, -0.06, -0.02)),
        ("forearm.L", (0.0, -0.05, 0.05)),
    ],
)
def test_dragged_target_is_reached_on_the_next_update(metarig, bone, offset):
    solve_fully_on_update(metarig)
    target = pin(metarig, bone)[bone]
    start = bone_world(metarig, bone).translation.copy()
    target.location += Vector(offset)
    update()
    assert distance_to_target(metarig, bone) < 1e-3
    assert (bone_world(metarig, bone).translation - start).length > 0.05


def test_full_body_reach_keeps_the_other_pins(metarig):
    solve_fully_on_update(metarig)
    targets = pin(metarig, *HANDS_FEET_HEAD)
    targets["hand.L"].location += Vector((0.1, -0.15, 0.15))
    targets["spine.006"].location += Vector((0.0, -0.03, -0.02))
    update()
    for bone in HANDS_FEET_HEAD:
        assert distance_to_target(metarig, bone) < 5e-3, bone


def test_solve_operator_reports_per_pin_errors(metarig):
    metarig.ewbik.live = False
    targets = pin(metarig, "hand.L", "foot.L")
    targets["hand.L"].location.z += 0.1
    update()
    assert distance_to_target(metarig, "hand.L") > 0.09  # live is off
    metarig.ewbik.iterations = 200
    assert bpy.ops.ewbik.solve() == {"FINISHED"}
    update()
    assert distance_to_target(metarig, "hand.L") < 1e-3
    assert "hand.L" in metarig.ewbik.status and "foot.L" in metarig.ewbik.status


def test_solve_is_not_cut_by_the_time_budget(metarig):
    """Solve means 'solve this properly': a time budget too short for one iteration does not cut it,
    and the default iteration cap is enough for a 52 cm move."""
    metarig.ewbik.live = False
    metarig.ewbik.time_budget_ms = 0.001
    targets = pin(metarig, *HANDS_FEET_HEAD)
    targets["hand.L"].location += Vector((-0.3, -0.3, 0.3))
    targets["spine.006"].location += Vector((0.0, -0.03, -0.02))
    update()
    assert metarig.ewbik.iterations == 100
    assert bpy.ops.ewbik.solve() == {"FINISHED"}
    update()
    assert metarig.ewbik.status.startswith("converged after ")
    for bone in HANDS_FEET_HEAD:
        assert distance_to_target(metarig, bone) < 1e-3, bone


def test_solve_needs_an_armature():
    bpy.ops.mesh.primitive_cube_add()
    assert not bpy.ops.ewbik.solve.poll()
    with pytest.raises(RuntimeError, match="Select an armature"):
        bpy.ops.ewbik.solve()


def test_solve_without_pins_reports(metarig):
    with pytest.raises(RuntimeError, match="no pinned bones"):
        bpy.ops.ewbik.solve()
    assert "no pinned bones" in metarig.ewbik.status


def knee_ahead_of_leg_line(obj, side):
    """How far the knee sits in front of the hip-ankle line, along the metarig's forward (-Y)."""
    hip, knee, ankle = (bone_world(obj, f"{b}.{side}").translation for b in ("thigh", "shin", "foot"))
    along = (ankle - hip).normalized()
    offset = (knee - hip) - along * (knee - hip).dot(along)
    return offset.dot(Vector((0.0, -1.0, 0.0)))


def lift_left_foot(obj):
    """Pin both feet and the head, then drag the left foot's target 25 cm straight up: without
    limits the solver folds this knee backward (measured: 32 cm behind the hip-ankle line)."""
    solve_fully_on_update(obj)
    targets = pin(obj, "foot.L", "foot.R", "spine.006")
    targets["foot.L"].location += Vector((0.0, 0.0, 0.25))
    update()


def test_pin_sets_humanoid_limits_so_the_knee_bends_forward(metarig, capfd):
    lift_left_foot(metarig)
    limited = [pose_bone.name for pose_bone in metarig.pose.bones if is_limited(pose_bone)]
    assert {"thigh.L", "shin.L", "forearm.R", "spine.001"} <= set(limited)
    out = capfd.readouterr().out
    assert (
        "Pinned 3 bones, 3 new targets; humanoid limits set on "
        f"{len(limited)} bones from the rest pose (Humanoid Limits on Pin)"
    ) in out
    assert distance_to_target(metarig, "foot.L") < 0.03
    assert knee_ahead_of_leg_line(metarig, "L") > 0.1


def test_no_auto_limits_when_turned_off(metarig, capfd):
    metarig.ewbik.auto_limits = False
    lift_left_foot(metarig)
    assert not any(is_limited(pose_bone) for pose_bone in metarig.pose.bones)
    assert "humanoid" not in capfd.readouterr().out


def test_no_auto_limits_on_a_rig_that_has_limits(metarig):
    metarig.pose.bones["forearm.L"].bone.ewbik.use_twist_limit = True
    pin(metarig, "hand.L", "foot.L")
    assert [pose_bone.name for pose_bone in metarig.pose.bones if is_limited(pose_bone)] == ["forearm.L"]
    assert len(metarig.pose.bones["forearm.L"].bone.ewbik.cones) == 0


def test_no_auto_limits_without_humanoid_limbs():
    bpy.ops.object.armature_add()
    obj = bpy.context.object
    pin(obj, "Bone")
    assert not is_limited(obj.pose.bones["Bone"])


def test_auto_limits_property_is_on_by_default(metarig):
    prop = type(metarig.ewbik).bl_rna.properties["auto_limits"]
    assert prop.default is True and prop.name == "Humanoid Limits on Pin" and prop.description


def test_pin_on_a_straight_line_rest_reads_the_current_pose(straight_rig, capfd):
    obj, _ = straight_rig
    bpy.context.scene.frame_set(4)
    pin(obj, "LeftAnkle")
    limited = [pose_bone for pose_bone in obj.pose.bones if is_limited(pose_bone)]
    assert len(limited) == len(obj.pose.bones) - 1  # every bone but the root
    assert (
        f"humanoid limits set on {len(limited)} bones from the current pose (frame 4)"
        in capfd.readouterr().out
    )


def delete_by_hand(obj):
    """Delete an object as the user does (X in the viewport): it leaves every collection."""
    make_active(obj)
    assert bpy.ops.object.delete() == {"FINISHED"}


def test_a_deleted_target_unpins_its_bone_and_the_other_pins_keep_working(metarig):
    metarig.ewbik.stand_on_pin = False  # only the bones asked for: no feet planted by the first Pin
    live = addon_module("ewbik_addon.solve.live")
    solve_fully_on_update(metarig)
    targets = pin(metarig, "hand.L", "foot.L", "spine.006")
    delete_by_hand(targets["hand.L"])
    update()
    assert metarig.pose.bones["hand.L"].ewbik.target is None
    assert "'hand.L'" in metarig.ewbik.status and "no longer pinned" in metarig.ewbik.status
    assert sum("no longer pinned" in message for message in live._state["reports"]) == 1
    targets["foot.L"].location.z += 0.05
    update()
    assert distance_to_target(metarig, "foot.L") < 1e-3
    assert not metarig.ewbik.status_is_error and "2 pins reached" in metarig.ewbik.status


def test_pin_gives_a_bone_whose_target_was_deleted_a_new_one(metarig, capfd):
    metarig.ewbik.live = False
    old = pin(metarig, "hand.L")["hand.L"]
    delete_by_hand(old)
    new = pin(metarig, "hand.L")["hand.L"]
    assert new != old and new.users_collection
    assert "Pinned 1 bone, 1 new target" in capfd.readouterr().out


def test_an_ordinary_unpin_shows_no_error(metarig):
    metarig.ewbik.stand_on_pin = False  # only the bones asked for: no feet planted by the first Pin
    pin(metarig, "hand.L", "foot.L")
    update()
    select_pose_bones(metarig, ["hand.L"])
    assert bpy.ops.ewbik.unpin() == {"FINISHED"}
    update()
    assert metarig.ewbik.status.startswith("1 pin "), metarig.ewbik.status
    assert not metarig.ewbik.status_is_error


def test_unpin_keeps_an_animated_target_and_says_so(metarig, capfd, tmp_path):
    target = pin(metarig, "hand.L")["hand.L"]
    target.keyframe_insert("location", frame=1)
    action = target.animation_data.action.name
    select_pose_bones(metarig, ["hand.L"])
    assert bpy.ops.ewbik.unpin() == {"FINISHED"}
    assert f"kept target '{target.name}' (it is animated)" in capfd.readouterr().out
    bpy.ops.object.mode_set(mode="OBJECT")
    path = str(tmp_path / "unpinned.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    assert "metarig hand.L target" in bpy.data.objects
    assert bpy.data.objects["metarig hand.L target"].animation_data.action.name == action


def test_unpin_keeps_a_target_with_drivers(metarig):
    target = pin(metarig, "hand.L")["hand.L"]
    target.driver_add("location", 2).driver.expression = "0.5"
    select_pose_bones(metarig, ["hand.L"])
    assert bpy.ops.ewbik.unpin() == {"FINISHED"}
    assert bpy.data.objects.get("metarig hand.L target") == target


def test_target_names_follow_a_bone_rename(metarig):
    target = pin(metarig, "hand.L")["hand.L"]
    own = bpy.data.objects.new("my hand control", None)
    bpy.context.scene.collection.objects.link(own)
    metarig.pose.bones["foot.L"].ewbik.target = own
    metarig.pose.bones["hand.L"].name = "palm_ctrl.L"
    metarig.pose.bones["foot.L"].name = "sole.L"
    update()
    assert target.name == "metarig palm_ctrl.L target"
    assert own.name == "my hand control"


def follow_choice_pins(obj, follow):
    obj.ewbik.target_follow = follow
    solve_fully_on_update(obj)
    return pin(obj, "hand.L", "foot.L", "foot.R", "spine.006")


def local_heads(obj):
    return {bone.name: bone.head.copy() for bone in obj.pose.bones}


def test_targets_parented_to_the_armature_object_carry_the_body_along(metarig):
    follow_choice_pins(metarig, "OBJECT")
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    before = local_heads(metarig)
    metarig.location = (1.5, -2.0, 0.3)
    metarig.rotation_euler = (0.0, 0.0, 1.2)
    update()
    after = local_heads(metarig)
    assert max((after[name] - before[name]).length for name in before) < 1e-4
    for bone in ("hand.L", "foot.L", "spine.006"):
        assert distance_to_target(metarig, bone) < 1e-3, bone


def test_world_targets_stay_behind_when_the_armature_moves(metarig):
    follow_choice_pins(metarig, "WORLD")
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    before = local_heads(metarig)
    metarig.location = (0.3, 0.0, 0.0)
    update()
    after = local_heads(metarig)
    assert max((after[name] - before[name]).length for name in before) > 0.05


def test_targets_follow_a_locked_root_bone(metarig):
    root = metarig.pose.bones["spine"]
    root.lock_rotation = (True, True, True)
    targets = follow_choice_pins(metarig, "ROOT_BONE")
    assert all(target.parent == metarig and target.parent_bone == "spine" for target in targets.values())
    assert distance_to_target(metarig, "hand.L") < 1e-5
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    before = local_heads(metarig)
    root.location = (0.0, 0.2, 0.0)
    update()
    assert (metarig.pose.bones["hand.L"].head - before["hand.L"]).length > 0.15
    assert distance_to_target(metarig, "hand.L") < 1e-3


def test_targets_cannot_follow_a_root_bone_the_solver_moves(metarig):
    metarig.ewbik.target_follow = "ROOT_BONE"
    make_active(metarig)
    bpy.ops.object.mode_set(mode="POSE")
    select_pose_bones(metarig, ["hand.L"])
    with pytest.raises(RuntimeError, match="cannot follow the root bone 'spine'"):
        bpy.ops.ewbik.pin()
    assert metarig.pose.bones["hand.L"].ewbik.target is None
    targets = addon_module("ewbik_addon.bridge.targets")
    with pytest.raises(targets.TargetFollowError) as caught:
        targets.check_follow(metarig)
    assert caught.value.field == "target_follow"
    assert isinstance(caught.value, addon_module("ewbik_addon.com.armature_checks").RigError)


def test_solve_unpins_a_bone_whose_target_was_deleted_and_solves_the_rest(metarig, capfd):
    metarig.ewbik.live = False
    targets = pin(metarig, "hand.L", "foot.L")
    delete_by_hand(targets["hand.L"])
    targets["foot.L"].location.z += 0.05
    make_active(metarig)
    assert bpy.ops.ewbik.solve() == {"FINISHED"}
    assert metarig.pose.bones["hand.L"].ewbik.target is None
    assert "'hand.L') was deleted" in capfd.readouterr().out
    update()
    assert distance_to_target(metarig, "foot.L") < 1e-3
