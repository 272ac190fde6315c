"""ewbik_addon/com/live_pause.py: live solving stays paused for as long as any `suspended` block
is open, however they nest or end."""

import pytest
from mathutils import Vector

from tests.support.blender_helpers import addon_module, bone_world, pin, solve_fully_on_update, update


@pytest.fixture
def live_pause():
    return addon_module("ewbik_addon.com.live_pause")


def test_nested_blocks_pause_until_the_outer_one_ends_even_on_an_error(live_pause):
    assert not live_pause.is_suspended()
    with live_pause.suspended():
        with live_pause.suspended():
            assert live_pause.is_suspended()
        assert live_pause.is_suspended()
    assert not live_pause.is_suspended()
    with pytest.raises(RuntimeError), live_pause.suspended():
        raise RuntimeError("inside")
    assert not live_pause.is_suspended()


def test_a_target_moved_inside_the_block_is_solved_only_after_it(metarig, live_pause):
    solve_fully_on_update(metarig)
    target = pin(metarig, "hand.L")["hand.L"]
    update()
    hand = bone_world(metarig, "hand.L").translation.copy()
    with live_pause.suspended():
        target.location += Vector((0.05, -0.05, 0.1))
        update()
        assert (bone_world(metarig, "hand.L").translation - hand).length < 1e-6
    target.location.z += 0.001
    update()
    assert (bone_world(metarig, "hand.L").translation - target.matrix_world.translation).length < 1e-3
