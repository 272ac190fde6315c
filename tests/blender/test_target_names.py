"""ewbik_addon/com/target_names.py: the empties Pin makes are named and marked by its rules, and
only its own collections count as target collections."""

import bpy
import pytest

from tests.support.blender_helpers import addon_module, build_metarig, pin


@pytest.fixture
def target_names():
    return addon_module("ewbik_addon.com.target_names")


def test_pinned_empties_carry_the_names_and_marks(metarig, target_names):
    metarig.name = "hero"
    targets = pin(metarig, "hand.L", "foot.R")
    for bone, target in targets.items():
        assert target.name == target_names.target_name(metarig, bone) == f"hero {bone} target"
        assert target[target_names.TARGET_MARK] == "hero"
        assert target[target_names.TARGET_BONE] == bone
        collection = bpy.data.collections[target_names.target_collection_name(metarig)]
        assert target.name in collection.objects
        assert target_names.is_targets_collection(collection)


def test_each_armature_gets_its_own_collection_and_other_collections_are_not_ours(metarig, target_names):
    other = build_metarig(location=(2.0, 0.0, 0.0))
    pin(metarig, "hand.L")
    pin(other, "hand.L")
    ours = {target_names.target_collection_name(obj) for obj in (metarig, other)}
    assert len(ours) == 2 and ours <= set(bpy.data.collections.keys())
    assert not target_names.is_targets_collection(bpy.data.collections.new("Targets"))
