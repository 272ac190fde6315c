"""The controls' forward kinematics (`solver.frames`) against the skeleton's own pass."""

import numpy as np

from solver import quat
from solver.frames import chain_frames, pose_frames
from tests.solver.test_straight_limb import standing_character


def test_the_controls_frames_match_the_skeleton_forward_pass():
    """Pointer jumping over the whole pose and prefix products along a chain give
    `Skeleton.forward_into`'s frames and heads, locations included."""
    skeleton, _ = standing_character()
    rng = np.random.default_rng(3)
    rotations = quat.normalize(rng.normal(size=(len(skeleton), 4)))
    locations = rng.normal(scale=0.05, size=(len(skeleton), 3))
    world, heads = np.empty((len(skeleton), 3, 3)), np.empty((len(skeleton), 3))
    skeleton.forward_into(rotations, locations, world, heads)
    frames, points = pose_frames(skeleton, rotations, locations)
    np.testing.assert_allclose(frames, world, atol=1e-12)
    np.testing.assert_allclose(points, heads, atol=1e-12)
    deepest = max(range(len(skeleton)), key=lambda bone: len(skeleton.ancestors(bone)))
    chain = np.array(skeleton.ancestors(deepest)[::-1])
    assert len(chain) > 4
    frames, points = chain_frames(skeleton, rotations, locations, chain)
    np.testing.assert_allclose(frames, world[chain], atol=1e-12)
    np.testing.assert_allclose(points, heads[chain], atol=1e-12)
