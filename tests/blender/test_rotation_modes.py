"""Every rotation mode solves to the same evaluated pose; locked channels keep their values."""

import math

import numpy as np
import pytest
from mathutils import Euler, Quaternion, Vector

from tests.support.blender_helpers import addon_module, build_metarig, pin, solve_fully_on_update, update

MODES = ("QUATERNION", "XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX", "AXIS_ANGLE")
START_POSE = {
    "upper_arm.L": Quaternion((0.3, 0.5, -0.2), 0.6),
    "forearm.L": Quaternion((1.0, 0.0, 0.2), 0.5),
    "thigh.R": Quaternion((1.0, 0.1, 0.0), -0.4),
    "spine.002": Quaternion((0.0, 0.2, 1.0), 0.2),
}
MOVES = {"hand.L": Vector((0.06, -0.08, 0.05)), "foot.R": Vector((0.0, -0.08, 0.1))}


def posed_rig(mode, location):
    """A metarig in the given rotation mode everywhere, in START_POSE, hands/feet/head pinned."""
    rig = build_metarig(location)
    solve_fully_on_update(rig, 60)
    for pose_bone in rig.pose.bones:
        pose_bone.rotation_quaternion = START_POSE.get(pose_bone.name, Quaternion())
        pose_bone.rotation_mode = mode  # Blender converts the current rotation to the new mode
    update()
    return rig


def evaluated_pose(rig):
    matrices = np.empty(len(rig.pose.bones) * 16, np.float32)
    rig.pose.bones.foreach_get("matrix", matrices)
    return matrices.reshape(-1, 4, 4)


def solve_moves(rig):
    targets = pin(rig, "hand.L", "foot.R", "foot.L", "spine.006")
    for bone, offset in MOVES.items():
        targets[bone].location += offset
    update()


@pytest.mark.parametrize("mode", MODES[1:])
def test_every_rotation_mode_gives_the_same_evaluated_pose(mode):
    reference = posed_rig("QUATERNION", (0.0, 0.0, 0.0))
    rig = posed_rig(mode, (0.0, 0.0, 0.0))
    assert np.abs(evaluated_pose(rig) - evaluated_pose(reference)).max() < 1e-5
    start = evaluated_pose(rig)
    reference.ewbik.live = False  # both armatures overlap: solve them one at a time
    solve_moves(rig)
    reference.ewbik.live = True
    rig.ewbik.live = False
    solve_moves(reference)
    solved = evaluated_pose(rig)
    assert np.abs(solved - start).max() > 0.05
    assert np.abs(solved - evaluated_pose(reference)).max() < 1e-4
    for bone in MOVES:
        reached = (rig.matrix_world @ rig.pose.bones[bone].matrix).translation
        assert (reached - rig.pose.bones[bone].ewbik.target.matrix_world.translation).length < 1e-3


@pytest.mark.parametrize("mode", ["XYZ", "ZXY", "AXIS_ANGLE"])
def test_solved_bones_are_written_in_their_own_mode(mode):
    rig = posed_rig(mode, (0.0, 0.0, 0.0))
    quaternions = [tuple(b.rotation_quaternion) for b in rig.pose.bones]
    solve_moves(rig)
    assert [tuple(b.rotation_quaternion) for b in rig.pose.bones] == quaternions
    forearm = rig.pose.bones["forearm.L"]
    if mode == "AXIS_ANGLE":
        angle, *axis = forearm.rotation_axis_angle
        written = Quaternion(axis, angle)
    else:
        written = forearm.rotation_euler.to_quaternion()
    assert written.rotation_difference(START_POSE["forearm.L"]).angle > 0.01


def test_unmoved_bones_keep_their_exact_values():
    rig = posed_rig("YXZ", (0.0, 0.0, 0.0))
    rig.ewbik.stand_on_pin = False  # only the bones asked for: no feet planted by the first Pin
    before = {b.name: tuple(b.rotation_euler) for b in rig.pose.bones}
    targets = pin(rig, "hand.L")
    targets["hand.L"].location.z += 0.05
    update()
    for name in ("hand.R", "forearm.R", "thigh.R", "shin.L", "f_index.01.L"):
        assert tuple(rig.pose.bones[name].rotation_euler) == before[name]


def test_locked_euler_channels_keep_their_values():
    rig = posed_rig("XYZ", (0.0, 0.0, 0.0))
    upper_arm = rig.pose.bones["upper_arm.L"]
    upper_arm.lock_rotation = (True, False, True)
    before = tuple(upper_arm.rotation_euler)
    solve_moves(rig)
    after = tuple(upper_arm.rotation_euler)
    assert after[0] == before[0] and after[2] == before[2]
    assert after[1] != before[1]


def test_fully_locked_bone_is_never_rotated():
    rig = posed_rig("QUATERNION", (0.0, 0.0, 0.0))
    for name in ("upper_arm.L", "spine.001"):
        rig.pose.bones[name].lock_rotation = (True, True, True)
    before = {name: tuple(rig.pose.bones[name].rotation_quaternion) for name in ("upper_arm.L", "spine.001")}
    solve_moves(rig)
    for name, values in before.items():
        assert tuple(rig.pose.bones[name].rotation_quaternion) == values
    hand = rig.pose.bones["hand.L"]
    assert (rig.matrix_world @ hand.matrix).translation != hand.ewbik.target.matrix_world.translation


def test_quaternion_locks_as_euler_angles_when_not_4d():
    rig = posed_rig("QUATERNION", (0.0, 0.0, 0.0))
    upper_arm = rig.pose.bones["upper_arm.L"]
    upper_arm.lock_rotations_4d = False
    upper_arm.lock_rotation = (False, False, True)
    before = upper_arm.rotation_quaternion.to_euler("XYZ")
    solve_moves(rig)
    after = upper_arm.rotation_quaternion.to_euler("XYZ")
    assert after.z == pytest.approx(before.z, abs=1e-5)
    assert abs(after.x - before.x) + abs(after.y - before.y) > 1e-3


def test_quaternion_components_lock_in_4d():
    rig = posed_rig("QUATERNION", (0.0, 0.0, 0.0))
    upper_arm = rig.pose.bones["upper_arm.L"]
    upper_arm.lock_rotations_4d = True
    upper_arm.lock_rotation = (True, False, False)
    before = tuple(upper_arm.rotation_quaternion)
    solve_moves(rig)
    after = tuple(upper_arm.rotation_quaternion)
    assert after[1] == before[1]
    assert after != before
    assert all(math.isfinite(value) for value in after)


def test_euler_angles_stay_continuous_with_the_previous_values():
    rig = posed_rig("XYZ", (0.0, 0.0, 0.0))
    forearm = rig.pose.bones["forearm.L"]
    forearm.rotation_euler = Euler((0.3, 0.1, 2 * math.pi + 0.2), "XYZ")
    update()
    solve_moves(rig)
    assert forearm.rotation_euler.z > math.pi  # the compatible Euler near the old value, not wrapped


@pytest.mark.parametrize("budget_ms", [0.0, 1000.0])
def test_other_bones_make_up_for_partly_locked_channels(budget_ms):
    """A reachable target stays reachable when a bone of the chain may only turn about some axes."""
    rig = posed_rig("XYZ", (0.0, 0.0, 0.0))
    rig.ewbik.time_budget_ms = budget_ms
    upper_arm = rig.pose.bones["upper_arm.L"]
    upper_arm.lock_rotation = (True, False, True)
    start = {b.name: tuple(b.rotation_euler) for b in rig.pose.bones}
    goal = {
        "upper_arm.L": (start["upper_arm.L"][0], start["upper_arm.L"][1] + 0.5, start["upper_arm.L"][2]),
        "forearm.L": (0.6, 0.2, -0.3),
        "hand.L": (0.2, -0.1, 0.3),
        "shoulder.L": (0.1, 0.0, 0.15),
    }
    for name, angles in goal.items():
        rig.pose.bones[name].rotation_euler = angles
    update()
    wanted = rig.matrix_world @ rig.pose.bones["hand.L"].matrix
    for name in goal:
        rig.pose.bones[name].rotation_euler = start[name]
    update()
    target = pin(rig, "hand.L")["hand.L"]
    target.matrix_world = wanted
    rig.ewbik.iterations = 200
    update()
    assert tuple(upper_arm.rotation_euler)[0::2] == start["upper_arm.L"][0::2]
    reached = rig.matrix_world @ rig.pose.bones["hand.L"].matrix
    assert (reached.translation - wanted.translation).length < 1e-3
    assert reached.to_quaternion().rotation_difference(wanted.to_quaternion()).angle < math.radians(0.1)


def test_channel_conversion_matches_mathutils_in_every_mode():
    """The vectorized reader (live solving, Limits from Action) against Blender's own conversions."""
    channels = addon_module("ewbik_addon.com.rotation_channels")
    rng = np.random.default_rng(3)
    modes = ["QUATERNION", "AXIS_ANGLE", "XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX"]
    euler = rng.uniform(-3.0, 3.0, size=(len(modes), 3))
    axis_angle = np.concatenate(
        (rng.uniform(-3.0, 3.0, size=(len(modes), 1)), rng.normal(size=(len(modes), 3))), 1
    )
    quaternion = rng.normal(size=(len(modes), 4))
    got = channels.channels_to_quaternions(modes, quaternion, euler, axis_angle)
    for i, mode in enumerate(modes):
        if mode == "QUATERNION":
            want = Quaternion(quaternion[i])
        elif mode == "AXIS_ANGLE":
            want = Quaternion(Vector(axis_angle[i, 1:]), axis_angle[i, 0])
        else:
            want = Euler(euler[i], mode).to_quaternion()
        q = Quaternion(got[i]).normalized()
        assert abs(q.dot(want.normalized())) == pytest.approx(1.0, abs=1e-6), mode  # mathutils is float32
