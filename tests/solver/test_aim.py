"""Look-at pins (`Pin.aim`): the bone's axis points at the target, its position is left to the
body, on both loops; in scene documents."""

import math

import numpy as np
import pytest

from solver import Pin, SceneError, SolverSettings, quat, solve
from solver.aim import aim_errors
from solver.scene import parse_scene, solve_scene
from tests.solver.conftest import POSITION_ONLY, translation
from tests.support.upper_body import SKELETON, STIFFNESS, rest_pose

SETTINGS = SolverSettings(iterations=200, tolerance=1e-6)
HANDS = {"hand.L": (0.5, -0.3, 1.2), "hand.R": (-0.5, -0.2, 1.3)}
LOOKS = [(0.5, -1.0, 1.8), (-1.0, -0.3, 2.5), (0.0, 1.0, 1.0), (2.0, 2.0, 0.5), (0.0, -0.2, 1.75)]


def hand_pins():
    return [Pin(bone, translation(point), orientation_weights=POSITION_ONLY) for bone, point in HANDS.items()]


def solved(pins, settings=SETTINGS):
    return solve(SKELETON, pins, *rest_pose(), settings, stiffness=STIFFNESS)


def head_of(result, bone):
    return SKELETON.forward(result.rotations, result.locations)[1][SKELETON.index[bone]]


def axis_of(result, bone, column):
    rotation = SKELETON.forward(result.rotations, result.locations)[0][SKELETON.index[bone]]
    return quat.to_matrix(rotation)[:, column]


@pytest.mark.parametrize("look", LOOKS)
def test_the_head_looks_at_the_target_while_the_hands_hold(look):
    result = solved([*hand_pins(), Pin("head", translation(look), aim="Y")])
    way = np.subtract(look, head_of(result, "head"))
    axis = axis_of(result, "head", 1)
    angle = math.degrees(math.atan2(np.linalg.norm(np.cross(axis, way)), axis @ way))  # exact near 0
    assert angle <= 0.5
    assert result.orientation_errors_deg[2] == pytest.approx(angle, abs=1e-6)
    assert result.position_errors[2] == 0.0
    assert result.position_errors[:2].max() <= 1e-4  # 0.1 mm
    assert result.converged


@pytest.mark.parametrize("look", LOOKS[:3])
def test_the_aim_leaves_the_body_where_the_other_pins_put_it(look):
    """Position free: the head is not pulled toward the target; the neck stays where the hands put it."""
    without = solved(hand_pins())
    result = solved([*hand_pins(), Pin("head", translation(look), aim="Y")])
    assert np.linalg.norm(head_of(result, "head") - head_of(without, "head")) <= 1e-5
    assert np.linalg.norm(head_of(result, "head") - look) > 0.2


@pytest.mark.parametrize("aim, column, sign", [("X", 0, 1), ("-X", 0, -1), ("Z", 2, 1), ("-Y", 1, -1)])
def test_each_axis_either_way_points_at_the_target(aim, column, sign):
    look = (0.7, -0.8, 1.9)
    result = solved([Pin("head", translation(look), aim=aim)])
    way = np.subtract(look, head_of(result, "head"))
    assert sign * axis_of(result, "head", column) @ way / np.linalg.norm(way) >= math.cos(math.radians(0.5))
    assert np.allclose(head_of(result, "head"), SKELETON.rest[SKELETON.index["head"], :3, 3], atol=1e-9)


def test_the_same_start_and_targets_give_the_same_pose():
    pins = [*hand_pins(), Pin("head", translation(LOOKS[1]), aim="Y")]
    first, second = solved(pins), solved(list(reversed(pins)))
    assert np.array_equal(solved(pins).rotations, first.rotations)
    assert np.allclose(second.rotations, first.rotations, atol=1e-6)


def test_the_heavier_pin_wins_where_aim_and_hand_cannot_both_be_met():
    """The body held, the forearm aimed away from where the hand must go: the weights share the miss
    (falloff 1: the upper arm, above the aimed forearm, still serves the hand)."""
    settings = SolverSettings(iterations=200, tolerance=1e-6, pins_give_way=False)
    hand = (0.6, -0.3, 1.3)
    held = np.isin(SKELETON.names, ["hips", "spine", "chest"]).astype(float)

    def misses(aim_weight):
        pins = [
            Pin("hand.L", translation(hand), orientation_weights=POSITION_ONLY),
            Pin("fore.L", translation((0.5, 3.0, 1.5)), weight=aim_weight, aim="Y", falloff=1.0),
        ]
        result = solve(SKELETON, pins, *rest_pose(), settings, stiffness=held)
        return result.position_errors[0], result.orientation_errors_deg[1]

    light, heavy = misses(0.1), misses(10.0)
    assert heavy[1] < 0.5 * light[1] and heavy[0] > light[0]


def test_aim_errors_measure_the_angle_to_the_target():
    pins = [
        Pin("head", translation((0.0, 0.0, 5.0)), aim="Y"),
        Pin("neck", translation((1.0, 0.0, 1.5)), aim="Z"),
    ]
    errors = aim_errors(SKELETON, pins, *rest_pose())
    assert np.allclose(np.degrees(errors), [0.0, 90.0])


@pytest.mark.parametrize("value", ["y", "W", 1, True])
def test_a_bad_aim_is_refused_naming_the_field(value):
    with pytest.raises(SceneError) as error:
        Pin("head", translation((0.0, 0.0, 2.0)), aim=value)
    assert error.value.field == "aim"


def scene(aim):
    rotations, _ = rest_pose()
    bones = [
        {
            "name": name,
            "parent": None if parent < 0 else SKELETON.names[parent],
            "rest": SKELETON.rest[i].tolist(),
            "length": float(SKELETON.lengths[i]),
            "stiffness": float(STIFFNESS[i]),
        }
        for i, (name, parent) in enumerate(zip(SKELETON.names, SKELETON.parents))
    ]
    pin = {"bone": "head", "target": translation((0.4, -1.0, 2.0)).tolist(), "aim": aim}
    return {"format": "ewbik-scene", "version": 1, "bones": bones, "pins": [pin]}


def test_scene_documents_carry_the_aim():
    stats = solve_scene(scene("Y"))["stats"]["pins"]["head"]
    assert stats["position_error"] == 0.0
    assert stats["orientation_error_deg"] <= 0.5
    assert parse_scene(scene(None)).pins[0].aim is None


def test_a_bad_aim_in_a_scene_names_the_pin():
    with pytest.raises(SceneError) as error:
        parse_scene(scene("up"))
    assert error.value.field == "pins[0].aim"


@pytest.mark.parametrize("hand_priority, aim_priority", [(1.0, 0.0), (0.0, 1.0)])
def test_the_lower_priority_gives_way_between_an_aim_and_a_hand(hand_priority, aim_priority):
    """The body held, the forearm aimed away from where the hand must go: one of them is met."""
    held = np.isin(SKELETON.names, ["hips", "spine", "chest"]).astype(float)
    pins = [
        Pin(
            "hand.L", translation((0.6, -0.3, 1.3)), orientation_weights=POSITION_ONLY, priority=hand_priority
        ),
        Pin("fore.L", translation((0.5, 3.0, 1.5)), aim="Y", falloff=1.0, priority=aim_priority),
    ]
    result = solve(SKELETON, pins, *rest_pose(), SETTINGS, stiffness=held)
    hand_wins = hand_priority > aim_priority
    assert list(result.yielded) == [not hand_wins, hand_wins]
    if hand_wins:
        assert result.position_errors[0] <= 1e-4 and result.orientation_errors_deg[1] > 10.0
    else:
        assert result.orientation_errors_deg[1] <= 0.5 and result.position_errors[0] > 0.1


@pytest.mark.parametrize("look", LOOKS)
def test_a_free_aimed_bone_turns_alone_and_exactly(look):
    """No limits and nothing below the head: the body is the other pins' solve, bone for bone,
    and only the head turns, by the shortest arc onto the way to the target."""
    without = solved(hand_pins())
    result = solved([*hand_pins(), Pin("head", translation(look), aim="Y")])
    head = SKELETON.index["head"]
    others = np.arange(len(SKELETON)) != head
    np.testing.assert_array_equal(result.rotations[others], without.rotations[others])
    assert result.orientation_errors_deg[2] < 1e-9
    assert result.iterations == without.iterations
