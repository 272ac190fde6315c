"""`ewbik.limits_from_action` on the CMU BVH rig (Euler bones, animated by Blender's importer).

Oracle for the rig's motion: each bone's `matrix_basis` on every frame, read through mathutils
independently of the operator's foreach_get path; membership is the solver's own
`JointLimits.violation` of what the operator stored on the pose bones.
"""

import bpy
import numpy as np
import pytest
from mathutils import Matrix, Vector

from tests.support.blender_helpers import (
    MOCAP_CLIP,
    addon_module,
    bone_world,
    import_mocap_rig,
    make_active,
    pin,
    select_pose_bones,
    solve_fully_on_update,
    update,
)
from tests.support.kusudamas import violations
from tests.support.ui_layout import draw

FIRST, LAST = 1, 240
INSIDE = 1e-5


def stored_limits(obj):
    """{bone name: scene-document limits} of the pose bones that have any."""
    limits = {}
    for pose_bone in obj.pose.bones:
        settings = pose_bone.bone.ewbik
        if not settings.cones and not settings.use_twist_limit:
            continue
        limits[pose_bone.name] = {
            "cones": [{"direction": list(c.direction), "radius": c.radius} for c in settings.cones]
        }
        if settings.use_twist_limit:
            limits[pose_bone.name]["twist"] = {"min": settings.twist_min, "max": settings.twist_max}
    return limits


def stored_joint_limits(obj):
    """The JointLimits of the limits stored on the rig's bones, in pose.bones order."""
    kusudama = addon_module("solver.kusudama")
    names = [pose_bone.name for pose_bone in obj.pose.bones]
    return kusudama.JointLimits(
        {names.index(n): kusudama.Kusudama.from_dict(d, bone=n) for n, d in stored_limits(obj).items()},
        len(names),
    )


def local_rotations(obj, frames):
    scene = bpy.context.scene
    out = []
    for frame in frames:
        scene.frame_set(frame)
        out.append([tuple(pose_bone.matrix_basis.to_quaternion()) for pose_bone in obj.pose.bones])
    return np.array(out)


def use_range(first=FIRST, last=LAST, current=FIRST):
    """Narrow the timeline to these frames with its preview range, as an animator does."""
    scene = bpy.context.scene
    scene.use_preview_range = True
    scene.frame_preview_start, scene.frame_preview_end = first, last
    scene.frame_set(current)


def short_clip(tmp_path, frames):
    """The CMU clip cut to its first frames, as a BVH file."""
    lines = MOCAP_CLIP.read_text().splitlines()
    motion = lines.index("MOTION")
    kept = lines[: motion + 1] + [f"Frames: {frames}"] + lines[motion + 2 : motion + 3 + frames]
    path = tmp_path / "short.bvh"
    path.write_text("\n".join(kept) + "\n")
    return path


def test_the_default_range_is_the_actions_not_the_scenes(tmp_path, capfd):
    obj = import_mocap_rig(short_clip(tmp_path, 114))
    scene = bpy.context.scene
    assert (scene.frame_start, scene.frame_end) == (1, 250)
    assert bpy.ops.ewbik.limits_from_action() == {"FINISHED"}
    assert "from 114 frames" in capfd.readouterr().out
    assert stored_limits(obj)

    use_range(10, 40)
    assert bpy.ops.ewbik.limits_from_action() == {"FINISHED"}
    assert "from 31 frames" in capfd.readouterr().out, "a preview range narrows it"


def test_fitted_limits_hold_the_rigs_own_frames(mocap_rig, capfd):
    use_range(current=17)
    knee = mocap_rig.pose.bones["LeftKnee"]
    knee.rotation_euler = (0.3, 0.0, 0.0)  # an edit not keyed yet
    assert bpy.ops.ewbik.limits_from_action(coverage=0.98) == {"FINISHED"}
    assert bpy.context.scene.frame_current == 17
    assert tuple(knee.rotation_euler) == pytest.approx((0.3, 0.0, 0.0))

    limits = stored_limits(mocap_rig)
    roots = {pose_bone.name for pose_bone in mocap_rig.pose.bones if pose_bone.parent is None}
    assert len(limits) >= 20 and not roots & set(limits)
    assert any(len(d["cones"]) > 1 for d in limits.values())
    outside = (
        violations(stored_joint_limits(mocap_rig), local_rotations(mocap_rig, range(FIRST, LAST + 1)))
        > INSIDE
    )
    names = [pose_bone.name for pose_bone in mocap_rig.pose.bones]
    held = {name: 1.0 - outside[:, names.index(name)].mean() for name in limits}
    assert min(held.values()) >= 0.98, held
    assert f"Limits fitted on {len(limits)} bones from {LAST - FIRST + 1} frames" in capfd.readouterr().out


def test_the_margin_widens_the_fitted_limits(mocap_rig):
    use_range()
    assert bpy.ops.ewbik.limits_from_action(margin=0.0) == {"FINISHED"}
    tight = stored_limits(mocap_rig)
    assert bpy.ops.ewbik.limits_from_action() == {"FINISHED"}
    default = stored_limits(mocap_rig)
    assert set(tight) == set(default)
    for name in ("LeftShoulder", "Neck", "Chest"):
        wide, narrow = default[name]["cones"], tight[name]["cones"]
        assert len(wide) == len(narrow)
        assert all(w["radius"] > n["radius"] + 0.05 for w, n in zip(wide, narrow))
    assert default["LeftCollar"]["cones"] == tight["LeftCollar"]["cones"]  # the clip never turns it


def test_keeps_comfort_and_only_changes_selected_bones(mocap_rig):
    use_range()
    mocap_rig.pose.bones["LeftKnee"].bone.ewbik.comfort = 0.25
    make_active(mocap_rig)
    bpy.ops.object.mode_set(mode="POSE")
    select_pose_bones(mocap_rig, ["LeftKnee", "LeftElbow"])
    assert bpy.ops.ewbik.limits_from_action(only_selected=True) == {"FINISHED"}
    assert set(stored_limits(mocap_rig)) == {"LeftKnee", "LeftElbow"}
    assert mocap_rig.pose.bones["LeftKnee"].bone.ewbik.comfort == pytest.approx(0.25)


def test_a_solve_with_fitted_limits_still_reaches_and_respects_them(mocap_rig):
    use_range()
    assert bpy.ops.ewbik.limits_from_action(coverage=1.0) == {"FINISHED"}
    solve_fully_on_update(mocap_rig, 100)
    targets = pin(mocap_rig, "LeftWrist", "LeftAnkle", "RightAnkle")
    bpy.ops.object.mode_set(mode="OBJECT")
    hand = targets["LeftWrist"]
    hand.location += Vector((0.0, 0.04, 0.03))
    assert bpy.ops.ewbik.solve() == {"FINISHED"}
    update()
    assert (bone_world(mocap_rig, "LeftWrist").translation - hand.matrix_world.translation).length < 1e-3
    pose = np.array([[tuple(b.matrix_basis.to_quaternion()) for b in mocap_rig.pose.bones]])
    assert np.all(np.isfinite(pose))
    assert violations(stored_joint_limits(mocap_rig), pose).max() <= 1e-4


@pytest.mark.parametrize(
    "options, message",
    [
        ({"frame_start": 50, "frame_end": 10}, "Frame range 50..10 is empty"),
    ],
)
def test_bad_range_reports_an_error_and_changes_nothing(mocap_rig, options, message):
    use_range(current=5)
    knee = mocap_rig.pose.bones["LeftKnee"]
    knee.bone.ewbik.cones.add().radius = 0.5
    with pytest.raises(RuntimeError, match=message):
        bpy.ops.ewbik.limits_from_action(**options)
    assert set(stored_limits(mocap_rig)) == {"LeftKnee"}
    assert len(knee.bone.ewbik.cones) == 1 and knee.bone.ewbik.cones[0].radius == pytest.approx(0.5)
    assert bpy.context.scene.frame_current == 5


def test_a_rig_held_in_one_pose_gets_no_limits(mocap_rig, capfd):
    use_range(1, 20, current=30)
    mocap_rig.animation_data.action = None
    assert any(pose_bone.matrix_basis != Matrix() for pose_bone in mocap_rig.pose.bones)
    assert bpy.ops.ewbik.limits_from_action() == {"CANCELLED"}
    assert stored_limits(mocap_rig) == {}
    assert "No bone moves in frames 1..20" in capfd.readouterr().out


def test_limits_panel_offers_the_button(mocap_rig):
    make_active(mocap_rig)
    bpy.ops.object.mode_set(mode="POSE")
    select_pose_bones(mocap_rig, ["LeftKnee"])
    assert ("operator", "ewbik.limits_from_action") in draw("EWBIK_PT_limits")
