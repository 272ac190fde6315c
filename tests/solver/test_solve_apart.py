"""A crowd (armatures side by side in one skeleton) solves each armature as it would be solved
alone: its pose does not depend on the others' targets, on both loops."""

import numpy as np

from solver import Pin, Skeleton, SolverSettings, solve
from tests.solver.conftest import POSITION_ONLY, translation
from tests.support.upper_body import SKELETON, STIFFNESS

SETTINGS = SolverSettings(iterations=200, tolerance=1e-7)
REACHED = {"hand.L": (0.45, 0.35, 1.2), "hand.R": (-0.55, 0.25, 1.35), "head": (0.03, 0.05, 1.59)}
PULLED_APART = {"hand.L": (2.5, 0.5, 1.4), "hand.R": (-0.3, -0.4, 0.9), "head": (0.1, 0.0, 1.55)}


def crowd(count):
    """`count` copies of the upper body, bones named `k/name`, on top of each other."""
    names = [f"{k}/{name}" for k in range(count) for name in SKELETON.names]
    parents = [None if p < 0 else f"{k}/{SKELETON.names[p]}" for k in range(count) for p in SKELETON.parents]
    return Skeleton(names, parents, np.tile(SKELETON.rest, (count, 1, 1)), np.tile(SKELETON.lengths, count))


def pins(targets, prefix=""):
    return [
        Pin(prefix + bone, translation(point), orientation_weights=POSITION_ONLY)
        for bone, point in targets.items()
    ]


def rest(skeleton):
    return np.tile([1.0, 0.0, 0.0, 0.0], (len(skeleton), 1)), np.zeros((len(skeleton), 3))


def alone(targets):
    return solve(SKELETON, pins(targets), *rest(SKELETON), SETTINGS, stiffness=STIFFNESS)


def test_each_armature_of_a_crowd_gets_the_pose_it_gets_alone():
    together = crowd(3)
    problems = (REACHED, PULLED_APART, REACHED)
    crowd_pins = [pin for k, targets in enumerate(problems) for pin in pins(targets, f"{k}/")]
    stiffness = np.tile(STIFFNESS, 3)
    result = solve(together, crowd_pins, *rest(together), SETTINGS, stiffness=stiffness)
    for k, targets in enumerate(problems):
        own = alone(targets)
        rows = [together.index[f"{k}/{name}"] for name in SKELETON.names]
        np.testing.assert_allclose(result.rotations[rows], own.rotations, atol=1e-12, err_msg=str(k))
        members = slice(3 * k, 3 * k + 3)
        np.testing.assert_allclose(result.position_errors[members], own.position_errors, atol=1e-12)
        assert np.array_equal(result.yielded[members], own.yielded)
        assert np.array_equal(result.beyond_reach[members], own.beyond_reach)
    assert result.yielded[3:6].any() and not result.yielded[:3].any()
    assert not result.converged


def test_a_crowd_of_forty_plans_each_armature_once_and_keeps_the_plans():
    """Every armature of a crowd asks for plans of its own (the carried start, the stages, the
    solve); a crowd of forty drags on with the plans its first solve made instead of making them
    again (each costs a walk over every bone of the crowd)."""
    together = crowd(40)
    stiffness = np.tile(STIFFNESS, 40)

    def drag(shift):
        targets = {bone: np.add(point, (shift, 0.0, 0.0)) for bone, point in REACHED.items()}
        crowd_pins = [pin for k in range(40) for pin in pins(targets, f"{k}/")]
        return solve(together, crowd_pins, *rest(together), SETTINGS, stiffness=stiffness)

    plans = together.normalized().plan_cache
    drag(0.0)
    made = {key: id(plan) for key, plan in plans.items()}
    assert len(made) >= 40
    drag(0.01)
    assert {key: id(plan) for key, plan in plans.items()} == made
