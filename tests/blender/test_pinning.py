"""ewbik_addon/bridge/pinning.py: Pin gives bones target empties once and says what it did;
Unpin deletes the empties it made unless something else needs them, and their empty collection."""

import bpy
import pytest

from tests.support.blender_helpers import addon_module


@pytest.fixture
def pinning():
    return addon_module("ewbik_addon.bridge.pinning")


def bones(obj, *names):
    return [obj.pose.bones[name] for name in names]


def test_pinning_again_makes_no_second_target(metarig, pinning):
    metarig.ewbik.stand_on_pin = False
    message = pinning.pin_bones(bpy.context, metarig, bones(metarig, "hand.L", "hand.R"))
    assert message.startswith("Pinned 2 bones, 2 new targets")
    first = metarig.pose.bones["hand.L"].ewbik.target
    message = pinning.pin_bones(bpy.context, metarig, bones(metarig, "hand.L"))
    assert message.startswith("Pinned 1 bone, 0 new targets")
    assert metarig.pose.bones["hand.L"].ewbik.target == first


def test_unpinning_removes_our_empties_and_their_collection(metarig, pinning):
    metarig.ewbik.stand_on_pin = False  # no feet planted beside the bones asked for
    pinning.pin_bones(bpy.context, metarig, bones(metarig, "hand.L", "foot.R"))
    empties = {pose_bone.ewbik.target.name for pose_bone in bones(metarig, "hand.L", "foot.R")}
    collection = metarig.pose.bones["hand.L"].ewbik.target.users_collection[0].name
    assert (
        pinning.unpin_bones(metarig, bones(metarig, "hand.L", "foot.R"))
        == "Unpinned 2 bones, removed 2 targets"
    )
    assert not empties & set(bpy.data.objects.keys())
    assert collection not in bpy.data.collections


def test_an_animated_target_is_kept_and_said_why(metarig, pinning):
    pinning.pin_bones(bpy.context, metarig, bones(metarig, "hand.L"))
    target = metarig.pose.bones["hand.L"].ewbik.target
    target.keyframe_insert("location", frame=1)
    message = pinning.unpin_bones(metarig, bones(metarig, "hand.L"))
    assert message == f"Unpinned 1 bone, removed 0 targets; kept target '{target.name}' (it is animated)"
    assert target.name in bpy.data.objects
