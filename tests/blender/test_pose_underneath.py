"""ewbik_addon/bridge/pose_underneath.py: which channels are the pose underneath (set by anyone
but the solver) and which still hold the solver's write, kept on the rig and on the object."""

import types

import numpy as np
import pytest

from tests.support.blender_helpers import addon_module

NAMES = ("a", "b", "c")


@pytest.fixture
def underneath():
    return addon_module("ewbik_addon.bridge.pose_underneath")


def fresh_rig():
    return types.SimpleNamespace(
        names=list(NAMES), index={n: i for i, n in enumerate(NAMES)}, underneath=None, written=None
    )


def pose(*turns):
    """Rotations about X by these angles, locations zero."""
    rotations = np.array([[np.cos(t / 2), np.sin(t / 2), 0.0, 0.0] for t in turns])
    return rotations, np.zeros((len(turns), 3))


def test_channels_the_solver_wrote_keep_the_pose_underneath_and_changed_ones_become_it(metarig, underneath):
    rig = fresh_rig()
    underneath.track(metarig, rig, *pose(0.0, 0.0, 0.0))
    solved = pose(0.3, 0.4, 0.0)
    underneath.remember(metarig, rig, *solved)
    assert np.allclose(underneath.start_pose(rig)[0], pose(0.0, 0.0, 0.0)[0])
    keyed = pose(0.3, 0.9, 0.0)  # "b" set by the animation, "a" still the solver's write
    underneath.track(metarig, rig, *keyed)
    np.testing.assert_allclose(underneath.start_pose(rig)[0], pose(0.0, 0.9, 0.0)[0])
    underneath.track(metarig, rig, *pose(0.5, 0.5, 0.5), channels_kept=True)
    np.testing.assert_allclose(underneath.start_pose(rig)[0], pose(0.0, 0.9, 0.0)[0])


def test_only_solved_bones_are_stored_and_a_new_rig_reads_them_back(metarig, underneath):
    rig = fresh_rig()
    underneath.track(metarig, rig, *pose(0.0, 0.1, 0.0))
    underneath.remember(metarig, rig, *pose(0.2, 0.1, 0.0))
    stored = metarig.ewbik[underneath.PROPERTY]
    assert list(stored["bones"]) == ["a"]
    assert len(stored["pose"]) == 14
    rebuilt = fresh_rig()
    underneath.track(metarig, rebuilt, *pose(0.2, 0.1, 0.0))  # the channels as the solve left them
    np.testing.assert_allclose(underneath.start_pose(rebuilt)[0], pose(0.0, 0.1, 0.0)[0], atol=1e-12)
    underneath.forget(rebuilt)
    assert rebuilt.underneath is None and rebuilt.written is None


def test_a_damaged_record_is_left_out(metarig, underneath):
    metarig.ewbik[underneath.PROPERTY] = {"bones": ["a"], "pose": [float("nan")] * 14}
    rig = fresh_rig()
    underneath.track(metarig, rig, *pose(0.2, 0.0, 0.0))
    np.testing.assert_allclose(underneath.start_pose(rig)[0], pose(0.2, 0.0, 0.0)[0])
