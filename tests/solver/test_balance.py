"""Balance: the centre of mass kept over the pinned feet while a hand reaches, pins exact.

The standing test rig (metres, -Y forward, Z up) has hands, feet and head pinned and a hand
swept forward and down; the centre of mass and the support polygon are measured with the
module's own functions, which the tests of the polygon check against hand-made shapes.
"""

import numpy as np
import pytest

from solver import SceneError, quat
from solver.balance import SEGMENT_MASS, Body, body_of, bone_masses, pose_centre_of_mass, support_of
from solver.pins import Pin
from solver.presets import bone_roles
from solver.settings import SolverSettings
from solver.solve import solve
from tests.solver.test_straight_limb import PINNED, standing_character

HAND = "mixamorig:RightHand"
REACH_END = np.array([-0.05, -0.65, 1.4])  # in front of the chest, within reach


def sweep_frame(skeleton, share):
    """The pins of a frame `share` (0..1) of the way of the right hand to REACH_END."""
    rotations, heads = skeleton.forward(
        np.tile(quat.IDENTITY, (len(skeleton), 1)), np.zeros((len(skeleton), 3))
    )
    pins = []
    for name in PINNED:
        b = skeleton.index[name]
        target = np.eye(4)
        target[:3, :3] = quat.to_matrix(rotations[b])
        target[:3, 3] = heads[b] + (share * (REACH_END - heads[b]) if name == HAND else 0.0)
        pins.append(Pin(name, target))
    return pins


def swept(balance, frames=9):
    """(share of frames with the centre of mass over the feet, largest pin miss)."""
    skeleton, limits = standing_character()
    body = body_of(skeleton, bone_roles(skeleton.names))
    rotations, locations = np.tile(quat.IDENTITY, (len(skeleton), 1)), np.zeros((len(skeleton), 3))
    settings = SolverSettings(translate_root=True, balance=balance)
    inside, misses = 0, []
    for frame in range(frames):
        pins = sweep_frame(skeleton, frame / (frames - 1))
        result = solve(skeleton, pins, rotations, locations, settings, limits, body=body)
        com = pose_centre_of_mass(skeleton, body, result.rotations, result.locations)
        inside += support_of(pins, body, skeleton.unit).depth(com) >= 0.0
        misses.append(result.position_errors.max())
    return inside / frames, max(misses)


def test_the_centre_of_mass_stays_over_the_feet_and_the_pins_hold():
    off, _ = swept(False)
    on, miss = swept(True)
    assert off < 0.8
    assert on >= 0.95
    assert miss < 1e-4


def test_segment_masses_follow_the_table_and_sum_to_one():
    skeleton, _ = standing_character()
    masses = bone_masses(skeleton, bone_roles(skeleton.names))
    assert masses.sum() == pytest.approx(1.0)
    thigh = masses[skeleton.index["mixamorig:LeftUpLeg"]]
    assert thigh == pytest.approx(SEGMENT_MASS["thigh"])
    trunk = ("Hips", "Spine", "Spine1", "LeftShoulder", "RightShoulder")
    assert sum(masses[skeleton.index[f"mixamorig:{b}"]] for b in trunk) == pytest.approx(
        SEGMENT_MASS["trunk"]
    )


def test_the_support_polygon_is_the_hull_of_the_planted_feet():
    skeleton, _ = standing_character()
    body = body_of(skeleton, bone_roles(skeleton.names))
    pins = sweep_frame(skeleton, 0.0)
    support = support_of(pins, body, skeleton.unit)
    assert np.allclose(support.corners @ body.up, support.corners[0] @ body.up)
    middle = support.corners.mean(0)
    assert support.depth(middle) > 0.0
    assert support.depth(middle + np.array([0.0, 1.0, 0.0])) < 0.0
    lifted = [
        Pin(p.bone, p.target + np.pad([[0.0], [0.0], [0.3]], ((0, 1), (3, 0))))
        if p.bone.endswith("LeftFoot")
        else p
        for p in pins
    ]
    one_foot = support_of(lifted, body, skeleton.unit)
    assert np.all(one_foot.corners[:, 0] < 0.0)  # only the right foot (at -X) carries the body


def test_a_bad_body_is_refused_naming_the_field():
    with pytest.raises(SceneError, match="body.masses"):
        Body(np.array([-1.0, 2.0]), {})
    with pytest.raises(SceneError, match="body.up"):
        Body(np.ones(2), {}, np.zeros(3))
