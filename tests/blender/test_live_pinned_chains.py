"""A live solve hands the solver only the pinned chains (the pinned bones and the bones above
them): it must pose them exactly as a solve of the whole rig would, leave every other bone as
the user or the animation set it, and take in a new pin's chain at once."""

import bpy
import numpy as np
from mathutils import Quaternion, Vector

from tests.support.blender_helpers import (
    HANDS_FEET_HEAD,
    addon_module,
    bone_world,
    build_metarig,
    pin,
    update,
)
from tests.support.live_drags import DRAG, channels, drag


def limited_metarig():
    """The metarig with humanoid limits, a stiff chest and hands, feet and head pinned, no time
    budget (the same solves on a busy machine), in Object Mode."""
    rig = build_metarig()
    rig.ewbik.time_budget_ms = 0.0
    rig.ewbik.auto_limits = True
    rig.pose.bones["spine.002"].ewbik.stiffness = 0.5
    targets = pin(rig, *HANDS_FEET_HEAD)
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    return rig, targets


def solved_bones(monkeypatch):
    """The bone names of every skeleton the live solves hand to the solver from now on."""
    handed = []
    armature_solve = addon_module("ewbik_addon.solve.armature_solve")
    real = armature_solve.solve

    def recording(skeleton, *args, **kwargs):
        handed.append(set(skeleton.names))
        return real(skeleton, *args, **kwargs)

    monkeypatch.setattr(armature_solve, "solve", recording)
    return handed


def chains_above(obj, *bones):
    """The bones and all their ancestors, from Blender's own parent links."""
    names = set()
    for bone in bones:
        pose_bone = obj.pose.bones[bone]
        while pose_bone is not None:
            names.add(pose_bone.name)
            pose_bone = pose_bone.parent
    return names


def test_a_drag_poses_exactly_as_a_solve_of_the_whole_rig(monkeypatch):
    """The oracle: the same drag with the solver handed every bone of the rig (limits, stiffness,
    a YXZ Euler shoulder on the chains): the channels must come out the same."""
    rig, targets = limited_metarig()
    drag(targets, DRAG)
    chained = channels(rig)
    bpy.ops.wm.read_homefile(use_empty=True)
    rig_cache = addon_module("ewbik_addon.bridge.rig_cache")
    monkeypatch.setattr(
        rig_cache,
        "_chains_of",
        lambda rig, pinned: rig_cache.PinnedChains(pinned, np.argsort(rig.to_solver), rig.skeleton),
    )
    rig, targets = limited_metarig()
    drag(targets, DRAG)
    for ours, whole in zip(chained, channels(rig)):
        np.testing.assert_array_equal(ours, whole)


def test_the_solver_sees_only_the_pinned_chains_and_other_bones_keep_their_channels(metarig, monkeypatch):
    metarig.ewbik.stand_on_pin = False  # only the bones asked for: no feet planted by the first Pin
    metarig.ewbik.time_budget_ms = 0.0
    targets = pin(metarig, "hand.L", "foot.R")
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    finger = metarig.pose.bones["f_index.01.R"]  # outside the chains, below a bone that moves
    turn = Quaternion((0.0, 0.0, 1.0), 0.3)
    finger.rotation_quaternion = turn
    update()
    handed = solved_bones(monkeypatch)
    before = channels(metarig)
    drag(targets, DRAG[:4])
    assert handed and all(names == chains_above(metarig, "hand.L", "foot.R") for names in handed)
    quaternions, eulers = channels(metarig)
    rows = np.array([name not in handed[0] for name in metarig.pose.bones.keys()])
    np.testing.assert_array_equal(quaternions.reshape(-1, 4)[rows], before[0].reshape(-1, 4)[rows])
    np.testing.assert_array_equal(eulers.reshape(-1, 3)[rows], before[1].reshape(-1, 3)[rows])
    assert finger.rotation_quaternion.rotation_difference(turn).angle < 1e-6
    for bone in ("hand.L", "foot.R"):
        assert (bone_world(metarig, bone).translation - targets[bone].location).length < 1e-4, bone


def test_a_pin_added_on_another_chain_is_solved_at_once(metarig, monkeypatch):
    """The chains change with the pins: after drags with one hand pinned, pinning the other hand
    and moving its target brings that hand (and its arm) to the target in the next update."""
    metarig.ewbik.stand_on_pin = False  # only the bones asked for: no feet planted by the first Pin
    metarig.ewbik.time_budget_ms = 0.0
    targets = pin(metarig, "hand.L")
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    drag(targets, DRAG[:3])
    targets.update(pin(metarig, "hand.R"))
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    handed = solved_bones(monkeypatch)
    forearm = metarig.pose.bones["forearm.R"].matrix_basis.copy()
    targets["hand.R"].location += Vector((0.05, -0.1, 0.15))
    update()
    assert handed == [chains_above(metarig, "hand.L", "hand.R")]
    assert (bone_world(metarig, "hand.R").translation - targets["hand.R"].location).length < 1e-4
    assert (bone_world(metarig, "hand.L").translation - targets["hand.L"].location).length < 1e-4
    assert metarig.pose.bones["forearm.R"].matrix_basis != forearm


def stores_settings(bone):
    """Whether the pose bone or bone holds an `ewbik` group (5.x keeps bpy.props groups apart)."""
    store = bone.bl_system_properties_get() if hasattr(bone, "bl_system_properties_get") else bone
    return store is not None and "ewbik" in store


def test_live_drags_store_no_settings_on_bones_that_have_none(metarig):
    """Blender copies every bone's property groups whenever it evaluates the pose, so reading the
    bones' settings must not give each bone an empty one: after pinning and dragging, only the
    pinned bones and the one whose stiffness was set hold settings."""
    metarig.ewbik.auto_limits = False
    metarig.ewbik.time_budget_ms = 0.0
    metarig.pose.bones["spine"].ewbik.stiffness = 1.0
    targets = pin(metarig, *HANDS_FEET_HEAD)
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    drag(targets, DRAG[:3])
    holding = {pose_bone.name for pose_bone in metarig.pose.bones if stores_settings(pose_bone)}
    assert holding == {"spine", *HANDS_FEET_HEAD}
    assert "pins reached" in metarig.ewbik.status and not metarig.ewbik.status_is_error


def test_the_sidebar_overlay_and_checks_store_no_settings_on_bones_that_have_none(metarig):
    """What reads every bone on each redraw or bake (the pin list, the limit status, the overlay's
    scope, the preset's has-limits check, the pins' evaluated errors, the bake's pin list) asks
    without storing: a session with the sidebar open keeps live updates as cheap as the drag."""
    metarig.ewbik.stand_on_pin = False  # only the bones asked for: no feet planted by the first Pin
    metarig.ewbik.auto_limits = False
    metarig.pose.bones["forearm.L"].bone.ewbik.use_twist_limit = True
    pin(metarig, "hand.L", "foot.R")
    metarig.ewbik.limits_scope = "ALL"
    pin_list = bpy.types.EWBIK_UL_pins
    fake = type(
        "FakeList", (), {"filter_name": "", "bitflag_filter_item": 1, "use_filter_sort_alpha": False}
    )()
    flags, _order = pin_list.filter_items(fake, bpy.context, metarig.pose, "bones")
    assert sum(flags) == 2
    assert [b.name for b in addon_module("ewbik_addon.viewport.overlay").shown_bones(metarig)] == [
        "forearm.L"
    ]
    addon_module("ewbik_addon.limits.limit_status").limit_status(metarig)
    assert addon_module("ewbik_addon.limits.limit_presets").has_limits(metarig)
    assert set(addon_module("ewbik_addon.rigs.production_checks").evaluated_pin_errors(metarig)) == {
        "hand.L",
        "foot.R",
    }
    bake_armatures = addon_module("ewbik_addon.bake.bake_engine").armatures_to_bake(bpy.context)
    assert bake_armatures == [metarig]
    holding = {pose_bone.name for pose_bone in metarig.pose.bones if stores_settings(pose_bone)}
    assert holding == {"hand.L", "foot.R"}
    assert {bone.name for bone in metarig.data.bones if stores_settings(bone)} == {"forearm.L"}
