"""solve() checks every input of its caller: each refusal names the first offending pin or bone."""

import numpy as np
import pytest

from solver import Pin, SolverSettings, solve
from solver.validation import MAX_COORDINATE, SceneError
from tests.solver.conftest import chain_skeleton, identity_pose, translation


def field_of_refusal(pins, rotations=None, locations=None, stiffness=None):
    skeleton = chain_skeleton(5)
    start_rotations, start_locations = identity_pose(5)
    with pytest.raises(SceneError) as err:
        solve(
            skeleton,
            pins,
            start_rotations if rotations is None else rotations,
            start_locations if locations is None else locations,
            SolverSettings(iterations=2),
            stiffness=stiffness,
        )
    return err.value.field


def pin(bone):
    return Pin(bone, translation((0.0, 1.0, 0.0)))


@pytest.mark.parametrize(
    "pins, field",
    [
        ([pin("b1"), pin("b2"), pin("nope"), pin("b2")], "pins[2].bone"),
        ([pin("b1"), pin("b3"), pin("b1"), "b4"], "pins[2].bone"),
        ([pin("b1"), ("b2", np.eye(4)), pin("nope")], "pins[1]"),
        ([pin("b4"), pin("b3"), pin("b2"), pin("b3")], "pins[3].bone"),
    ],
)
def test_the_first_bad_pin_is_named(pins, field):
    assert field_of_refusal(pins) == field


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf, np.nextafter(MAX_COORDINATE, np.inf)])
def test_a_bad_location_names_its_bone(value):
    locations = np.zeros((5, 3))
    locations[3, 2] = value
    locations[4, 0] = value
    assert field_of_refusal([pin("b4")], locations=locations) == "bones[3].location"


def test_values_at_the_bound_are_accepted():
    skeleton = chain_skeleton(5)
    rotations, _ = identity_pose(5)
    locations = np.zeros((5, 3))
    locations[2] = MAX_COORDINATE
    result = solve(skeleton, [pin("b1")], rotations, locations, SolverSettings(iterations=2))
    assert np.all(np.isfinite(result.rotations))


def test_stiffness_beyond_one_and_zero_quaternions_name_their_bone():
    assert field_of_refusal([pin("b4")], stiffness=np.array([0, 0, 0, 1.5, 0])) == "bones[3].stiffness"
    rotations, _ = identity_pose(5)
    rotations[2] = 0.0
    assert field_of_refusal([pin("b4")], rotations=rotations) == "bones[2].rotation"
