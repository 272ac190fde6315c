"""Unpin deletes only the empties Pin made that carry nothing of the user's: animation in the NLA
and constraints the user added keep them, as keys and drivers do."""

import bpy

from tests.support.blender_helpers import pin, select_pose_bones


def unpin_hand(metarig, capfd):
    select_pose_bones(metarig, ["hand.L"])
    assert bpy.ops.ewbik.unpin() == {"FINISHED"}
    return capfd.readouterr().out


def test_unpin_keeps_a_target_animated_by_an_nla_strip(metarig, capfd, tmp_path):
    target = pin(metarig, "hand.L")["hand.L"]
    target.keyframe_insert("location", frame=1)
    action = target.animation_data.action
    track = target.animation_data.nla_tracks.new()
    track.strips.new(action.name, 1, action)
    target.animation_data.action = None
    name, action_name = target.name, action.name

    assert f"kept target '{name}' (it is animated)" in unpin_hand(metarig, capfd)

    bpy.ops.object.mode_set(mode="OBJECT")
    path = str(tmp_path / "unpinned.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    strips = bpy.data.objects[name].animation_data.nla_tracks[0].strips
    assert strips[0].action.name == action_name


def test_unpin_keeps_a_target_with_the_users_constraints(metarig, capfd):
    target = pin(metarig, "hand.L")["hand.L"]
    target.constraints.new("LIMIT_LOCATION")

    assert f"kept target '{target.name}' (it has constraints)" in unpin_hand(metarig, capfd)
    assert bpy.data.objects.get("metarig hand.L target") == target
