"""Joint-limit operators on the Rigify metarig: presets, the cone list of the active bone, reset."""

import math

import bpy
import pytest
from mathutils import Quaternion, Vector

from tests.support import clinical
from tests.support.blender_helpers import addon_module, make_active, pin, select_pose_bones
from tests.support.limit_rigs import is_limited
from tests.support.ui_layout import RecordingLayout, draw

LIMBS = ("upper_arm.L", "forearm.L", "upper_arm.R", "forearm.R", "thigh.L", "shin.L", "thigh.R", "shin.R")


def pose_mode(obj, *selected):
    make_active(obj)
    bpy.ops.object.mode_set(mode="POSE")
    select_pose_bones(obj, list(selected))


def stored_kusudama(pose_bone):
    """The solver's Kusudama for what the operators stored on this pose bone."""
    settings = pose_bone.bone.ewbik
    limits = {"cones": [{"direction": list(c.direction), "radius": c.radius} for c in settings.cones]}
    if settings.use_twist_limit:
        limits["twist"] = {"min": settings.twist_min, "max": settings.twist_max}
    return addon_module("solver.kusudama").Kusudama.from_dict(limits, bone=pose_bone.name)


def test_preset_limits_arms_legs_and_spine_and_allows_the_rest_pose(metarig, capfd):
    make_active(metarig)
    assert bpy.ops.ewbik.apply_limit_preset(preset="humanoid") == {"FINISHED"}

    limited = [pose_bone for pose_bone in metarig.pose.bones if is_limited(pose_bone)]
    for name in LIMBS + ("spine.001",):
        assert is_limited(metarig.pose.bones[name]), name
    for pose_bone in limited:
        limits = stored_kusudama(pose_bone)
        if limits.cones:
            assert limits.allows([0.0, 1.0, 0.0]), f"{pose_bone.name}: rest direction outside its cones"
        if limits.twist is not None:
            assert limits.twist.min <= 0.0 <= limits.twist.max, f"{pose_bone.name}: rest twist outside"
    out = capfd.readouterr().out
    assert f"Limits set on {len(limited)} bones" in out
    assert "other bones left free" in out
    stiff = {
        pose_bone.name: pose_bone.ewbik.stiffness
        for pose_bone in metarig.pose.bones
        if pose_bone.ewbik.stiffness
    }
    assert stiff == {
        "shoulder.L": pytest.approx(0.8),
        "shoulder.R": pytest.approx(0.8),
        "pelvis.L": 1.0,
        "pelvis.R": 1.0,
    }


def test_preset_holds_a_persons_clinical_ranges_on_the_metarig(metarig):
    """Presets > Humanoid on the Rigify metarig: every joint moved through the clinical tables'
    ranges (tests/support/clinical.py: arms at 28 degrees below level at rest, elbows slightly
    bent, palm and finger bones) stays inside the limits as stored on its bone. The stored cones
    and twists are float32, so a motion ending exactly on a boundary may cross it by 1e-6 rad."""
    make_active(metarig)
    assert bpy.ops.ewbik.apply_limit_preset(preset="humanoid") == {"FINISHED"}
    body = clinical.Body(addon_module("ewbik_addon.com.limit_settings").scene_bones(metarig))
    swept = {body.base(name) for name in body.swept()}
    assert swept >= {
        "spine",
        "chest",
        "neck",
        "head",
        "upper_arm",
        "forearm",
        "hand",
        "thigh",
        "shin",
        "foot",
    }
    assert swept >= {"toes", "thumb_1", "thumb_2", "thumb_3", "finger_1", "finger_2", "finger_3"}
    outside = {}
    for name in body.swept():
        limits = addon_module("solver.kusudama").JointLimits(
            {0: stored_kusudama(metarig.pose.bones[name])}, 1
        )
        for motion, (_, rotations) in body.motions(name).items():
            worst = max(limits.violation(rotation[None])[0] for rotation in rotations)
            if worst > 1e-6:
                outside[(name, motion)] = round(math.degrees(worst), 4)
    assert not outside, f"clinical motions outside the stored limits (degrees): {outside}"


def test_preset_keeps_a_stiffness_the_user_set(metarig):
    make_active(metarig)
    metarig.pose.bones["shoulder.L"].ewbik.stiffness = 0.3
    assert bpy.ops.ewbik.apply_limit_preset(preset="humanoid") == {"FINISHED"}
    assert metarig.pose.bones["shoulder.L"].ewbik.stiffness == pytest.approx(0.3)
    assert metarig.pose.bones["shoulder.R"].ewbik.stiffness == pytest.approx(0.8)


def test_preset_on_selected_bones_only(metarig):
    pose_mode(metarig, "forearm.L")
    assert bpy.ops.ewbik.apply_limit_preset(preset="humanoid", only_selected=True) == {"FINISHED"}
    assert [pose_bone.name for pose_bone in metarig.pose.bones if is_limited(pose_bone)] == ["forearm.L"]


def test_preset_replaces_existing_limits(metarig):
    pose_mode(metarig, "forearm.L")
    for _ in range(4):
        bpy.ops.ewbik.cone_add()
    assert bpy.ops.ewbik.apply_limit_preset(preset="humanoid", only_selected=True) == {"FINISHED"}
    expected = addon_module("solver.presets").preset_limits(
        addon_module("ewbik_addon.com.limit_settings").scene_bones(metarig), "humanoid"
    )["forearm.L"]
    cones = metarig.pose.bones["forearm.L"].bone.ewbik.cones
    assert len(cones) == len(expected["cones"])
    for cone, wanted in zip(cones, expected["cones"]):
        assert tuple(cone.direction) == pytest.approx(wanted["direction"], abs=1e-6)
        assert cone.radius == pytest.approx(wanted["radius"], abs=1e-6)
    settings = metarig.pose.bones["forearm.L"].bone.ewbik
    assert settings.use_twist_limit == ("twist" in expected)
    if "twist" in expected:
        assert (settings.twist_min, settings.twist_max) == pytest.approx(
            (expected["twist"]["min"], expected["twist"]["max"]), abs=1e-6
        )


def test_preset_with_no_recognised_bone_changes_nothing(metarig, capfd):
    pose_mode(metarig, "face")
    assert bpy.ops.ewbik.apply_limit_preset(preset="humanoid", only_selected=True) == {"CANCELLED"}
    assert not any(is_limited(pose_bone) for pose_bone in metarig.pose.bones)
    assert "Limits set on 0 bones from the rest pose; 1 other bone left free" in capfd.readouterr().out


def test_preset_needs_an_armature():
    bpy.ops.mesh.primitive_cube_add()
    with pytest.raises(RuntimeError, match="poll"):
        bpy.ops.ewbik.apply_limit_preset(preset="humanoid")


def test_cone_add_follows_the_posed_direction_and_inserts_after_the_active_cone(metarig):
    pose_mode(metarig, "forearm.L")
    pose_bone = metarig.pose.bones["forearm.L"]
    settings = pose_bone.bone.ewbik
    assert bpy.ops.ewbik.cone_add() == {"FINISHED"}
    assert len(settings.cones) == 1 and settings.active_cone_index == 0
    assert tuple(settings.cones[0].direction) == pytest.approx((0.0, 1.0, 0.0), abs=1e-6)

    pose_bone.rotation_mode = "QUATERNION"
    swing = Quaternion((1.0, 0.0, 0.0), math.radians(40.0))
    pose_bone.rotation_quaternion = swing
    settings.cones[0].radius = 0.3
    assert bpy.ops.ewbik.cone_add() == {"FINISHED"}
    assert bpy.ops.ewbik.cone_add() == {"FINISHED"}
    settings.active_cone_index = 0
    assert bpy.ops.ewbik.cone_add() == {"FINISHED"}
    assert len(settings.cones) == 4 and settings.active_cone_index == 1
    assert tuple(settings.cones[1].direction) == pytest.approx(
        tuple(swing @ Vector((0.0, 1.0, 0.0))), abs=1e-6
    )
    assert settings.cones[0].radius == pytest.approx(0.3)


def shows_minus_zero(angle):
    """Whether Blender's field would show '-0°': a negative angle that rounds to zero degrees."""
    return math.copysign(1.0, angle) < 0.0 and round(math.degrees(angle), 2) == 0.0


def test_the_cone_list_never_shows_minus_zero(metarig):
    for name in ("upper_arm.L", "forearm.R", "thigh.L", "shin.R", "spine.003", "hand.L", "foot.R"):
        pose_mode(metarig, name)
        assert bpy.ops.ewbik.cone_add() == {"FINISHED"}
        log = []
        cone = metarig.pose.bones[name].bone.ewbik.cones[0]
        bpy.types.EWBIK_UL_cones.draw_item(
            None, bpy.context, RecordingLayout(log), None, cone, 0, None, "", 0
        )
        assert {("prop", "flex"), ("prop", "abduct")} <= set(log)
        assert not shows_minus_zero(cone.flex) and not shows_minus_zero(cone.abduct), name


def test_cone_remove_and_move(metarig):
    pose_mode(metarig, "forearm.L")
    settings = metarig.pose.bones["forearm.L"].bone.ewbik
    for radius in (0.1, 0.2, 0.3):
        bpy.ops.ewbik.cone_add()
        settings.cones[settings.active_cone_index].radius = radius
    radii = lambda: [round(cone.radius, 6) for cone in settings.cones]  # noqa: E731
    assert radii() == [0.1, 0.2, 0.3] and settings.active_cone_index == 2

    assert bpy.ops.ewbik.cone_move(direction="UP") == {"FINISHED"}
    assert radii() == [0.1, 0.3, 0.2] and settings.active_cone_index == 1
    assert bpy.ops.ewbik.cone_move(direction="UP") == {"FINISHED"}
    assert radii() == [0.3, 0.1, 0.2] and settings.active_cone_index == 0
    assert bpy.ops.ewbik.cone_move(direction="UP") == {"CANCELLED"}
    assert radii() == [0.3, 0.1, 0.2]
    assert bpy.ops.ewbik.cone_move(direction="DOWN") == {"FINISHED"}
    assert radii() == [0.1, 0.3, 0.2] and settings.active_cone_index == 1

    assert bpy.ops.ewbik.cone_remove() == {"FINISHED"}
    assert radii() == [0.1, 0.2] and settings.active_cone_index == 1
    assert bpy.ops.ewbik.cone_remove() == {"FINISHED"}
    assert bpy.ops.ewbik.cone_remove() == {"FINISHED"}
    assert radii() == [] and settings.active_cone_index == 0
    with pytest.raises(RuntimeError, match="poll"):
        bpy.ops.ewbik.cone_remove()


def test_cone_operators_need_pose_mode(metarig):
    make_active(metarig)
    metarig.data.bones.active = metarig.data.bones["forearm.L"]
    for operator in (bpy.ops.ewbik.cone_add, bpy.ops.ewbik.reset_limits):
        with pytest.raises(RuntimeError, match="poll"):
            operator()


def test_limit_edits_are_undoable():
    limits = addon_module("operators.limits")
    for cls in limits.CLASSES:
        assert "UNDO" in cls.bl_options, cls.bl_idname


def test_reset_limits_clears_only_the_selected_bones(metarig):
    make_active(metarig)
    bpy.ops.ewbik.apply_limit_preset(preset="humanoid")
    pose_mode(metarig, "forearm.L", "shin.R")
    metarig.pose.bones["forearm.L"].bone.ewbik.comfort = 0.5
    assert bpy.ops.ewbik.reset_limits() == {"FINISHED"}
    for name in ("forearm.L", "shin.R"):
        settings = metarig.pose.bones[name].bone.ewbik
        assert len(settings.cones) == 0 and not settings.use_twist_limit and settings.comfort == 0.0
    assert is_limited(metarig.pose.bones["forearm.R"])
    assert is_limited(metarig.pose.bones["shin.L"])


def test_reset_limits_with_nothing_selected_keeps_the_active_bones_limits(metarig, capfd):
    make_active(metarig)
    bpy.ops.ewbik.apply_limit_preset(preset="humanoid")
    pose_mode(metarig, "forearm.L")
    bpy.ops.pose.select_all(action="DESELECT")  # forearm.L stays the active bone, its panel shown
    assert ("operator", "ewbik.reset_limits") in draw("EWBIK_PT_limits")
    assert bpy.ops.ewbik.reset_limits() == {"CANCELLED"}
    assert "No bones selected" in capfd.readouterr().out
    assert is_limited(metarig.pose.bones["forearm.L"])


def test_preset_reads_the_body_from_the_current_pose_when_the_rest_is_a_line(straight_rig, capfd):
    obj, document = straight_rig
    bpy.context.scene.frame_set(7)
    assert bpy.ops.ewbik.apply_limit_preset(preset="humanoid") == {"FINISHED"}
    assert "bones from the current pose (frame 7)" in capfd.readouterr().out
    pose = {b["name"]: {"rotation": b["rotation"], "location": b["location"]} for b in document["bones"]}
    expected = addon_module("solver.presets").preset_limits(document["bones"], pose=pose)
    for name in ("LeftKnee", "RightElbow", "LeftWrist", "Neck"):
        limits = stored_kusudama(obj.pose.bones[name])
        wanted = expected[name]
        assert [c.radius for c in limits.cones] == pytest.approx(
            [c["radius"] for c in wanted["cones"]], abs=1e-4
        )
        for cone, other in zip(limits.cones, wanted["cones"]):
            assert cone.direction == pytest.approx(other["direction"], abs=1e-4)
        assert (limits.twist.min, limits.twist.max) == pytest.approx(
            (wanted["twist"]["min"], wanted["twist"]["max"]), abs=1e-5
        )


def test_preset_with_neither_pose_readable_reports_and_changes_nothing(straight_rig):
    obj, _ = straight_rig
    for pose_bone in obj.pose.bones:
        pose_bone.matrix_basis.identity()
        pose_bone.rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
        pose_bone.rotation_euler = (0.0, 0.0, 0.0)
        pose_bone.location = (0.0, 0.0, 0.0)
    with pytest.raises(RuntimeError, match="No limits set: neither the rest pose nor the current pose"):
        bpy.ops.ewbik.apply_limit_preset(preset="humanoid")
    assert not any(is_limited(pose_bone) for pose_bone in obj.pose.bones)


def test_preset_report_names_the_rest_pose(metarig, capfd):
    make_active(metarig)
    assert bpy.ops.ewbik.apply_limit_preset(preset="humanoid") == {"FINISHED"}
    assert "bones from the rest pose" in capfd.readouterr().out


def test_typing_twist_min_above_max_moves_max_along(metarig):
    settings = metarig.pose.bones["forearm.L"].bone.ewbik
    settings.use_twist_limit = True
    settings.twist_min, settings.twist_max = math.radians(-30.0), math.radians(20.0)
    settings.twist_min = math.radians(50.0)
    assert settings.twist_max == pytest.approx(math.radians(50.0))
    settings.twist_max = math.radians(-60.0)
    assert settings.twist_min == pytest.approx(math.radians(-60.0))
    assert settings.twist_min <= settings.twist_max


def test_a_zero_cone_direction_is_refused(metarig):
    cone = metarig.pose.bones["forearm.L"].bone.ewbik.cones.add()
    cone.direction = (0.0, 0.6, 0.8)
    cone.direction = (0.0, 0.0, 0.0)
    assert tuple(cone.direction) == pytest.approx((0.0, 0.6, 0.8))
    cone.direction[1] = 0.0
    cone.direction[2] = 0.0
    assert Vector(cone.direction).length > 0.5


def test_limits_typed_in_the_panel_never_stop_the_rig(metarig):
    metarig.ewbik.stand_on_pin = False  # only the bones asked for: no feet planted by the first Pin
    make_active(metarig)
    target = pin(metarig, "hand.L")["hand.L"]
    settings = metarig.pose.bones["forearm.L"].bone.ewbik
    settings.use_twist_limit = True
    settings.twist_min = math.radians(170.0)
    settings.cones.add().direction = (0.0, 0.0, 0.0)
    target.location.z += 0.02
    metarig.update_tag()
    bpy.context.view_layer.update()
    assert metarig.ewbik.status.startswith("1 pin "), metarig.ewbik.status
    assert not metarig.ewbik.status_is_error


def test_preset_report_counts_limits_by_body_part_without_listing_roots_or_face_bones(metarig, capfd):
    make_active(metarig)
    assert bpy.ops.ewbik.apply_limit_preset(preset="humanoid") == {"FINISHED"}
    out = capfd.readouterr().out
    report = next(line for line in out.splitlines() if "Limits set on" in line)
    for part in ("spine and head", "left arm", "right arm", "left leg", "right leg", "left fingers"):
        assert f"{part} " in report, part
    assert "not recognised" not in report
    listed = report.split("could not place")[1] if "could not place" in report else ""
    for noise in ("spine,", "face", "lip", "brow", "jaw", "nose", "cheek", "ear", "eye", "teeth", "tongue"):
        assert noise not in listed, noise
    assert "other bones left free" in report
