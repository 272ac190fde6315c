"""A straight limb whose joint may bend to one side only is singular: no turn moves its end
toward its root to first order, so sweeps and polish keep the knee straight and pull the body
toward a foot they cannot lift. The solve must bend the knee to its allowed side instead."""

import numpy as np
import pytest

from solver import quat
from solver.pins import Pin
from solver.settings import SolverSettings
from solver.solve import solve
from tests.support.tpose_rig import PINNED, standing_character


@pytest.mark.compares_backends
@pytest.mark.parametrize("backend", ["native", "numpy"])
@pytest.mark.parametrize("lift", [(0.0, -0.1, 0.2), (0.0, -0.05, 0.1), (0.0, 0.1, 0.2)])
def test_a_lifted_foot_bends_the_straight_knee_and_every_pin_is_reached(lift, backend):
    skeleton, limits = standing_character()
    rotations = np.tile(quat.IDENTITY, (len(skeleton), 1))
    world_rotation, world_head = skeleton.forward(rotations, np.zeros((len(skeleton), 3)))
    pins = []
    for name in PINNED:
        b = skeleton.index[name]
        target = np.eye(4)
        target[:3, :3] = quat.to_matrix(world_rotation[b])
        target[:3, 3] = world_head[b] + (np.array(lift) if name == "mixamorig:LeftFoot" else 0.0)
        pins.append(Pin(name, target, falloff=0.0))
    result = solve(
        skeleton,
        pins,
        rotations,
        np.zeros((len(skeleton), 3)),
        SolverSettings(iterations=60, tolerance=1e-3, dampening=0.0873, backend=backend),
        limits=limits,
    )
    assert result.converged
    assert result.position_errors.max() < 1e-3
    assert limits.violation(result.rotations)[result.moved].max() <= 1e-6
    knee = skeleton.index["mixamorig:LeftLeg"]
    assert quat.angle(result.rotations[knee]) > 0.5
