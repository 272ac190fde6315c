"""Balance: the centre of mass kept over the pinned feet while a hand reaches, pins exact.

The standing test rig (metres, -Y forward, Z up) has its feet pinned (planted: a priority above
the hand's) and the right hand swept forward and down to below the hips, as an animator drags
it; the centre of mass and the support polygon are measured with the module's own functions,
which the tests of the polygon check against hand-made shapes.
"""

import types

import numpy as np
import pytest

from solver import SceneError, native, quat
from solver.balance import (
    MARGIN,
    SEGMENT_MASS,
    SETTLED,
    Body,
    body_of,
    bone_masses,
    following_share,
    pose_centre_of_mass,
    support_of,
)
from solver.balance import _balance_state as balance_state
from solver.balance import _ground_inputs as ground_inputs
from solver.balance import _Reach as Reach
from solver.pins import Pin
from solver.presets import bone_roles
from solver.settings import SolverSettings
from solver.skeleton import Skeleton
from solver.solve import solve
from tests.support.tpose_rig import standing_character

HAND = "mixamorig:RightHand"
FEET = ("mixamorig:LeftFoot", "mixamorig:RightFoot")
REACH_END = np.array([-0.2, -0.7, 0.5])  # forward and down, below the hips
FRAMES = 11


def sweep_frame(skeleton, share):
    """The pins of a frame `share` (0..1) of the way of the right hand to REACH_END."""
    rest = np.tile(quat.IDENTITY, (len(skeleton), 1)), np.zeros((len(skeleton), 3))
    rotations, heads = skeleton.forward(*rest)
    pins = []
    for name in (*FEET, HAND):
        b = skeleton.index[name]
        target = np.eye(4)
        target[:3, :3] = quat.to_matrix(rotations[b])
        target[:3, 3] = heads[b] + (share * (REACH_END - heads[b]) if name == HAND else 0.0)
        if name == HAND:
            pins.append(Pin(name, target, orientation_weights=(0.0, 0.0, 0.0)))
        else:
            pins.append(Pin(name, target, priority=1.0))
    return pins


def swept(balance, frames=FRAMES):
    """(share of frames with the centre of mass over the feet, largest pin miss, poses)."""
    skeleton, limits = standing_character()
    body = body_of(skeleton, bone_roles(skeleton.names))
    rotations, locations = np.tile(quat.IDENTITY, (len(skeleton), 1)), np.zeros((len(skeleton), 3))
    settings = SolverSettings(translate_root=True, balance=balance)
    inside, misses, poses = 0, [], []
    for frame in range(frames):
        pins = sweep_frame(skeleton, frame / (frames - 1))
        result = solve(skeleton, pins, rotations, locations, settings, limits, body=body)
        com = pose_centre_of_mass(skeleton, body, result.rotations, result.locations)
        inside += support_of(pins, body, skeleton.unit).depth(com) >= 0.0
        misses.append(result.position_errors.max())
        poses.append((result.rotations, result.locations))
    return inside / frames, max(misses), poses


def test_the_centre_of_mass_stays_over_the_feet_and_the_pins_hold():
    off, _, _ = swept(False)
    on, miss, poses = swept(True)
    assert off < 0.8  # the hand's reach tips the body over its toes
    assert on >= 0.95
    assert miss <= 1e-5  # 0.01 mm: the pins are met as exactly as without balance
    skeleton, _ = standing_character()
    hips = skeleton.forward(*poses[-1])[1][skeleton.index["mixamorig:Hips"]]
    assert hips[1] > 0.02  # the hips went back (+Y), away from the reaching hand


def test_the_balanced_pose_is_a_function_of_the_targets():
    skeleton, limits = standing_character()
    body = body_of(skeleton, bone_roles(skeleton.names))
    rest = np.tile(quat.IDENTITY, (len(skeleton), 1)), np.zeros((len(skeleton), 3))
    settings = SolverSettings(translate_root=True, balance=True)
    late = sweep_frame(skeleton, 0.9)
    first = solve(skeleton, late, *rest, settings, limits, body=body)
    solve(skeleton, sweep_frame(skeleton, 0.4), *rest, settings, limits, body=body)
    again = solve(skeleton, late, *rest, settings, limits, body=body)
    assert np.array_equal(first.rotations, again.rotations)
    assert np.array_equal(first.locations, again.locations)


def test_a_part_of_the_body_carries_the_rest_where_the_pose_holds_it():
    skeleton, _ = standing_character()
    body = body_of(skeleton, bone_roles(skeleton.names))
    rng = np.random.default_rng(3)
    rotations = quat.normalize(
        np.tile(quat.IDENTITY, (len(skeleton), 1)) + rng.normal(0, 0.1, (len(skeleton), 4))
    )
    locations = np.zeros((len(skeleton), 3))
    chain = [b for b in range(len(skeleton)) if not skeleton.names[b].endswith(("Arm", "ForeArm", "Hand"))]
    chain = [b for b in chain if all(a in chain for a in skeleton.ancestors(b))]
    part = Skeleton(
        [skeleton.names[b] for b in chain],
        [skeleton.names[skeleton.parents[b]] if skeleton.parents[b] >= 0 else None for b in chain],
        skeleton.rest[chain],
        skeleton.lengths[chain],
    )
    carried = body.within(skeleton, part, rotations, locations)
    whole = pose_centre_of_mass(skeleton, body, rotations, locations)
    assert pose_centre_of_mass(part, carried, rotations[chain], locations[chain]) == pytest.approx(whole)


def test_the_rounds_take_the_centre_of_mass_well_inside():
    """The rounds end with the centre of mass at least SETTLED inside the polygon, not on its
    edge."""
    skeleton, limits = standing_character()
    body = body_of(skeleton, bone_roles(skeleton.names))
    rest = np.tile(quat.IDENTITY, (len(skeleton), 1)), np.zeros((len(skeleton), 3))
    pins = sweep_frame(skeleton, 1.0)
    settings = SolverSettings(translate_root=True, balance=True)
    result = solve(skeleton, pins, *rest, settings, limits, body=body)
    com = pose_centre_of_mass(skeleton, body, result.rotations, result.locations)
    assert support_of(pins, body, skeleton.unit).depth(com) >= SETTLED * skeleton.unit


def test_no_round_moves_a_centre_of_mass_already_settled_inside():
    """A reach that leaves the centre of mass SETTLED inside the polygon (but short of the
    MARGIN the rounds aim at) is solved as without balance; one that leaves it less inside is
    taken on to SETTLED."""
    skeleton, limits = standing_character()
    body = body_of(skeleton, bone_roles(skeleton.names))
    rest = np.tile(quat.IDENTITY, (len(skeleton), 1)), np.zeros((len(skeleton), 3))
    for share, rounds in ((0.63, False), (0.66, True)):
        pins = sweep_frame(skeleton, share)
        support = support_of(pins, body, skeleton.unit)
        plain, on = (
            solve(skeleton, pins, *rest, SolverSettings(translate_root=True, balance=b), limits, body=body)
            for b in (False, True)
        )
        before = support.depth(pose_centre_of_mass(skeleton, body, plain.rotations, plain.locations))
        after = support.depth(pose_centre_of_mass(skeleton, body, on.rotations, on.locations))
        assert (0.0 < before < SETTLED * skeleton.unit) == rounds
        assert (before < MARGIN * skeleton.unit) and after >= SETTLED * skeleton.unit
        assert np.array_equal(on.rotations, plain.rotations) != rounds


def test_the_share_that_follows_the_root_falls_along_a_pinned_chain():
    """A straight chain of three bones of one metre pinned at its third bone's head (2 m from
    the root's): the root's middle follows 3/4 of its shift, the second bone's 1/4, the pinned
    bone none; a free bone on the root's tail follows as the root's tail does (1/2)."""
    rest = [np.eye(4) for _ in range(4)]
    for bone, height in enumerate((0.0, 1.0, 2.0, 1.0)):
        rest[bone][2, 3] = height
        rest[bone][:3, :3] = [[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]]  # +Y up
    skeleton = Skeleton(["root", "mid", "end", "free"], [None, "root", "mid", "root"], rest, [1.0] * 4)
    body = Body(np.ones(4), {})
    share = body.following_share(skeleton, ("end",), 0)
    assert share == pytest.approx((0.75 + 0.25 + 0.0 + 0.5) / 4)
    assert following_share(skeleton, [2], body, 0) == share


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
    assert one_foot.depth(one_foot.corners.mean(0)) > 0.0  # a foot has a breadth: one has an inside


@pytest.mark.compares_backends
def test_the_compiled_geometry_matches_its_python_twin(monkeypatch):
    """What balance asks of a pose (the support polygon, the centre of mass, its depth and shift
    in the polygon) comes out of the compiled library's one call (where it is built) as out of
    the Python that runs where it is not: feet turned and lifted at random, random poses moved
    so that the centre of mass lies inside the polygon and outside it."""
    if not native.available():
        pytest.skip("the compiled loop is not built (test_native.py::test_the_native_loop_is_built fails)")
    skeleton, _ = standing_character()
    roles = bone_roles(skeleton.names)
    rng = np.random.default_rng(11)
    cases = []
    for _ in range(40):
        pins = [
            Pin(
                p.bone,
                quat.rigid_matrices(
                    quat.multiply(quat.normalize(rng.normal([1, 0, 0, 0], 0.2)), p.target_rotation)[None],
                    p.target_position[None] + rng.normal(0.0, 0.05, 3),
                )[0],
            )
            if p.bone in FEET
            else p
            for p in sweep_frame(skeleton, rng.uniform())
        ]
        rotations = quat.normalize(
            np.tile(quat.IDENTITY, (len(skeleton), 1)) + rng.normal(0.0, 0.2, (len(skeleton), 4))
        )
        locations = rng.normal(0.0, 0.01, (len(skeleton), 3))
        body = body_of(skeleton, roles)
        to_middle = support_of(pins, body, skeleton.unit).corners.mean(0) - pose_centre_of_mass(
            skeleton, body, rotations, locations
        )
        cases.append((pins, rotations, locations, to_middle + rng.normal(0.0, 0.15, (6, 3))))

    def measured():
        out = []
        for pins, rotations, locations, shifts in cases:
            body = body_of(skeleton, roles)
            ground = ground_inputs(pins, body, body.pinned_feet(pins))
            for shift in shifts:
                moved = locations.copy()
                moved[0] += shift @ skeleton.rest[0, :3, :3]  # the root's: the whole body moves
                pose = types.SimpleNamespace(rotations=rotations, locations=moved)
                state = balance_state(skeleton, body, body.centres_in(skeleton), pins, ground, pose, 0)
                out.append((state, pose_centre_of_mass(skeleton, body, rotations, moved)))
        return out

    compiled = measured()
    monkeypatch.setattr(native, "_LIBRARY", None)
    for (state, com), (state_py, _) in zip(compiled, measured()):
        np.testing.assert_allclose(state[0], com, atol=1e-12)
        for found, found_py in zip(state, state_py):
            np.testing.assert_allclose(found, found_py, atol=1e-9)
    depths = np.array([state[2] for state, _ in compiled])
    assert (depths > 0.0).sum() >= 20 and (depths < 0.0).sum() >= 20


def test_a_bad_body_is_refused_naming_the_field():
    with pytest.raises(SceneError, match="body.masses"):
        Body(np.array([-1.0, 2.0]), {})
    with pytest.raises(SceneError, match="body.up"):
        Body(np.ones(2), {}, np.zeros(3))


def test_a_frozen_root_stays_put():
    """A root of stiffness 1 does not move, so balance leaves the plain answer."""
    skeleton, limits = standing_character()
    body = body_of(skeleton, bone_roles(skeleton.names))
    rest = np.tile(quat.IDENTITY, (len(skeleton), 1)), np.zeros((len(skeleton), 3))
    stiffness = np.zeros(len(skeleton))
    stiffness[skeleton.index["mixamorig:Hips"]] = 1.0
    pins = sweep_frame(skeleton, 1.0)
    plain, on = (
        solve(
            skeleton,
            pins,
            *rest,
            SolverSettings(translate_root=True, balance=b),
            limits,
            stiffness,
            body=body,
        )
        for b in (False, True)
    )
    assert np.array_equal(plain.locations, on.locations)
    assert np.array_equal(plain.rotations, on.rotations)


def test_a_round_never_takes_the_root_beyond_a_pins_reach():
    """The shift is shortened so every pin the root could reach it still reaches (a round that
    misses a pin is dropped, and halving it costs a further solve); a pin already out of reach
    does not hold the root back."""
    reach = Reach(np.array([1.0, 1.0, 0.5]), np.array([[0.0, 0.0, -0.9], [0.5, 0.0, 0.0], [3.0, 0.0, 0.0]]))
    head = np.zeros(3)
    for step in (np.array([0.0, 0.6, 0.0]), np.array([-0.8, 0.0, 0.0]), np.array([0.0, 0.01, 0.0])):
        kept = reach.within(head, step)
        assert np.allclose(np.cross(kept, step), 0.0) and kept @ step >= 0.0
        assert np.linalg.norm(kept) <= np.linalg.norm(step) + 1e-15
        distances = np.linalg.norm(head + kept - reach.targets, axis=1)
        assert (distances[:2] <= reach.lengths[:2]).all()
    small = np.array([0.0, 0.01, 0.0])
    np.testing.assert_array_equal(reach.within(head, small), small)  # well within: untouched
    far = reach.within(head, np.array([0.0, 0.6, 0.0]))
    assert 0.4 < np.linalg.norm(far) < 0.44  # the first pin's reach: sqrt(1 - 0.81) = 0.436
