"""The carried start (solver/carried_root.py): a translating root first moves with its pins as one."""

import copy
import json

import numpy as np
import pytest

from solver import Pin, Skeleton, SolverSettings, preset_limits, preset_stiffness, quat
from solver.carried_root import FULL_CARRY, NO_CARRY, carry_roots
from solver.plan import plan_solve
from solver.presets import apply_limit_preset
from solver.scene import parse_scene
from solver.solve import solve
from tests.solver.conftest import EXAMPLES
from tests.support import mocap_frames
from tests.support.kusudamas import joint_limits
from tests.support.mocap import CLIPS

HIPS = mocap_frames.HIPS
HUMANOID = EXAMPLES / "humanoid_reach.json"


@pytest.fixture(scope="module")
def body():
    """(skeleton, start rotations, start locations, pins at the start's own frames) of the CMU
    clip's first frame: hands, feet and head pinned where they are."""
    clip = mocap_frames.load_clip(CLIPS[0], 64)
    rotations, locations = mocap_frames.hips_given_start(clip, 0, clip.clip_rotations[0])
    return clip.skeleton, rotations, locations, mocap_frames.frame_pins(clip, 0)


def moved(pin, matrix):
    return Pin(pin.bone, matrix @ pin.target, pin.weight, pin.orientation_weights, pin.falloff, pin.priority)


def turn_and_shift(axis, degrees, shift):
    matrix = np.eye(4)
    matrix[:3, :3] = quat.to_matrix(quat.from_axis_angle(np.array(axis, float), np.radians(degrees)))
    matrix[:3, 3] = shift
    return matrix


def test_targets_moved_as_one_move_the_body_as_one(body):
    """Every target turned 30 degrees and shifted 1 m: the carried root alone reaches them, and
    no other bone turns."""
    skeleton, rotations, locations, pins = body
    rigid = turn_and_shift((0.2, 0.3, 1.0), 30.0, (1.0, -0.5, 0.2))
    result = solve(
        skeleton,
        [moved(pin, rigid) for pin in pins],
        rotations,
        locations,
        SolverSettings(translate_root=True),
    )
    assert result.position_errors.max() < 1e-9 and result.orientation_errors_deg.max() < 1e-6
    others = np.arange(len(skeleton)) != skeleton.index[HIPS]
    np.testing.assert_allclose(np.abs(np.sum(result.rotations * rotations, -1))[others], 1.0, atol=1e-12)


@pytest.mark.parametrize("distance", [0.03, 0.1, 0.5])
def test_near_targets_carry_the_root_their_share_of_the_way(body, distance):
    """Targets all shifted by `distance`: the root takes the share of the shift that distance
    takes from NO_CARRY to FULL_CARRY of the rig's size (all of it from there on), so a nudge or
    a frame followed after the last one moves the limbs before the trunk."""
    skeleton, rotations, locations, pins = body
    shifted = [moved(pin, turn_and_shift((0, 0, 1), 0.0, (distance, 0.0, 0.0))) for pin in pins]
    bones = [skeleton.index[pin.bone] for pin in shifted]
    hips = skeleton.index[HIPS]
    plan = plan_solve(skeleton.normalized(), bones, [0.0] * len(bones), np.zeros(len(skeleton), bool), True)
    roots = [(hips, np.arange(len(shifted)), np.ones(len(shifted)))]
    carried = carry_roots(
        skeleton, shifted, rotations, locations, roots, plan.levels, np.zeros(len(skeleton))
    )
    head = skeleton.forward(*carried)[1][hips] - skeleton.forward(rotations, locations)[1][hips]
    share = min(1.0, (distance / skeleton.unit - NO_CARRY) / (FULL_CARRY - NO_CARRY))
    np.testing.assert_allclose(head, [share * distance, 0.0, 0.0], atol=1e-12)


def test_one_pin_dragged_alone_moves_its_limb_not_the_body(body):
    """A hand dragged 0.5 m with the feet, the head and the other hand held: most pins are on
    their targets, so the root is not carried (the arm and the spine reach)."""
    skeleton, rotations, locations, pins = body
    dragged = [
        moved(pin, turn_and_shift((0, 0, 1), 0.0, (0.5, 0.0, 0.0))) if pin.bone == "rhand" else pin
        for pin in pins
    ]
    bones = [skeleton.index[pin.bone] for pin in dragged]
    hips = skeleton.index[HIPS]
    plan = plan_solve(skeleton.normalized(), bones, [0.0] * len(bones), np.zeros(len(skeleton), bool), True)
    roots = [(hips, np.arange(len(dragged)), np.ones(len(dragged)))]
    carried = carry_roots(
        skeleton, dragged, rotations, locations, roots, plan.levels, np.zeros(len(skeleton))
    )
    np.testing.assert_array_equal(carried[0], rotations)
    np.testing.assert_array_equal(carried[1], locations)


def test_a_changed_start_is_measured_again(body):
    """The start's frames are kept between solves from the same pose (a live drag); another start
    pose, or other pins from the same one, are carried as if nothing were kept."""
    skeleton, rotations, locations, pins = body
    hips = skeleton.index[HIPS]
    crouched = rotations.copy()
    crouched[skeleton.index["LeftKnee"]] = quat.from_axis_angle(np.array([1.0, 0.0, 0.0]), 0.6)
    shifted = [moved(pin, turn_and_shift((0, 0, 1), 20.0, (0.5, 0.2, 0.0))) for pin in pins]
    for start, chosen in ((rotations, shifted), (crouched, shifted[:3]), (crouched, shifted)):
        bones = [skeleton.index[pin.bone] for pin in chosen]
        plan = plan_solve(
            skeleton.normalized(), bones, [0.0] * len(bones), np.zeros(len(skeleton), bool), True
        )
        roots = [(hips, np.arange(len(chosen)), np.ones(len(chosen)))]
        kept = carry_roots(skeleton, chosen, start, locations, roots, plan.levels, np.zeros(len(skeleton)))
        fresh = carry_roots(
            copy.copy(skeleton), chosen, start, locations, roots, plan.levels, np.zeros(len(skeleton))
        )
        np.testing.assert_array_equal(kept[0], fresh[0])
        np.testing.assert_array_equal(kept[1], fresh[1])


def test_without_root_translation_the_root_stays(body):
    skeleton, rotations, locations, pins = body
    rigid = turn_and_shift((0.0, 0.0, 1.0), 10.0, (0.2, 0.0, 0.0))
    result = solve(skeleton, [moved(pin, rigid) for pin in pins], rotations, locations, SolverSettings())
    np.testing.assert_array_equal(result.locations, locations)


def test_a_frozen_root_is_not_carried(body):
    skeleton, rotations, locations, pins = body
    stiffness = np.zeros(len(skeleton))
    hips = skeleton.index[HIPS]
    stiffness[hips] = 1.0
    shift = turn_and_shift((0, 0, 1), 0.0, (0.3, 0.0, 0.0))
    result = solve(
        skeleton,
        [moved(pin, shift) for pin in pins],
        rotations,
        locations,
        SolverSettings(translate_root=True),
        stiffness=stiffness,
    )
    np.testing.assert_array_equal(result.locations[hips], locations[hips])
    np.testing.assert_array_equal(result.rotations[hips], rotations[hips])


def test_head_and_hands_dropped_crouch_over_the_feet():
    """The crouch a new user drags on a standing humanoid with the preset's limits: head and hands
    40 % of leg length down, the feet where they stand. Carried with them, the hips drop straight
    down over the feet and the knees bend; left to the sweeps, the straight legs barely bend and
    the hips are pushed back behind the heels (measured: down 0.21, back 0.34 leg lengths)."""
    doc = apply_limit_preset(json.loads(HUMANOID.read_text()))
    scene = parse_scene(doc)
    skeleton = scene.skeleton
    world, heads = skeleton.forward(scene.rotations, scene.locations)
    leg = np.linalg.norm(heads[skeleton.index["thigh.L"]] - heads[skeleton.index["foot.L"]])
    pins = []
    for bone in ("hand.L", "hand.R", "foot.L", "foot.R", "head"):
        target = turn_and_shift((0, 0, 1), 0.0, heads[skeleton.index[bone]])
        target[:3, :3] = quat.to_matrix(world[skeleton.index[bone]])
        if not bone.startswith("foot"):
            target[2, 3] -= 0.4 * leg
        pins.append(Pin(bone, target))
    result = solve(
        skeleton,
        pins,
        scene.rotations,
        scene.locations,
        SolverSettings(translate_root=True),
        scene.limits,
        scene.stiffness,
    )
    _, solved = skeleton.forward(result.rotations, result.locations)
    shift = solved[skeleton.index["hips"]] - heads[skeleton.index["hips"]]
    assert result.position_errors.max() < 1e-4
    assert -shift[2] > 0.3 * leg and np.linalg.norm(shift[:2]) < 0.2 * leg


def test_the_carried_solve_turns_and_scales_with_the_armature(body):
    """The same body and targets in an armature turned a quarter turn and measured in centimetres
    give the same pose (an FBX rig against the same rig in metres)."""
    skeleton, rotations, locations, pins = body
    drop = turn_and_shift((1.0, 0.0, 0.0), 20.0, (0.1, 0.05, -0.25))
    targets = [moved(pin, drop) if pin.bone != "LeftAnkle" else pin for pin in pins]
    settings = SolverSettings(translate_root=True, tolerance=1e-7)
    reference = solve(skeleton, targets, rotations, locations, settings)
    frame = turn_and_shift((1.0, 0.0, 0.0), -90.0, (0.0, 0.0, 0.0)) * np.array([100.0] * 3 + [1.0])[:, None]
    frame[3, 3] = 1.0
    rest = np.array([frame @ matrix for matrix in skeleton.rest])
    rest[:, :3, :3] /= 100.0
    other = Skeleton(
        list(skeleton.names),
        [skeleton.names[p] if p >= 0 else None for p in skeleton.parents],
        rest,
        skeleton.lengths * 100.0,
    )
    moved_pins = [
        Pin(pin.bone, _unscaled(frame @ pin.target), pin.weight, pin.orientation_weights) for pin in targets
    ]
    result = solve(
        other, moved_pins, rotations, locations * 100.0, SolverSettings(translate_root=True, tolerance=1e-5)
    )
    np.testing.assert_allclose(np.abs(np.sum(result.rotations * reference.rotations, -1)), 1.0, atol=1e-9)
    np.testing.assert_allclose(result.locations, reference.locations * 100.0, atol=1e-6)


def _unscaled(matrix):
    matrix = matrix.copy()
    matrix[:3, :3] /= np.linalg.norm(matrix[:3, :3], axis=0)
    return matrix


def test_a_deep_knee_bend_lowers_the_hips_between_the_feet():
    """CMU 131_01 frame 360, a deep knee bend, solved from the clip's first frame with only hands,
    feet and head pinned and the humanoid preset: the torso places the hips (the rigid carry alone
    left them 29 cm from the actor's, 20 cm too high, the spine bent where the actor bent the
    knees); every pin is reached."""
    clip = mocap_frames.load_clip(CLIPS[0], 40)
    row = 9
    skeleton, hips = clip.skeleton, clip.skeleton.index[HIPS]
    rotations, locations = mocap_frames.hips_given_start(clip, 0, clip.clip_rotations[0])
    captured = skeleton.forward(*mocap_frames.hips_given_start(clip, row, clip.clip_rotations[row]))[1][hips]
    stiffness = np.zeros(len(skeleton))
    for bone, value in preset_stiffness(clip.bones).items():
        stiffness[skeleton.index[bone]] = value
    limits = joint_limits(skeleton.names, preset_limits(clip.bones))
    result = solve(
        skeleton,
        mocap_frames.frame_pins(clip, row),
        rotations,
        locations,
        SolverSettings(iterations=500, tolerance=1e-5, translate_root=True),
        limits=limits,
        stiffness=stiffness,
    )
    assert result.position_errors.max() < 1e-5
    solved = skeleton.forward(result.rotations, result.locations)[1][hips]
    assert abs(solved[2] - captured[2]) < 0.06, solved - captured
    assert np.linalg.norm(solved - captured) < 0.1, solved - captured


def test_each_body_of_a_crowd_places_its_hips_as_it_does_alone():
    """Two copies of the CMU rig in one skeleton (bones `k/name`, as a crowd's): each finds its
    own head and feet, so the torso places each one's hips as it places a lone rig's."""
    clip = mocap_frames.load_clip(CLIPS[0], 40)
    row, skeleton = 9, clip.skeleton
    rotations, locations = mocap_frames.hips_given_start(clip, 0, clip.clip_rotations[0])
    settings = SolverSettings(iterations=500, tolerance=1e-7, translate_root=True)
    frame_pins = mocap_frames.frame_pins(clip, row)
    lone = solve(skeleton, frame_pins, rotations, locations, settings)
    names = [f"{k}/{name}" for k in range(2) for name in skeleton.names]
    parents = [None if p < 0 else f"{k}/{skeleton.names[p]}" for k in range(2) for p in skeleton.parents]
    crowd = Skeleton(names, parents, np.tile(skeleton.rest, (2, 1, 1)), np.tile(skeleton.lengths, 2))
    crowd_pins = [pin.renamed(f"{k}/{pin.bone}") for k in range(2) for pin in frame_pins]
    together = solve(crowd, crowd_pins, np.tile(rotations, (2, 1)), np.tile(locations, (2, 1)), settings)
    heads = crowd.forward(together.rotations, together.locations)[1].reshape(2, len(skeleton), 3)
    lone_heads = skeleton.forward(lone.rotations, lone.locations)[1]
    for k in range(2):
        np.testing.assert_allclose(heads[k], lone_heads, atol=1e-6)
