"""ewbik_addon/rigs/balance_body.py: the ground's normal in the armature's space, whatever way the
armature object is turned."""

import math

import bpy
import numpy as np
import pytest

from tests.support.blender_helpers import addon_module


@pytest.fixture
def balance_body():
    return addon_module("ewbik_addon.rigs.balance_body")


@pytest.mark.parametrize(
    "turn, up",
    [
        ((0.0, 0.0, 0.0), (0.0, 0.0, 1.0)),
        ((math.pi / 2, 0.0, 0.0), (0.0, 1.0, 0.0)),  # an FBX rig standing along its own +Y
        ((0.0, 0.0, 1.0), (0.0, 0.0, 1.0)),  # turning about the vertical keeps up
    ],
)
def test_up_is_world_z_seen_from_the_armature(metarig, balance_body, turn, up):
    metarig.rotation_euler = turn
    metarig.scale = (0.01, 0.01, 0.01)
    bpy.context.view_layer.update()
    got = balance_body.up_in_armature(metarig)
    assert np.linalg.norm(got) == pytest.approx(1.0)
    np.testing.assert_allclose(got, up, atol=1e-6)
