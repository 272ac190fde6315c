"""ewbik_addon/solve/solve_now.py: one full solve, its summary stored as the armature's status,
and what the user must fix stored as an error (a deleted target: test_pin.py, through Solve)."""

import math

import bpy
import pytest
from mathutils import Vector

from tests.support.blender_helpers import addon_module, distance_to_target, pin, update


@pytest.fixture
def solve_now():
    return addon_module("ewbik_addon.solve.solve_now")


def test_the_summary_says_how_the_solve_went_and_becomes_the_status(metarig, solve_now):
    metarig.ewbik.live = False
    targets = pin(metarig, "hand.L", "foot.R")
    targets["hand.L"].location += Vector((0.05, -0.1, 0.1))
    update()  # Blender places the target; live solving is off
    done = solve_now.solve_now(bpy.context, metarig)
    assert done.summary.startswith("converged after ") and " ms: " in done.summary
    assert "hand.L " in done.summary and "foot.R " in done.summary
    assert not done.elsewhere
    assert metarig.ewbik.status == done.summary and not metarig.ewbik.status_is_error
    assert distance_to_target(metarig, "hand.L") < 1e-3  # Blender evaluated the written pose


def test_what_the_user_must_fix_is_raised_and_stored_as_an_error(metarig, solve_now):
    pin(metarig, "hand.L")
    metarig.ewbik.influence = math.nan
    with pytest.raises(addon_module("ewbik_addon.com.armature_checks").RigError) as error:
        solve_now.solve_now(bpy.context, metarig)
    assert "influence" in str(error.value) and error.value.field == "influence"
    assert metarig.ewbik.status == str(error.value) and metarig.ewbik.status_is_error
