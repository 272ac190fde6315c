"""The mirror's rules of ewbik_addon/limits/mirror_maths.py without Blender: names behind a
namespace, and limits carried through a mirror allow exactly the mirror images of the rotations
they allowed (measured by the solver's own `JointLimits.violation`)."""

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from ewbik_addon.limits.mirror_maths import mirror_name, mirrored_limits
from solver.kusudama import JointLimits, Kusudama
from tests.support.kusudamas import violations


def unit(*v):
    return tuple(float(x) for x in np.array(v) / np.linalg.norm(v))


LIMITS = {
    "cones": [
        {"direction": unit(0.3, 0.9, 0.2), "radius": math.radians(35.0)},
        {"direction": unit(0.9, 0.1, -0.4), "radius": math.radians(20.0)},
    ],
    "twist": {"min": math.radians(-25.0), "max": math.radians(60.0)},
    "comfort": 0.4,
}
FLIP_X = np.diag([-1.0, 1.0, 1.0])


def sides(name):
    """A stand-in for Blender's flip rule: Left <-> Right, everything else kept."""
    return name.replace("Left", "\0").replace("Right", "Left").replace("\0", "Right")


@pytest.mark.parametrize(
    "name, other",
    [
        ("LeftArm", "RightArm"),
        ("mixamorig:LeftArm", "mixamorig:RightArm"),
        ("rig:mixamorig:RightHand", "rig:mixamorig:LeftHand"),
        ("Left:Spine", "Left:Spine"),
        ("Spine", "Spine"),
    ],
)
def test_only_the_name_after_the_namespace_is_flipped(name, other):
    assert mirror_name(name, sides) == other


def test_the_twist_is_reversed_and_radii_and_comfort_kept():
    mirrored = mirrored_limits(LIMITS, lambda d: tuple(FLIP_X @ d))
    assert mirrored["twist"] == {"min": -LIMITS["twist"]["max"], "max": -LIMITS["twist"]["min"]}
    assert [c["radius"] for c in mirrored["cones"]] == [c["radius"] for c in LIMITS["cones"]]
    assert [c["direction"] for c in mirrored["cones"]] == [
        (-x, y, z) for x, y, z in (c["direction"] for c in LIMITS["cones"])
    ]
    assert mirrored["comfort"] == LIMITS["comfort"]
    assert mirrored_limits(mirrored, lambda d: tuple(FLIP_X @ d)) == LIMITS


def test_what_a_limit_leaves_out_stays_out():
    assert mirrored_limits({"cones": []}, lambda d: d) == {"cones": []}
    assert mirrored_limits({}, lambda d: d) == {"cones": []}


@pytest.mark.parametrize("seed", range(3))
def test_mirrored_limits_allow_exactly_the_mirrored_rotations(seed):
    """A source bone's rest frame turned at random, its partner's the mirror image rolled by a
    random angle about its own Y; the carry is R_partner^T S R_source, and a local rotation R of
    the source mirrors to carry R carry^T on the partner."""
    rng = np.random.default_rng(seed)
    source = Rotation.random(random_state=rng).as_matrix()
    roll = Rotation.from_rotvec([0.0, rng.uniform(-math.pi, math.pi), 0.0]).as_matrix()
    partner = FLIP_X @ source @ FLIP_X @ roll
    carry = partner.T @ FLIP_X @ source

    def along(direction):
        carried = carry @ np.asarray(direction, dtype=float)
        return tuple(carried / np.linalg.norm(carried))

    before = JointLimits({0: Kusudama.from_dict(LIMITS)}, 1)
    after = JointLimits({0: Kusudama.from_dict(mirrored_limits(LIMITS, along))}, 1)
    rotations = Rotation.random(400, random_state=rng)
    mirrored = Rotation.from_matrix(carry @ rotations.as_matrix() @ carry.T)
    wxyz = [3, 0, 1, 2]
    outside = violations(before, rotations.as_quat()[:, wxyz])
    np.testing.assert_allclose(violations(after, mirrored.as_quat()[:, wxyz]), outside, atol=1e-9)
    assert 0.02 < np.mean(outside == 0.0) < 0.98, "the samples fall on both sides"
