"""Solve settles: on the metarig under Presets > Humanoid, a hand dragged out of reach stops
short while the other pins hold, the status names it and why, and a second Solve with twenty
times the iterations moves no pin."""

import bpy
import numpy as np
import pytest
from mathutils import Vector

from tests.support.blender_helpers import HANDS_FEET_HEAD, pin, update

SETTLED_MM = 0.1


def pinned_heads(obj):
    update()
    return np.array([obj.matrix_world @ obj.pose.bones[bone].head for bone in HANDS_FEET_HEAD])


@pytest.mark.parametrize(
    "bone, offset",
    [("hand.L", (0.9, 0.0, 0.0)), ("hand.R", (0.0, -0.2, -1.2))],
    ids=["hand-far-out", "hand-below-the-floor"],
)
def test_a_second_solve_with_twenty_times_the_iterations_moves_no_pin(metarig, bone, offset):
    metarig.ewbik.live = False
    targets = pin(metarig, *HANDS_FEET_HEAD)
    assert bpy.ops.ewbik.apply_limit_preset(preset="humanoid") == {"FINISHED"}
    targets[bone].location += Vector(offset)
    assert metarig.ewbik.iterations == 100
    assert bpy.ops.ewbik.solve() == {"FINISHED"}
    first, status = pinned_heads(metarig), metarig.ewbik.status
    assert status.startswith("stopped after ")
    assert f": 4 pins reached; {bone} " in status
    assert "short, out of reach with the other pins held (" in status
    metarig.ewbik.iterations = 2000
    assert bpy.ops.ewbik.solve() == {"FINISHED"}
    assert np.linalg.norm(pinned_heads(metarig) - first, axis=1).max() * 1e3 <= SETTLED_MM
    for other in set(HANDS_FEET_HEAD) - {bone}:
        head = metarig.matrix_world @ metarig.pose.bones[other].head
        assert (head - targets[other].matrix_world.translation).length < 1e-4, other
