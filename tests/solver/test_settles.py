"""A solve settles: where a target lies beyond reach it ends where nothing is left to gain, so
an iteration cap twenty times higher moves no pin (motion capture under the humanoid preset,
hands, feet and head pinned, hips given; both loops)."""

import dataclasses

import numpy as np
import pytest

from solver import SolverSettings, preset_limits, preset_stiffness, solve
from tests.support import mocap_frames
from tests.support.kusudamas import joint_limits
from tests.support.mocap import CLIPS

ROW = 10
SETTLED_MM = 0.1


@pytest.fixture(scope="module")
def problem():
    clip = mocap_frames.load_clip(CLIPS[0], 4)
    limits = joint_limits(clip.skeleton.names, preset_limits(clip.bones))
    stiffness = np.zeros(len(clip.skeleton))
    for name, value in preset_stiffness(clip.bones).items():
        stiffness[clip.skeleton.index[name]] = value
    stiffness[clip.skeleton.index[mocap_frames.HIPS]] = 1.0
    return clip, limits, stiffness


def moved(pins, bone, offset):
    """The pins with `bone`'s target moved by `offset` (metres, armature space)."""
    out = []
    for pin in pins:
        if pin.bone == bone:
            target = pin.target.copy()
            target[:3, 3] += offset
            pin = dataclasses.replace(pin, target=target)
        out.append(pin)
    return out


@pytest.mark.parametrize(
    "bone, offset",
    [("lhand", (0.9, 0.0, 0.0)), ("rhand", (0.0, 0.0, -1.2)), ("lhand", (-0.5, 0.6, 0.4))],
    ids=["hand-far-out", "hand-below-the-floor", "hand-across-and-up"],
)
def test_a_second_solve_with_twenty_times_the_iterations_moves_no_pin(problem, bone, offset, default_backend):
    clip, limits, stiffness = problem
    pins = moved(mocap_frames.frame_pins(clip, ROW), bone, np.array(offset) * clip.skeleton.unit)
    start = mocap_frames.hips_given_start(clip, ROW)
    results = [
        solve(clip.skeleton, pins, *start, SolverSettings(iterations=its), limits, stiffness)
        for its in (100, 2000)
    ]
    bones = [clip.skeleton.index[pin.bone] for pin in pins]
    heads = [clip.skeleton.forward(r.rotations, r.locations)[1][bones] for r in results]
    assert np.linalg.norm(heads[0] - heads[1], axis=1).max() * 1e3 <= SETTLED_MM
    assert results[0].yielded.any() and np.array_equal(results[0].yielded, results[1].yielded)
    reached = ~results[0].yielded
    assert results[0].position_errors[reached].max() <= 1e-4
