"""`fit_limits`: limits fitted to rotations sampled inside known Kusudamas, outliers, mocap, bad input.

Oracles: samples are drawn inside a known region by rejection against that region's own
`JointLimits.violation`; rotations are built with scipy; the area of a region is counted on a
dense Fibonacci sphere (independent of the fitter's own area estimate); membership of the
fitted limits is measured with `JointLimits.violation`, i.e. what the solver enforces.
"""

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from solver import FitError, JointLimits, Kusudama, fit_limits
from solver.fit_limits import DEFAULT_MARGIN, END_RADIUS, END_TWIST, FLOOR_RADIUS
from tests.support.kusudamas import fibonacci_sphere, joint_limits, violations
from tests.support.mocap import MOCAP_DIR, load_bvh

from .conftest import wxyz

INSIDE = 1e-9
N_SAMPLES = 1500


def polar(tilt_deg, azimuth_deg):
    """Direction `tilt` degrees away from +Y (the rest direction), turned `azimuth` about +Y."""
    t, a = math.radians(tilt_deg), math.radians(azimuth_deg)
    return [math.sin(t) * math.cos(a), math.cos(t), math.sin(t) * math.sin(a)]


ONE_CONE = {"cones": [{"direction": polar(30, 40), "radius": math.radians(35)}]}
CURVED_CHAIN = {
    "cones": [
        {"direction": polar(55, az), "radius": math.radians(r)} for az, r in ((0, 18), (60, 12), (120, 20))
    ]
}
WITH_TWIST = {
    "cones": [{"direction": polar(20, 200), "radius": math.radians(40)}],
    "twist": {"min": math.radians(-25), "max": math.radians(60)},
}
CHAIN_WITH_TWIST = {**CURVED_CHAIN, "twist": {"min": math.radians(-40), "max": math.radians(10)}}


def bones(count):
    """A root and `count` children; the fitter reads only names and parents."""
    rest = np.eye(4).tolist()
    return [{"name": "root", "parent": None, "rest": rest, "length": 1.0}] + [
        {"name": f"b{i}", "parent": "root", "rest": rest, "length": 1.0} for i in range(count)
    ]


def area(limits):
    """Solid angle of the allowed swing region, counted on a dense Fibonacci sphere."""
    points = fibonacci_sphere(200_000)
    return 4.0 * math.pi * float(Kusudama.from_dict(limits).allows(points).mean())


def one_bone(limits):
    """The JointLimits of one bone with these scene-document `limits`."""
    return JointLimits({0: Kusudama.from_dict(limits)}, 1)


def rotations_about(directions, twists):
    """Rotations turning +Y onto each direction (shortest arc), after a twist about +Y (scipy)."""
    directions = np.asarray(directions, dtype=float)
    y = np.array([0.0, 1.0, 0.0])
    axis = np.cross(y, directions)
    sin = np.linalg.norm(axis, axis=-1, keepdims=True)
    swing_angle = np.arctan2(sin[:, 0], directions @ y)
    rotvec = axis / np.where(sin > 1e-12, sin, 1.0) * swing_angle[:, None]
    swing = Rotation.from_rotvec(rotvec)
    twist = Rotation.from_rotvec(np.outer(twists, y))
    return wxyz(swing * twist)


def twist_about_centre(rotations, centre):
    """Twist about +Y of each rotation in the frame that turns +Y onto `centre` (scipy).

    This is the twist frame the Kusudama docstring defines; the sign of the quaternion is chosen
    with w >= 0 so that the angle lies in [-pi, pi].
    """
    frame = Rotation.from_rotvec(
        np.cross([0.0, 1.0, 0.0], centre)
        / max(1e-12, np.linalg.norm(np.cross([0.0, 1.0, 0.0], centre)))
        * math.acos(np.clip(centre[1], -1.0, 1.0))
    )
    local = wxyz(frame.inv() * Rotation.from_quat(np.asarray(rotations)[:, [1, 2, 3, 0]]))
    local *= np.where(local[:, :1] < 0.0, -1.0, 1.0)
    return 2.0 * np.arctan2(local[:, 2], local[:, 0])


def sample_inside(limits, count, seed):
    """`count` rotations with swing and twist spread over the region `limits` allows."""
    kusudama = Kusudama.from_dict(limits)
    twist = limits.get("twist", {"min": -math.pi, "max": math.pi})
    rng = np.random.default_rng(seed)
    found = []
    while sum(len(f) for f in found) < count:
        d = rng.normal(size=(20_000, 3))
        d /= np.linalg.norm(d, axis=1, keepdims=True)
        candidates = rotations_about(d, rng.uniform(-math.pi, math.pi, len(d)))
        turn = twist_about_centre(candidates, kusudama.centre)
        found.append(candidates[kusudama.allows(d) & (turn >= twist["min"]) & (turn <= twist["max"])])
    return np.concatenate(found)[:count]


def fit_one(samples, **options):
    """Limits fitted to one bone's rotations (F, 4) under a root; the tight fit (no margin)
    unless `options` give one."""
    rotations = np.stack((np.tile([1.0, 0.0, 0.0, 0.0], (len(samples), 1)), samples), axis=1)
    return fit_limits(bones(1), rotations, **{"margin": 0.0, **options})


@pytest.mark.parametrize(
    "truth",
    [ONE_CONE, CURVED_CHAIN, WITH_TWIST, CHAIN_WITH_TWIST],
    ids=["cone", "chain", "twist", "chain+twist"],
)
@pytest.mark.parametrize("coverage", [0.95, 0.99, 1.0])
def test_fitted_limits_hold_coverage_of_samples_in_a_small_region(truth, coverage):
    samples = sample_inside(truth, N_SAMPLES, seed=7)
    fitted = fit_one(samples, coverage=coverage)
    assert set(fitted) == {"b0"}
    held = violations(one_bone(fitted["b0"]), samples) <= INSIDE
    assert held.mean() >= coverage
    assert area(fitted["b0"]) <= 1.5 * area(truth)


@pytest.mark.parametrize("truth", [WITH_TWIST, CHAIN_WITH_TWIST], ids=["cone", "chain"])
def test_twist_range_is_close_to_the_true_one(truth):
    samples = sample_inside(truth, N_SAMPLES, seed=3)
    twist = fit_one(samples, coverage=1.0)["b0"]["twist"]
    true_width = truth["twist"]["max"] - truth["twist"]["min"]
    assert true_width * 0.9 <= twist["max"] - twist["min"] <= true_width * 1.2


def test_curved_motion_gets_a_chain_of_cones_in_order():
    samples = sample_inside(CURVED_CHAIN, N_SAMPLES, seed=11)
    cones = fit_one(samples, coverage=1.0)["b0"]["cones"]
    assert len(cones) >= 2
    one_cone = fit_one(samples, coverage=1.0, max_cones=1)["b0"]
    assert len(one_cone["cones"]) == 1
    assert area({"cones": cones}) < 0.8 * area(one_cone)
    steps = [
        math.acos(np.clip(np.dot(a["direction"], b["direction"]), -1, 1)) for a, b in zip(cones, cones[1:])
    ]
    span = math.acos(np.clip(np.dot(cones[0]["direction"], cones[-1]["direction"]), -1, 1))
    assert max(steps) < span


def test_outlier_frames_are_dropped_jointly_for_swing_and_twist():
    truth = {
        "cones": [{"direction": polar(10, 0), "radius": math.radians(25)}],
        "twist": {"min": math.radians(-30), "max": math.radians(30)},
    }
    inliers = sample_inside(truth, 980, seed=5)
    rng = np.random.default_rng(1)
    far_swing = rotations_about([polar(150, a) for a in rng.uniform(0, 360, 10)], np.zeros(10))
    far_twist = rotations_about(
        [polar(5, a) for a in rng.uniform(0, 360, 10)], np.full(10, math.radians(150))
    )
    samples = np.concatenate((inliers, far_swing, far_twist))
    fitted = fit_one(samples, coverage=0.98)["b0"]
    outside = violations(one_bone(fitted), samples) > INSIDE
    assert outside[980:].all()
    assert not outside[:980].any()
    assert area(fitted) <= 1.5 * area(truth)
    assert fitted["twist"]["max"] - fitted["twist"]["min"] <= math.radians(70)


def arm_and_hand_bones():
    """root -> b0 -> b1 -> b2 (a collar and a shoulder the clip holds still, the arm they carry)
    and root -> b3 (a hand: still, and no bone below it)."""
    rest = np.eye(4).tolist()
    parents = {"b0": "root", "b1": "b0", "b2": "b1", "b3": "root"}
    return [{"name": "root", "parent": None, "rest": rest, "length": 1.0}] + [
        {"name": name, "parent": parent, "rest": rest, "length": 1.0} for name, parent in parents.items()
    ]


def turned_about_z(pose, angle):
    return wxyz(Rotation.from_rotvec([0.0, 0.0, angle]) * Rotation.from_quat(np.roll(pose, -1)))


def test_roots_get_no_limits_and_bones_the_clip_never_turns_keep_only_the_floor_around_their_pose():
    frames = 200
    rng = np.random.default_rng(2)
    root = wxyz(Rotation.from_rotvec(rng.normal(size=(frames, 3))))
    at_rest = np.tile([1.0, 0.0, 0.0, 0.0], (frames, 1))
    held = np.tile(wxyz(Rotation.from_rotvec([0.3, 0.2, -0.5])), (frames, 1))
    swinging = wxyz(Rotation.from_rotvec(rng.normal(size=(frames, 3)) * 0.4))
    nudged = wxyz(Rotation.from_rotvec(rng.normal(size=(frames, 3)) * math.radians(0.2)))
    fitted = fit_limits(arm_and_hand_bones(), np.stack((root, at_rest, held, swinging, nudged), axis=1))
    assert set(fitted) == {"b0", "b1", "b2", "b3"}
    room = FLOOR_RADIUS
    for name, pose in (("b0", at_rest[0]), ("b1", held[0])):
        near, far = turned_about_z(pose, 0.8 * room), turned_about_z(pose, 3.0 * room)
        assert violations(one_bone(fitted[name]), np.array([pose, near])).max() <= INSIDE
        assert violations(one_bone(fitted[name]), far[None])[0] > 0.0
    hand = fitted["b3"]
    assert all(c["radius"] >= END_RADIUS for c in hand["cones"])
    assert hand["twist"]["max"] - hand["twist"]["min"] >= END_TWIST - 1e-12
    near, far = turned_about_z(at_rest[0], 0.9 * END_RADIUS), turned_about_z(at_rest[0], 1.2 * END_RADIUS)
    assert violations(one_bone(hand), np.array([at_rest[0], near])).max() <= INSIDE
    assert violations(one_bone(hand), far[None])[0] > 0.0
    assert (violations(one_bone(hand), nudged) <= INSIDE).mean() >= 0.99


def test_a_clip_in_which_nothing_turns_gets_no_limits():
    held = np.tile(wxyz(Rotation.from_rotvec([0.3, 0.2, -0.5])), (50, 3, 1))
    held[:, 0] = wxyz(Rotation.from_rotvec(np.outer(np.linspace(0.0, 1.0, 50), [0.0, 1.0, 0.0])))
    assert fit_limits(bones(2), held) == {}


def bent(angles_deg, off_plane_deg=0.0):
    """An elbow's rotations: a bend of each angle about +X (the forearm swings from +Y toward +Z),
    then a turn of `off_plane_deg` about +Z (out of the bending plane)."""
    bend = Rotation.from_rotvec(np.outer(np.radians(angles_deg), [1.0, 0.0, 0.0]))
    return wxyz(Rotation.from_rotvec([0.0, 0.0, math.radians(off_plane_deg)]) * bend)


def test_one_axis_motion_gets_a_thin_band_from_the_straight_limb_that_bends_only_its_way():
    rng = np.random.default_rng(6)
    fitted = fit_one(bent(rng.uniform(25.0, 120.0, 400)), margin=DEFAULT_MARGIN)["b0"]
    assert len(fitted["cones"]) == 2
    assert violations(one_bone(fitted), bent(np.arange(0.0, 121.0, 5.0))).max() <= INSIDE
    assert violations(one_bone(fitted), bent([-12.0, -25.0, 150.0])).min() > 0.0
    assert violations(one_bone(fitted), bent([10.0, 60.0, 110.0], off_plane_deg=12.0)).min() > 0.0
    radius = max(c["radius"] for c in fitted["cones"])
    assert radius <= math.radians(6.0)
    length = math.acos(np.dot(fitted["cones"][0]["direction"], fitted["cones"][1]["direction"]))
    band = 2.0 * length * math.sin(radius) + 2.0 * math.pi * (1.0 - math.cos(radius))
    assert area(fitted) <= 1.05 * band


@pytest.mark.parametrize("truth", [ONE_CONE, CHAIN_WITH_TWIST], ids=["cone", "chain+twist"])
def test_the_margin_holds_motion_the_clip_did_not_show(truth):
    seen = sample_inside(truth, 80, seed=12)
    unseen = sample_inside(truth, N_SAMPLES, seed=13)
    tight = (violations(one_bone(fit_one(seen, margin=0.0)["b0"]), unseen) <= INSIDE).mean()
    fitted = fit_one(seen, margin=DEFAULT_MARGIN)["b0"]
    assert (violations(one_bone(fitted), unseen) <= INSIDE).mean() >= max(0.98, tight + 0.05)
    assert area(fitted) <= 2.5 * area(truth)


def test_free_twist_gets_no_twist_limit():
    samples = sample_inside(ONE_CONE, N_SAMPLES, seed=9)
    assert "twist" not in fit_one(samples, coverage=1.0)["b0"]


def test_same_input_gives_the_same_limits():
    samples = sample_inside(CURVED_CHAIN, 600, seed=4)
    assert fit_one(samples) == fit_one(samples)


@pytest.mark.parametrize("fitted_name, other_name", [("131_01", "131_03"), ("131_03", "131_01")])
def test_limits_fitted_on_a_clip_hold_its_frames_and_most_of_another_clip(fitted_name, other_name, capsys):
    fitted_on = load_bvh(MOCAP_DIR / f"cmu_{fitted_name}.bvh")
    other = load_bvh(MOCAP_DIR / f"cmu_{other_name}.bvh")
    assert other.names == fitted_on.names

    def held(limits, rotations):
        joint = joint_limits(fitted_on.names, limits)
        inside = np.array([joint.violation(q) <= INSIDE for q in rotations])
        return inside[:, np.flatnonzero(joint.limited)].mean(0)

    limits = fit_limits(fitted_on.bones, fitted_on.rotations, coverage=0.99)
    assert len(limits) == len(fitted_on.names) - 1
    assert held(limits, fitted_on.rotations).min() >= 0.99
    other_held = held(limits, other.rotations)
    tight_held = held(fit_limits(fitted_on.bones, fitted_on.rotations, margin=0.0), other.rotations)
    assert other_held.min() >= 0.9
    assert other_held.mean() > tight_held.mean()
    with capsys.disabled():
        print(
            f"\nlimits fitted on {fitted_name} hold of {other_name}: worst bone {other_held.min():.3f} "
            f"(no margin {tight_held.min():.3f}), mean {other_held.mean():.3f} ({tight_held.mean():.3f})"
        )


GOOD_ROTATIONS = np.tile([1.0, 0.0, 0.0, 0.0], (10, 2, 1))


@pytest.mark.parametrize(
    "arguments, field",
    [
        ((bones(1), np.ones((10, 2))), "rotations"),
        ((bones(1), np.ones((10, 3, 4))), "rotations"),
        ((bones(1), np.ones((10, 2, 3))), "rotations"),
        ((bones(1), np.ones((0, 2, 4))), "rotations"),
        ((bones(1), np.where(np.arange(4) == 2, np.nan, GOOD_ROTATIONS)), "rotations"),
        ((bones(1), np.zeros((10, 2, 4))), "rotations"),
        ((bones(1), [["a"]]), "rotations"),
        (([], GOOD_ROTATIONS), "bones"),
        (([{"parent": None}, {"name": "x"}], GOOD_ROTATIONS), "bones[0]"),
        ((bones(1), GOOD_ROTATIONS, 0.0), "coverage"),
        ((bones(1), GOOD_ROTATIONS, 1.5), "coverage"),
        ((bones(1), GOOD_ROTATIONS, float("nan")), "coverage"),
        ((bones(1), GOOD_ROTATIONS, 0.9, 0), "max_cones"),
        ((bones(1), GOOD_ROTATIONS, 0.9, 2.5), "max_cones"),
        ((bones(1), GOOD_ROTATIONS, 0.9, 4, -0.1), "margin"),
        ((bones(1), GOOD_ROTATIONS, 0.9, 4, 1.5), "margin"),
        ((bones(1), GOOD_ROTATIONS, 0.9, 4, "wide"), "margin"),
    ],
)
def test_bad_input_raises_a_fit_error_naming_the_field(arguments, field):
    with pytest.raises(FitError) as caught:
        fit_limits(*arguments)
    assert isinstance(caught.value, ValueError)
    assert caught.value.field == field
