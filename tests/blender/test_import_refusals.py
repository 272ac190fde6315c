"""Import refuses what it cannot land whole (an armature in Edit Mode, a linked one, a bone name
Blender cannot store) before the file changes, and stays linear in the number of bones."""

import json
import time

import bpy
import numpy as np
import pytest

from tests.support.blender_helpers import addon_module, export_scene, make_active, pin


def test_an_armature_in_edit_mode_is_refused_and_keeps_its_edits(metarig, tmp_path):
    make_active(metarig)
    export_scene(tmp_path / "scene.json")
    bpy.ops.object.mode_set(mode="EDIT")
    metarig.data.edit_bones["hand.L"].name = "palm.L"
    metarig.data.edit_bones.remove(metarig.data.edit_bones["hand.R"])

    with pytest.raises(RuntimeError, match="Edit Mode"):
        bpy.ops.ewbik.import_scene(filepath=str(tmp_path / "scene.json"))

    assert metarig.mode == "EDIT"
    assert "palm.L" in metarig.data.edit_bones and "hand.R" not in metarig.data.edit_bones


def test_a_linked_armature_is_refused_without_a_library_override(metarig, tmp_path):
    pin(metarig, "hand.L")
    bpy.ops.object.mode_set(mode="OBJECT")
    make_active(metarig)
    export_scene(tmp_path / "scene.json")
    path = str(tmp_path / "library.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.read_homefile(use_empty=True)
    with bpy.data.libraries.load(path, link=True) as (_, linked):
        linked.objects = ["metarig"]
    bpy.context.scene.collection.objects.link(linked.objects[0])
    make_active(linked.objects[0])
    objects = sorted(obj.name for obj in bpy.data.objects)

    with pytest.raises(RuntimeError, match="library override"):
        bpy.ops.ewbik.import_scene(filepath=str(tmp_path / "scene.json"))

    assert sorted(obj.name for obj in bpy.data.objects) == objects


def chain_document(names):
    """A scene document of a chain of 0.1-long bones along +Y, one pin on the last."""
    bones = []
    for index, name in enumerate(names):
        rest = np.eye(4)
        rest[1, 3] = 0.1 * index
        bones.append(
            {
                "name": name,
                "parent": names[index - 1] if index else None,
                "rest": rest.tolist(),
                "length": 0.1,
            }
        )
    target = np.eye(4)
    target[:3, 3] = (0.05, 0.1 * len(names), 0.0)
    return {
        "format": "ewbik-scene",
        "version": 1,
        "bones": bones,
        "pins": [{"bone": names[-1], "target": target.tolist()}],
    }


def test_a_bone_name_that_is_not_unicode_is_refused(tmp_path):
    path = tmp_path / "surrogate.json"
    path.write_text(json.dumps(chain_document(["root", "b\ud800"])))
    with pytest.raises(RuntimeError, match=r"bones\[1\]\.name"):
        bpy.ops.ewbik.import_scene(filepath=str(path))
    assert len(bpy.data.objects) == 0
    with pytest.raises(addon_module("ewbik_addon.com.armature_checks").RigError) as caught:
        addon_module("ewbik_addon.documents.scene_import").read_document(str(path))
    assert caught.value.field == "bones[1].name"
    assert str(caught.value).startswith("Invalid scene document: bones[1].name: ")


def fan_document(count):
    """A root with `count` child bones side by side, each with a cone limit and its own stiffness."""
    document = chain_document(["root"])
    for index in range(count):
        rest = np.eye(4)
        rest[0, 3] = 0.01 * index
        document["bones"].append(
            {
                "name": f"b{index}",
                "parent": "root",
                "rest": rest.tolist(),
                "length": 0.1,
                "stiffness": 0.25,
                "limits": {"cones": [{"direction": [0.0, 1.0, 0.0], "radius": 0.5}]},
            }
        )
    return document


def test_importing_ten_thousand_bones_takes_seconds(tmp_path):
    path = tmp_path / "fan.json"
    path.write_text(json.dumps(fan_document(10_000)))
    started = time.perf_counter()
    assert bpy.ops.ewbik.import_scene(filepath=str(path)) == {"FINISHED"}
    assert time.perf_counter() - started < 20.0
    assert len(bpy.context.object.pose.bones) == 10_001
