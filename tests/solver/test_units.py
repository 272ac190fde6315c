"""The same rig in metres, centimetres or millimetres, or turned, solves the same way."""

import dataclasses

import numpy as np
import pytest

from solver import Pin, Skeleton, SolverSettings, preset_limits, quat, solve
from tests.solver.conftest import captured_pins
from tests.support.kusudamas import joint_limits
from tests.support.mocap import CLIPS, load_bvh

QUARTER_TURN_ABOUT_X = np.array(
    [[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, -1.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]
)


def knee_lift(scale, turn):
    """The CMU rig at its first frame, every length times `scale` and armature space turned by
    `turn`, with hands, feet and head pinned and the left foot lifted by 0.4 of the rig's height
    over 1.75 (and forward): a big move that coordinate descent takes many iterations for."""
    clip = load_bvh(CLIPS[0])
    rest = np.array([b["rest"] for b in clip.bones])
    rest[:, :3, 3] *= scale
    rest = turn @ rest
    names = [b["name"] for b in clip.bones]
    skeleton = Skeleton(
        names, [b["parent"] for b in clip.bones], rest, [b["length"] * scale for b in clip.bones]
    )
    order = [names.index(n) for n in skeleton.names]
    rotations, locations = clip.rotations[0, order], clip.locations[0, order] * scale
    pins = captured_pins(skeleton, rotations, locations)
    lifted = next(k for k, pin in enumerate(pins) if pin.bone == "LeftAnkle")
    target = pins[lifted].target.copy()
    target[:3, 3] += turn[:3, :3] @ np.array([0.0, -0.2, 0.4]) * scale
    pins[lifted] = Pin("LeftAnkle", target)
    limits = joint_limits(skeleton.names, preset_limits(clip.bones))
    stiffness = np.zeros(len(skeleton))
    stiffness[skeleton.index["Hips"]] = 1.0
    return skeleton, pins, rotations, locations, limits, stiffness


@pytest.mark.parametrize("with_limits", [False, True], ids=["free", "limited"])
@pytest.mark.parametrize(
    "scale, turn",
    [(0.01, np.eye(4)), (100.0, np.eye(4)), (1.0, QUARTER_TURN_ABOUT_X), (0.01, QUARTER_TURN_ABOUT_X)],
    ids=["centimetre-object", "hundredfold", "turned", "fbx-layout"],
)
def test_results_do_not_depend_on_units_or_armature_orientation(scale, turn, with_limits):
    settings = SolverSettings(iterations=40, tolerance=0.0)
    reference = knee_lift(1.0, np.eye(4))
    other = knee_lift(scale, turn)
    a = solve(*reference[:4], settings, limits=reference[4] if with_limits else None, stiffness=reference[5])
    b = solve(
        *other[:4],
        dataclasses.replace(settings, tolerance=settings.tolerance * scale),
        limits=other[4] if with_limits else None,
        stiffness=other[5],
    )
    np.testing.assert_allclose(b.position_errors / scale, a.position_errors, atol=1e-9)
    np.testing.assert_allclose(b.orientation_errors_deg, a.orientation_errors_deg, atol=1e-6)
    np.testing.assert_allclose(
        quat.angle(quat.multiply(quat.conjugate(a.rotations), b.rotations)), 0.0, atol=1e-6
    )
    np.testing.assert_allclose(b.locations / scale, a.locations, atol=1e-9)


def test_the_length_unit_follows_the_rig():
    skeleton = knee_lift(1.0, np.eye(4))[0]
    assert 1.0 < skeleton.unit < 1.4  # hips to fingertips of a 1.75 m figure
    assert knee_lift(0.01, QUARTER_TURN_ABOUT_X)[0].unit == pytest.approx(skeleton.unit * 0.01)
    assert skeleton.normalized().unit == 1.0
    np.testing.assert_allclose(skeleton.normalized().lengths * skeleton.unit, skeleton.lengths)
