"""Scene documents through the operators: export -> import round trips, new armatures from a
document, and bad documents that must be reported without changing anything."""

import json
import math

import bpy
import pytest
from mathutils import Matrix, Quaternion, Vector

from tests.support.blender_helpers import addon_module, export_scene, make_active

POSED = {
    "upper_arm.L": Quaternion((1.0, 0.2, 0.0), math.radians(40.0)),
    "forearm.L": Quaternion((1.0, 0.0, 0.0), math.radians(-60.0)),
    "thigh.R": Quaternion((0.0, 0.3, 1.0), math.radians(25.0)),
    "spine.002": Quaternion((0.0, 0.0, 1.0), math.radians(10.0)),
}
PINNED = ("hand.L", "foot.R", "spine.006")


def dress_up(obj):
    """Pose, pin, limit and tune the rig so every part of the document has something to carry."""
    make_active(obj)
    obj.ewbik.live = False
    obj.ewbik.strict_limits = True
    obj.location = (0.5, 1.0, 0.0)
    obj.rotation_euler = (0.0, 0.0, 0.4)
    for name, rotation in POSED.items():
        pose_bone = obj.pose.bones[name]
        pose_bone.rotation_mode = "QUATERNION"
        pose_bone.rotation_quaternion = rotation
    obj.pose.bones["thigh.R"].rotation_mode = "XZY"
    obj.pose.bones["thigh.R"].rotation_euler = POSED["thigh.R"].to_euler("XZY")
    obj.pose.bones["spine"].location = (0.0, 0.05, -0.02)
    bpy.ops.ewbik.apply_limit_preset(preset="humanoid")
    bpy.context.view_layer.update()
    for index, name in enumerate(PINNED):
        pose_bone = obj.pose.bones[name]
        empty = bpy.data.objects.new(f"target {name}", None)
        bpy.context.collection.objects.link(empty)
        empty.matrix_world = (
            obj.matrix_world @ pose_bone.matrix @ Matrix.Translation((0.0, 0.05 * index, 0.02))
        )
        pose_bone.ewbik.target = empty
        pose_bone.ewbik.weight = 1.0 + index
        pose_bone.ewbik.orientation_weights = (0.5, 1.0, 0.0)
        pose_bone.ewbik.falloff = 0.1 * index
    obj.pose.bones["forearm.L"].ewbik.stiffness = 0.4
    elbow = obj.data.bones["forearm.L"].ewbik
    elbow.use_twist_limit = True
    elbow.twist_min, elbow.twist_max = -0.3, 0.9
    elbow.comfort = 0.25
    obj.ewbik.iterations = 33
    obj.ewbik.time_budget_ms = 0.0
    obj.ewbik.tolerance = 1e-4
    obj.ewbik.dampening = 0.2
    obj.ewbik.stabilization_passes = 2
    obj.ewbik.translate_root = True
    bpy.context.view_layer.update()
    return obj


def assert_documents_equal(got, want, path="document"):
    """Equal up to float32 storage in Blender; bones and pins compared by name, in any order."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), f"{path}: {sorted(got)} != {sorted(want)}"
        for key in want:
            assert_documents_equal(got[key], want[key], f"{path}.{key}")
    elif (
        isinstance(want, list)
        and want
        and isinstance(want[0], dict)
        and ("name" in want[0] or "bone" in want[0])
    ):
        key = "name" if "name" in want[0] else "bone"
        assert sorted(item[key] for item in got) == sorted(item[key] for item in want), path
        by_name = {item[key]: item for item in got}
        for item in want:
            assert_documents_equal(by_name[item[key]], item, f"{path}[{item[key]}]")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), path
        for index, (a, b) in enumerate(zip(got, want)):
            assert_documents_equal(a, b, f"{path}[{index}]")
    elif isinstance(want, float) or isinstance(got, float):
        assert got == pytest.approx(want, abs=2e-5), path
    else:
        assert got == want, path


def pose_world(obj):
    return {pose_bone.name: obj.matrix_world @ pose_bone.matrix for pose_bone in obj.pose.bones}


def assert_same_pose(got, want):
    for name, matrix in want.items():
        for a, b in zip(got[name], matrix):
            assert tuple(a) == pytest.approx(tuple(b), abs=1e-4), name


def clear_everything(obj, keep_targets=False):
    """Undo what dress_up did, through properties only (optionally leaving the pins' targets set)."""
    for pose_bone in obj.pose.bones:
        pose_bone.rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
        pose_bone.rotation_euler = (0.0, 0.0, 0.0)
        pose_bone.location = (0.0, 0.0, 0.0)
        settings, limits = pose_bone.ewbik, pose_bone.bone.ewbik
        if not keep_targets:
            settings.target = None
        limits.cones.clear()
        limits.use_twist_limit = False
        settings.stiffness = 0.0
        limits.comfort = 0.0
    obj.ewbik.iterations = 15
    obj.ewbik.translate_root = False
    bpy.context.view_layer.update()


def test_export_import_round_trip_on_the_same_rig(metarig, tmp_path):
    dress_up(metarig)
    before = export_scene(tmp_path / "before.json")
    assert before["format"] == "ewbik-scene" and len(before["bones"]) == 159
    world_before = pose_world(metarig)
    targets = {name: metarig.pose.bones[name].ewbik.target for name in PINNED}
    target_matrices = {name: target.matrix_world.copy() for name, target in targets.items()}
    for target in targets.values():
        target.location = (9.0, 9.0, 9.0)
    clear_everything(metarig, keep_targets=True)
    objects_before = len(bpy.data.objects)

    bpy.ops.object.mode_set(mode="POSE")
    assert bpy.ops.ewbik.import_scene(filepath=str(tmp_path / "before.json")) == {"FINISHED"}
    bpy.context.view_layer.update()

    assert bpy.context.active_object == metarig and metarig.mode == "POSE"
    assert len(bpy.data.objects) == objects_before, "existing targets are reused"
    for name, target in targets.items():
        assert metarig.pose.bones[name].ewbik.target == target
        for a, b in zip(target.matrix_world, target_matrices[name]):
            assert tuple(a) == pytest.approx(tuple(b), abs=1e-5)
    assert metarig.pose.bones["thigh.R"].rotation_mode == "XZY", "rotation modes are kept"
    elbow = metarig.data.bones["forearm.L"].ewbik
    assert elbow.use_twist_limit and (elbow.twist_min, elbow.twist_max) == pytest.approx((-0.3, 0.9))
    assert elbow.comfort == pytest.approx(0.25)
    assert metarig.pose.bones["forearm.L"].ewbik.stiffness == pytest.approx(0.4)
    assert_same_pose(pose_world(metarig), world_before)
    assert_documents_equal(export_scene(tmp_path / "after.json"), before)


def test_round_trip_does_not_turn_rotation_locks_into_stiffness(metarig, tmp_path):
    """Export freezes a fully locked bone (stiffness 1); importing must not store that as the
    bone's own stiffness, or it would stay frozen after the animator unlocks it."""
    bpy.context.view_layer.objects.active = metarig
    shin = metarig.pose.bones["shin.L"]
    shin.lock_rotation = (True, True, True)
    document = export_scene(tmp_path / "locked.json")
    assert next(b for b in document["bones"] if b["name"] == "shin.L")["stiffness"] == 1.0

    assert bpy.ops.ewbik.import_scene(filepath=str(tmp_path / "locked.json")) == {"FINISHED"}
    assert shin.ewbik.stiffness == 0.0
    shin.lock_rotation = (False, False, False)
    assert (
        next(b for b in export_scene(tmp_path / "unlocked.json")["bones"] if b["name"] == "shin.L")[
            "stiffness"
        ]
        == 0.0
    )


def test_import_builds_a_new_armature_when_the_bones_do_not_match(metarig, tmp_path):
    dress_up(metarig)
    document = export_scene(tmp_path / "scene.json")
    world = pose_world(metarig)
    metarig_world = metarig.matrix_world.copy()

    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.mesh.primitive_cube_add()
    assert bpy.ops.ewbik.import_scene(filepath=str(tmp_path / "scene.json")) == {"FINISHED"}
    bpy.context.view_layer.update()

    obj = bpy.context.active_object
    assert obj.type == "ARMATURE" and obj.name.startswith("scene")
    assert not obj.ewbik.live, "a reproduced scene shows the recorded pose until asked to solve"
    rest = {bone["name"]: bone for bone in document["bones"]}
    for bone in obj.data.bones:
        want = rest[bone.name]
        assert (bone.parent.name if bone.parent else None) == want["parent"]
        assert bone.length == pytest.approx(want["length"], rel=1e-5)
        for a, b in zip(bone.matrix_local, want["rest"]):
            assert tuple(a) == pytest.approx(b, abs=1e-5), bone.name
    assert len(obj.data.bones) == len(rest)
    assert len([o for o in bpy.data.objects if o.type == "EMPTY"]) == len(PINNED)
    for name in PINNED:
        target = obj.pose.bones[name].ewbik.target
        assert target is not None and target.type == "EMPTY"
    # The new armature sits at the origin, so its world pose is the original's armature-space pose.
    assert_same_pose(pose_world(obj), {name: metarig_world.inverted() @ m for name, m in world.items()})
    assert_documents_equal(export_scene(tmp_path / "again.json"), document)


def test_import_onto_a_different_rig_is_refused_unless_asked_for_a_new_armature(metarig, tmp_path):
    dress_up(metarig)
    export_scene(tmp_path / "scene.json")
    bpy.ops.object.armature_basic_human_metarig_add()
    other = bpy.context.active_object
    other_pose = pose_world(other)
    objects = len(bpy.data.objects)
    with pytest.raises(
        RuntimeError, match=f"'{other.name}' has other bones than the document.*As New Armature"
    ):
        bpy.ops.ewbik.import_scene(filepath=str(tmp_path / "scene.json"))
    assert len(bpy.data.objects) == objects and bpy.context.active_object == other

    assert bpy.ops.ewbik.import_scene(filepath=str(tmp_path / "scene.json"), as_new_armature=True) == {
        "FINISHED"
    }
    new = bpy.context.active_object
    assert new not in (other, metarig) and len(new.data.bones) == 159
    assert_same_pose(pose_world(other), other_pose)
    assert not any(pose_bone.bone.ewbik.cones for pose_bone in other.pose.bones)


def test_a_new_armature_keeps_bone_collections_and_connect_flags(metarig, tmp_path):
    dress_up(metarig)
    export_scene(tmp_path / "scene.json")
    want = {
        bone.name: (bone.use_connect, sorted(c.name for c in bone.collections)) for bone in metarig.data.bones
    }
    assert any(connected for connected, _ in want.values()) and any(names for _, names in want.values())
    assert bpy.ops.ewbik.import_scene(filepath=str(tmp_path / "scene.json"), as_new_armature=True) == {
        "FINISHED"
    }
    new = bpy.context.active_object
    got = {bone.name: (bone.use_connect, sorted(c.name for c in bone.collections)) for bone in new.data.bones}
    assert got == want


def test_exported_scene_imported_solves_to_the_same_pose(metarig, tmp_path):
    """Rotation modes, partial locks and every setting travel, so the rig solves the same after a round trip."""
    dress_up(metarig)
    thigh = metarig.pose.bones["thigh.R"]
    thigh.lock_rotation = (False, True, False)
    forearm = metarig.pose.bones["forearm.L"]
    forearm.rotation_mode = "YXZ"
    forearm.rotation_euler = POSED["forearm.L"].to_euler("YXZ")
    bpy.context.view_layer.update()
    document = export_scene(tmp_path / "scene.json")
    assert set(document["settings"]) == {
        "iterations",
        "time_budget_ms",
        "tolerance",
        "dampening",
        "stabilization_passes",
        "translate_root",
        "exact",
        "relaxation",
        "acceleration",
        "analytic_limbs",
        "stage_targets",
        "pins_give_way",
        "strict_limits",
        "soft_reach",
        "balance",
    }
    armature_solve = addon_module("ewbik_addon.solve.armature_solve")
    armature_solve.solve_armature(
        metarig, full=True
    )  # the iteration cap, no clock: the same inputs give the same pose
    bpy.context.view_layer.update()
    solved = pose_world(metarig)

    clear_everything(metarig, keep_targets=True)
    thigh.lock_rotation = (False, False, False)
    forearm.rotation_mode = "QUATERNION"
    thigh.rotation_mode = "QUATERNION"
    assert bpy.ops.ewbik.import_scene(filepath=str(tmp_path / "scene.json")) == {"FINISHED"}
    assert (thigh.rotation_mode, forearm.rotation_mode) == ("XZY", "YXZ")
    assert tuple(thigh.lock_rotation) == (False, True, False)
    armature_solve.solve_armature(metarig, full=True)
    bpy.context.view_layer.update()
    assert_same_pose(pose_world(metarig), solved)


def test_clamped_values_and_a_different_rest_pose_are_reported(metarig, tmp_path, capfd):
    dress_up(metarig)
    document = export_scene(tmp_path / "scene.json")
    document["settings"]["iterations"] = 50_000
    document["settings"]["relaxation"] = 1.5
    elbow = next(bone for bone in document["bones"] if bone["name"] == "forearm.L")
    elbow["rest"][2][3] += 0.1
    (tmp_path / "edited.json").write_text(json.dumps(document))
    assert bpy.ops.ewbik.import_scene(filepath=str(tmp_path / "edited.json")) == {"FINISHED"}
    output = "".join(capfd.readouterr())
    assert "iterations 50000 was clamped to 10000" in output
    assert "relaxation 1.0, not 1.5" in output
    assert "rest pose of 1 bone(s) differs" in output and "forearm.L" in output
    assert metarig.ewbik.iterations == 10000


def test_every_twist_range_the_solver_takes_is_kept(metarig, tmp_path, capfd):
    """Twist bounds take the solver's whole range (`MAX_ANGLE`), so Blender stores a document's
    range as the solver reads it."""
    dress_up(metarig)
    document = export_scene(tmp_path / "scene.json")
    elbow = next(bone for bone in document["bones"] if bone["name"] == "forearm.L")
    bound = addon_module("solver.validation").MAX_ANGLE
    elbow["limits"]["twist"] = {"min": -bound, "max": 2.5 * math.pi}
    (tmp_path / "twisted.json").write_text(json.dumps(document))
    assert bpy.ops.ewbik.import_scene(filepath=str(tmp_path / "twisted.json")) == {"FINISHED"}
    assert "clamped" not in "".join(capfd.readouterr())
    limits = metarig.data.bones["forearm.L"].ewbik
    assert (limits.twist_min, limits.twist_max) == pytest.approx((-bound, 2.5 * math.pi), rel=1e-6)


BAD_EDITS = {
    "limits.cones[0].direction": lambda doc: next(
        bone for bone in doc["bones"] if bone["name"] == "forearm.L"
    )["limits"]["cones"][0].update(direction=[0.0, 0.0, 0.0]),
    "parent": lambda doc: doc["bones"][5].update(parent="no such bone"),
    "pins": lambda doc: doc["pins"][0].update(bone="no such bone"),
    "format": lambda doc: doc.update(format="something else"),
    "bones[3].name": lambda doc: rename(doc, doc["bones"][3]["name"], "é" * 32),
    "pins[3].bone": lambda doc: doc["pins"].append(dict(doc["pins"][0])),
    "bones[4].name": lambda doc: rename(doc, doc["bones"][4]["name"], doc["bones"][4]["name"] + "\x00x"),
}


def rename(doc, old, new):
    """Rename a bone everywhere in the document (children's parents and pins follow)."""
    for bone in doc["bones"]:
        if bone["name"] == old:
            bone["name"] = new
        if bone.get("parent") == old:
            bone["parent"] = new
    for pin in doc["pins"]:
        if pin["bone"] == old:
            pin["bone"] = new


@pytest.mark.parametrize("field", sorted(BAD_EDITS))
def test_bad_document_is_reported_and_changes_nothing(metarig, tmp_path, field):
    dress_up(metarig)
    document = export_scene(tmp_path / "good.json")
    BAD_EDITS[field](document)
    (tmp_path / "bad.json").write_text(json.dumps(document))
    clear_everything(metarig)
    before = export_scene(tmp_path / "before.json")
    objects = sorted(obj.name for obj in bpy.data.objects)

    with pytest.raises(RuntimeError) as failure:
        bpy.ops.ewbik.import_scene(filepath=str(tmp_path / "bad.json"))
    message = str(failure.value)
    assert "Invalid scene document" in message
    assert field in message or (field == "pins" and "no such bone" in message), message
    assert sorted(obj.name for obj in bpy.data.objects) == objects
    assert_documents_equal(export_scene(tmp_path / "after.json"), before)


@pytest.mark.parametrize("content", ["{not json", "", "[1, 2, 3]"])
def test_unreadable_file_is_reported(metarig, tmp_path, content):
    (tmp_path / "broken.json").write_text(content)
    objects = len(bpy.data.objects)
    with pytest.raises(RuntimeError, match="broken.json is not JSON|Invalid scene document"):
        bpy.ops.ewbik.import_scene(filepath=str(tmp_path / "broken.json"))
    assert len(bpy.data.objects) == objects


def test_missing_file_is_reported(tmp_path):
    with pytest.raises(RuntimeError, match="Could not read"):
        bpy.ops.ewbik.import_scene(filepath=str(tmp_path / "missing.json"))


def test_export_needs_an_armature(tmp_path):
    bpy.ops.mesh.primitive_cube_add()
    with pytest.raises(RuntimeError, match="poll"):
        bpy.ops.ewbik.export_scene(filepath=str(tmp_path / "scene.json"))
    assert not (tmp_path / "scene.json").exists()


def test_export_to_an_unwritable_path_is_reported(metarig, tmp_path):
    make_active(metarig)
    with pytest.raises(RuntimeError, match="Could not write"):
        bpy.ops.ewbik.export_scene(filepath=str(tmp_path / "no such dir" / "scene.json"))


def test_rotation_written_in_the_bones_own_mode(metarig, tmp_path):
    """A document without Blender's fields (written by hand or another tool) keeps the rig's rotation modes."""
    dress_up(metarig)
    document = export_scene(tmp_path / "scene.json")
    for bone in document["bones"]:
        del bone["blender"]
    (tmp_path / "plain.json").write_text(json.dumps(document))
    metarig.pose.bones["forearm.L"].rotation_mode = "AXIS_ANGLE"
    assert bpy.ops.ewbik.import_scene(filepath=str(tmp_path / "plain.json")) == {"FINISHED"}
    pose_bone = metarig.pose.bones["forearm.L"]
    angle, *axis = pose_bone.rotation_axis_angle
    got = Quaternion(Vector(axis), angle)
    want = Quaternion(next(bone for bone in document["bones"] if bone["name"] == "forearm.L")["rotation"])
    assert abs(got.dot(want)) == pytest.approx(1.0, abs=1e-6)
