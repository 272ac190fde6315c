"""Pins win over limits, in Blender: a hand target only a bend past the elbow's limit reaches is
reached, the forearm shows beyond its limits (red in the overlay) and the status names it with
the angle; with Strict Limits the limit holds and the hand stops short."""

import math

import bpy
import pytest
from mathutils import Vector

from tests.support.blender_helpers import addon_module, build_armature, pin, update
from tests.support.limit_rigs import set_cones

Y = (0.0, 1.0, 0.0)
CONE_DEG = 30.0
TARGET = Vector((0.35, 0.25, 1.4))  # 0.29 m from the shoulder: the elbow must bend 117 degrees


def arm():
    """A fixed root, an arm (0.3 m upper arm, 0.25 m forearm) and a hand; the forearm may swing
    30 degrees from straight."""
    obj = build_armature(
        "arm",
        [
            ("root", None, (0.0, 0.0, 1.0), (0.0, 0.0, 1.1), 0.0),
            ("upper", "root", (0.2, 0.0, 1.4), (0.5, 0.0, 1.4), 0.0),
            ("fore", "upper", (0.5, 0.0, 1.4), (0.75, 0.0, 1.4), 0.0),
            ("hand", "fore", (0.75, 0.0, 1.4), (0.85, 0.0, 1.4), 0.0),
        ],
        connect_touching=True,
    )
    obj.pose.bones["root"].ewbik.stiffness = 1.0
    set_cones(obj.pose.bones["fore"], (Y, math.radians(CONE_DEG)))
    obj.ewbik.live = False
    return obj


def bend_needed_deg():
    reach = (TARGET - Vector((0.2, 0.0, 1.4))).length
    return 180.0 - math.degrees(math.acos((0.3**2 + 0.25**2 - reach**2) / (2 * 0.3 * 0.25)))


def hand_miss(obj, target):
    update()
    return ((obj.matrix_world @ obj.pose.bones["hand"].head) - target.matrix_world.translation).length


@pytest.mark.parametrize("strict", [False, True], ids=["pins-win", "strict-limits"])
def test_a_hand_only_a_bend_past_the_elbow_limit_reaches(strict):
    obj = arm()
    target = pin(obj, "hand")["hand"]
    target.location = TARGET
    obj.ewbik.strict_limits = strict
    assert bpy.ops.ewbik.solve() == {"FINISHED"}
    beyond = addon_module("ewbik_addon.limits.limit_status").limit_status(obj).beyond
    if strict:
        assert hand_miss(obj, target) > 0.01
        assert beyond == () and "beyond its limits" not in obj.ewbik.status
        return
    assert hand_miss(obj, target) < 1e-4
    assert beyond == ("fore",)
    over = round(bend_needed_deg() - CONE_DEG)
    assert f"1 pin reached; fore {over}° beyond its limits" in obj.ewbik.status
