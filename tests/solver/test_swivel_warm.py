"""Warm starts under limits fitted from motion keep the elbows' swivel: with the hands pinned
(position and orientation) the elbow may still turn about the shoulder-hand line, and a warm
solve should keep it where the previous frame had it rather than swing it out and back."""

import numpy as np
import pytest

from solver.fit_limits import fit_limits
from solver.settings import SolverSettings
from tests.solver.conftest import BACKENDS
from tests.support import mocap, mocap_frames, natural_measures
from tests.support.kusudamas import joint_limits
from tests.support.mocap import CLIPS

JUMP = 0.015  # m/frame^2 the elbow may accelerate beyond the capture's fastest frame of the window


def fitted_sequence(rows):
    """(right elbow |second difference| per test frame: solved, captured) of CMU 131_03, one
    frame in 4, hands, feet and head pinned, hips given, under limits fitted on CMU 131_01 (as
    bench_natural's fitted run), each frame warm-started from the last."""
    clip = mocap_frames.load_clip(CLIPS[1], 4)
    other = mocap.load_bvh(CLIPS[0], height=mocap_frames.RIG_HEIGHT)
    limits = joint_limits(clip.skeleton.names, fit_limits(other.bones, other.rotations))
    body = natural_measures.body_of(clip.skeleton)
    elbow = body.joints.index("RightElbow")
    frames = mocap_frames.solve_sequence(
        clip, SolverSettings(iterations=50), True, SolverSettings(iterations=500), limits, rows=rows
    )
    heads = np.array(
        [natural_measures.heads_of(clip, body, f.result.rotations, f.result.locations) for f in frames]
    )
    truth = natural_measures.captured_heads(clip, body)[rows[1:]]
    return tuple(natural_measures.second_differences(h[:, [elbow]]) for h in (heads, truth))


@pytest.mark.parametrize("default_backend", BACKENDS, indirect=True)
@pytest.mark.xfail(
    strict=True, reason="a warm start lags the captured swivel; the pinned hand then forces a catch-up"
)
def test_a_warm_sequence_under_fitted_limits_keeps_the_elbow_swivel(default_backend):
    """Test frames 0-69 of 131_03 warm-started. At frames 62-65 the right elbow swings 100-200
    mm out of the captured swivel and back (about 200 mm/frame^2 where the capture moves at most
    71): in a fast reach (the hand moves 70-135 mm per test frame) the previous frame's elbow
    lies 50-70 deg around the shoulder-hand line from the captured one, the solve keeps 20-35 deg
    of that lag, and a frame later the pinned hand orientation and the wrist's limits pull it
    back. Neither a step toward the warm start within the pins' null space (it keeps the lag)
    nor one toward the limits' centres (it jumps between frames) removes it. The oracle is the
    capture: the elbow may accelerate at most the capture's fastest frame plus JUMP."""
    solved, captured = fitted_sequence(np.arange(70))
    assert solved.max() <= captured.max() + JUMP
