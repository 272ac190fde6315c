"""The moves animators make (tests/support/moves.py), through the operators: with Presets >
Humanoid, and with every setting as a new user finds it (the "default" configuration).

What an animator expects after dragging and pressing Solve: every pin on its target, planted
feet where they were, knees bending forward, elbows bending the anatomical way, no NaN; with the
defaults also a trunk that bends forward, never arches back, and carries the head in front of
the hips. The same moves are pictured by `make gallery` (docs/gallery).

Pins reach within 2 mm. The reach puts the wrist at 97 % of the arm's length from the shoulder:
there the straight-ish arm barely moves the hand along its own length, so every step gains
little and the limits (elbow hinge fan, shoulder cone) leave a narrow way in; the reaching hand
gets 1 % of the rig's height (about 20 mm on the metarig, 14 mm on the CMU rig). Pins the move
holds still (the head and hands while a foot lifts) may give by 0.2 % of the height (4 mm on
the metarig): the spine's limits can leave them no exact pose, and the solver then shares the
last millimetres between them rather than let one pin slide.
"""

import functools
import math

import bpy
import pytest
from mathutils import Matrix

from tests.support import moves

PIN_TOLERANCE_MM = 2.0
EDGE_OF_REACH_FRACTION = 0.01
HELD_FRACTION = 0.002
FOOT_SLIDE_MM = 2.0
LEAN_BACK_DEG = 5.0  # a standing trunk leans this little either way; more backward is an arch
TESTED_CONFIGS = ("humanoid", "default")
CASES = [
    pytest.param(rig, move, config, id=f"{rig}-{move}-{config}")
    for rig in moves.RIGS
    for move, spec in moves.MOVES.items()
    for config in spec.configs
    if config in TESTED_CONFIGS
]
DEFAULT_CASES = [case for case in CASES if case.values[2] == "default"]


@functools.cache
def outcome_of(rig, move, config):
    """The move performed once per session from an empty file (every check below reads it)."""
    bpy.ops.wm.read_homefile(use_empty=True)
    _, _, outcome = moves.perform(rig, move, config)
    return outcome


def pin_tolerance_mm(outcome, bone):
    if bone in outcome.dragged:
        edge = outcome.move in moves.EDGE_OF_REACH
        return EDGE_OF_REACH_FRACTION * outcome.height_mm if edge else PIN_TOLERANCE_MM
    if bone in outcome.foot_slide_mm:
        return PIN_TOLERANCE_MM
    return max(PIN_TOLERANCE_MM, HELD_FRACTION * outcome.height_mm)


@pytest.mark.parametrize("rig, move, config", CASES)
def test_pose_is_finite(rig, move, config):
    assert outcome_of(rig, move, config).finite


@pytest.mark.parametrize("rig, move, config", CASES)
def test_every_pin_reaches_its_target(rig, move, config):
    outcome = outcome_of(rig, move, config)
    missed = {
        bone: round(error, 2)
        for bone, error in outcome.pin_error_mm.items()
        if not error < pin_tolerance_mm(outcome, bone)
    }
    assert not missed, f"pins off target (mm): {missed}; {outcome.solve_status}"


@pytest.mark.parametrize("rig, move, config", CASES)
def test_planted_feet_do_not_slide(rig, move, config):
    outcome = outcome_of(rig, move, config)
    assert outcome.foot_slide_mm, "every move keeps at least one foot planted"
    slid = {foot: round(mm, 2) for foot, mm in outcome.foot_slide_mm.items() if not mm < FOOT_SLIDE_MM}
    assert not slid, f"planted feet slid (mm, ankle or toe): {slid}"


@pytest.mark.parametrize("rig, move, config", CASES)
def test_knees_bend_forward(rig, move, config):
    outcome = outcome_of(rig, move, config)
    assert all(outcome.knees_forward), (
        f"knee (left, right) bend {outcome.knee_bend_deg} deg, "
        f"in front of the hip-ankle line by {outcome.knee_front_mm} mm"
    )


@pytest.mark.parametrize("rig, move, config", CASES)
def test_elbows_bend_the_anatomical_way(rig, move, config):
    outcome = outcome_of(rig, move, config)
    assert all(outcome.elbows_anatomical), (
        f"elbow (left, right) bend {outcome.elbow_bend_deg} deg, "
        f"hinge turned {outcome.elbow_hinge_deg} deg from the arm's neutral outward axis (limit 90)"
    )


@pytest.mark.parametrize("rig, move, config", DEFAULT_CASES)
def test_the_trunk_bends_forward_never_back(rig, move, config):
    """Hips free (Move Root, turned on by the first Pin): the body bends forward at the hips and
    keeps its head in front of them, as a person does, rather than pushing the hips forward
    and arching back."""
    outcome = outcome_of(rig, move, config)
    assert outcome.lean_deg > -LEAN_BACK_DEG and outcome.head_front_mm > 0.0, (
        f"trunk leans {outcome.lean_deg:.1f} deg forward, head {outcome.head_front_mm:.0f} mm in front of the hips"
    )


def _turn_about(obj, bone, axis, degrees, pivot):
    """Turn a pose bone (and so its children) in armature space about axis through pivot."""
    pose_bone = obj.pose.bones[bone]
    turn = Matrix.Rotation(math.radians(degrees), 4, axis)
    pose_bone.matrix = Matrix.Translation(pivot) @ turn @ Matrix.Translation(-pivot) @ pose_bone.matrix
    bpy.context.view_layer.update()


def test_the_checks_tell_a_backward_knee_and_elbow(metarig):
    """The oracles themselves: the rest metarig passes; a hyperextended knee and a flipped elbow fail."""
    spec = moves.RIGS["metarig"]
    assert moves.knee(metarig, spec, 0)[1] > 0.0 and moves.elbow(metarig, spec, 1)[1] < 90.0
    left, _ = moves.body_frame(metarig, spec)
    knee_joint = metarig.pose.bones["shin.L"].head.copy()
    _turn_about(metarig, "shin.L", left, 30.0, knee_joint)  # the foot swings back: a deeper, normal bend
    assert moves.knee(metarig, spec, 0)[1] > 0.0
    _turn_about(metarig, "shin.L", left, -60.0, knee_joint)  # now forward of the thigh's line
    bend, front = moves.knee(metarig, spec, 0)
    assert bend > 15.0 and front < 0.0
    upper_arm = metarig.pose.bones["upper_arm.R"]
    _turn_about(metarig, "forearm.R", upper_arm.tail - upper_arm.head, 180.0, upper_arm.tail.copy())
    bend, hinge = moves.elbow(metarig, spec, 1)
    assert bend > 20.0 and hinge > 90.0
