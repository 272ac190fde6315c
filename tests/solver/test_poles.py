"""Poles: a pinned limb bends in the plane through its root joint, its target and the pole.

The bend plane is measured independently of the solver: joints from `pose_matrices` (scipy
rotations, 4x4 products), the plane's normal from the hip, knee and ankle.
"""

import numpy as np
import pytest

from solver import SceneError, quat
from solver.pins import Pin
from solver.scene import solve_scene
from solver.settings import SolverSettings
from solver.solve import solve
from tests.solver.conftest import chain_skeleton, identity_pose, load_example, pose_matrices, translation
from tests.support.tpose_rig import PINNED, standing_character

LEG = ("mixamorig:LeftUpLeg", "mixamorig:LeftLeg", "mixamorig:LeftFoot")
FOOT_LIFT = np.array([0.0, -0.25, 0.35])  # forward (-Y) and up: the knee bends about 95 degrees


def plane_angle_deg(hip, knee, ankle, pole):
    """Angle between the limb's bend plane and the plane through hip, ankle and pole, and
    whether the knee lies on the pole's side of the hip-ankle line."""
    bend = np.cross(knee - hip, ankle - hip)
    wanted = np.cross(pole - hip, ankle - hip)
    cosine = bend @ wanted / (np.linalg.norm(bend) * np.linalg.norm(wanted))
    return np.degrees(np.arccos(min(1.0, abs(cosine)))), cosine > 0.0


def joints(skeleton, result, bones):
    parents = [None if p < 0 else skeleton.names[p] for p in skeleton.parents]
    pose = pose_matrices(skeleton.names, parents, skeleton.rest, result.rotations, result.locations)
    return [pose[skeleton.index[b]][:3, 3] for b in bones]


def lifted_foot(pole, limits=None):
    """The standing character with hands, feet and head pinned, the left foot lifted forward."""
    skeleton, preset = standing_character()
    rotations, locations = identity_pose(len(skeleton))
    world_rotation, world_head = skeleton.forward(rotations, locations)
    pins = []
    for name in PINNED:
        b = skeleton.index[name]
        target = translation(world_head[b] + (FOOT_LIFT if name == LEG[2] else 0.0))
        target[:3, :3] = quat.to_matrix(world_rotation[b])
        pins.append(Pin(name, target, pole=pole if name == LEG[2] else None))
    result = solve(skeleton, pins, rotations, locations, SolverSettings(), limits=preset if limits else None)
    return skeleton, preset, result


def pole_at(degrees_out):
    """A pole 0.5 in front of the left hip, turned `degrees_out` toward the character's left."""
    turn = np.radians(degrees_out)
    return np.array([0.1, 0.0, 0.95]) + 0.5 * np.array([np.sin(turn), -np.cos(turn), 0.0])


@pytest.mark.parametrize("degrees_out", [-30.0, 0.0, 40.0, 90.0])
def test_the_knee_bends_in_the_pole_plane_and_every_pin_holds(degrees_out):
    pole = pole_at(degrees_out)
    skeleton, _, result = lifted_foot(pole)
    angle, pole_side = plane_angle_deg(*joints(skeleton, result, LEG), pole)
    assert angle < 1.0 and pole_side
    assert result.converged and result.position_errors.max() < 1e-5
    assert result.orientation_errors_deg.max() < 0.01


def test_the_bend_follows_a_moving_pole_smoothly():
    knees = [
        joints(skeleton, result, LEG)[1]
        for skeleton, _, result in map(lifted_foot, map(pole_at, range(0, 62, 2)))
    ]
    steps = np.linalg.norm(np.diff(knees, axis=0), axis=-1)
    assert steps.max() < 1.5 * np.median(steps) and steps.max() < 0.02


@pytest.mark.parametrize("degrees_out", [20.0, 60.0, 90.0])
def test_limits_win_over_the_pole(degrees_out):
    """The humanoid preset lets the hip turn the knee out by some 25 degrees: a pole within that
    is met, one beyond turns the knee only as far as the limits allow."""
    pole = pole_at(degrees_out)
    _, _, free = lifted_foot(None, limits=True)
    skeleton, limits, result = lifted_foot(pole, limits=True)
    assert limits.violation(result.rotations).max() <= limits.violation(free.rotations).max() + 1e-9
    assert result.converged and result.position_errors.max() < 1e-5
    angle, pole_side = plane_angle_deg(*joints(skeleton, result, LEG), pole)
    before, _ = plane_angle_deg(*joints(skeleton, free, LEG), pole)
    assert pole_side and (angle < 1.0 if degrees_out == 20.0 else angle < before - 5.0)


def test_a_straight_limb_keeps_its_plane_from_the_pole():
    """A limb straight at rest faces the pole with its lower bone's Z axis (the way it bends
    when it bends at rest); bent, its middle joint goes into the pole's plane."""
    skeleton = chain_skeleton(4)
    parents = [None if p < 0 else skeleton.names[p] for p in skeleton.parents]
    pole = np.array([3.0, 2.0, 0.0])
    for bend in (0.0, 30.0):
        rotations, locations = identity_pose(4)
        rotations[2] = quat.from_axis_angle([1.0, 0.0, 0.0], np.radians(bend))
        end = pose_matrices(skeleton.names, parents, skeleton.rest, rotations, locations)[3]
        pin = Pin("b3", end, pole=pole)
        result = solve(
            skeleton, [pin], rotations, locations, SolverSettings(), stiffness=np.array([1.0, 0, 0, 0])
        )
        pose = pose_matrices(skeleton.names, parents, skeleton.rest, result.rotations, result.locations)
        assert np.abs(pose[3] - end).max() < 1e-9
        hip, knee, ankle = pose[1:, :3, 3]
        facing = knee + pose[2, :3, 2] if bend == 0.0 else knee
        angle, pole_side = plane_angle_deg(hip, facing, ankle, pole)
        assert angle < 1.0 and pole_side


@pytest.mark.parametrize("pole", [[0.0, float("nan"), 0.0], [1.0, 2.0], "up", [0.0, 0.0, 1e9]])
def test_a_bad_pole_is_refused_naming_it(pole):
    with pytest.raises(SceneError) as refused:
        Pin("b3", translation((0.0, 1.0, 0.0)), pole=pole)
    assert refused.value.field.startswith("pole")


def test_scene_documents_carry_the_pole():
    doc = load_example("two_arms.json")
    pinned = doc["pins"][0]
    doc["pins"][0] = {**pinned, "pole": [0.0, 0.0, "x"]}
    with pytest.raises(SceneError) as refused:
        solve_scene(doc)
    assert refused.value.field == "pins[0].pole[2]"
    doc["pins"][0] = {**pinned, "pole": [0.0, 0.0, -5.0]}
    assert solve_scene(doc)["stats"]["converged"]
