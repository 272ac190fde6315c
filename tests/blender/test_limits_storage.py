"""Where joint limits are stored: on the armature data's bones (`Bone.ewbik`), which Blender's
evaluation of the posed object never copies; kept through Edit Mode; moved there from the pose
bones of files saved by earlier versions."""

import array
import math

import bpy
import pytest

from tests.support.blender_helpers import addon_module, make_active, pin, stored_properties

LIMIT_NAMES = {"cones", "active_cone_index", "use_twist_limit", "twist_min", "twist_max", "comfort"}


def bone_limits(obj):
    """{bone name: scene-document limits} of the bones that store any."""
    limit_settings = addon_module("ewbik_addon.com.limit_settings")
    stored_bone_limits = addon_module("ewbik_addon.com.stored_settings").stored_bone_limits
    return {
        bone.name: limit_settings.limits_dict(stored_bone_limits(bone))
        for bone in obj.data.bones
        if limit_settings.has_limits(stored_bone_limits(bone))
    }


def with_preset(obj):
    make_active(obj)
    assert bpy.ops.ewbik.apply_limit_preset(preset="humanoid") == {"FINISHED"}
    limits = bone_limits(obj)
    assert len(limits) > 20
    return limits


def test_limits_live_on_the_bones_and_the_pose_bones_store_none(metarig):
    """A preset, a pin and a live solve leave the limited (unpinned) pose bones nothing but a
    stiffness, and the cones store no last good axis."""
    with_preset(metarig)
    target = pin(metarig, "hand.L")["hand.L"]
    bpy.ops.object.mode_set(mode="OBJECT")
    target.location.z += 0.02
    bpy.context.view_layer.update()
    bone_target = addon_module("ewbik_addon.com.stored_settings").bone_target
    for name in bone_limits(metarig):
        pose_bone = metarig.pose.bones[name]
        pose_store = stored_properties(pose_bone)
        if bone_target(pose_bone) is None and pose_store is not None and "ewbik" in pose_store:
            assert set(pose_store["ewbik"].keys()) <= {"stiffness"}, name
        for cone in stored_properties(pose_bone.bone)["ewbik"].get("cones", ()):
            assert set(cone.keys()) <= {"direction", "radius"}, name


def test_objects_sharing_an_armature_share_its_limits(metarig):
    limits = with_preset(metarig)
    twin = metarig.copy()  # shares metarig.data
    bpy.context.scene.collection.objects.link(twin)
    assert bone_limits(twin) == limits


def test_edit_mode_keeps_the_limits(metarig):
    """Blender rebuilds the bones from the edit bones on leaving Edit Mode, their stored values
    copied along."""
    limits = with_preset(metarig)
    metarig.data.bones["forearm.L"].ewbik.active_cone_index = 1
    make_active(metarig)
    bpy.ops.object.mode_set(mode="EDIT")
    metarig.data.edit_bones["forearm.L"].tail.z += 0.01
    bpy.ops.object.mode_set(mode="POSE")
    assert bone_limits(metarig) == limits
    assert metarig.data.bones["forearm.L"].ewbik.active_cone_index == 1


def test_the_preset_is_refused_in_edit_mode(metarig):
    make_active(metarig)
    bpy.ops.object.mode_set(mode="EDIT")
    assert not bpy.ops.ewbik.apply_limit_preset.poll()


def write_as_earlier_versions(obj):
    """Store each bone's limits raw on its pose bone, as versions before `Bone.ewbik` did (float32
    axes and radii, each cone's last good axis beside it), and remove them from the bone."""
    for bone in obj.data.bones:
        bone_store = stored_properties(bone)
        if bone_store is None or "ewbik" not in bone_store:
            continue
        settings = bone.ewbik
        old = {
            "cones": [
                {
                    "direction": array.array("f", cone.direction),
                    "radius": cone.radius,
                    "last_direction": array.array("f", cone.direction),
                }
                for cone in settings.cones
            ],
            "use_twist_limit": settings.use_twist_limit,
            "twist_min": settings.twist_min,
            "twist_max": settings.twist_max,
        }
        if settings.comfort:
            old["comfort"] = settings.comfort
        if settings.active_cone_index:
            old["active_cone_index"] = settings.active_cone_index
        pose_store = stored_properties(obj.pose.bones[bone.name], create=True)
        group = pose_store.get("ewbik")
        if group is None:
            pose_store["ewbik"] = old
        else:
            group.update(old)
        del bone_store["ewbik"]


def test_a_file_with_limits_on_the_pose_bones_loads_them_onto_the_bones(metarig, tmp_path):
    with_preset(metarig)
    metarig.data.bones["forearm.L"].ewbik.comfort = 0.25
    metarig.data.bones["forearm.L"].ewbik.active_cone_index = 1
    limits = bone_limits(metarig)
    stiffness = {b.name: b.ewbik.stiffness for b in metarig.pose.bones if b.ewbik.stiffness}
    assert stiffness
    write_as_earlier_versions(metarig)
    assert bone_limits(metarig) == {}
    name, path = metarig.name, str(tmp_path / "earlier.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    rig = bpy.data.objects[name]
    assert bone_limits(rig) == limits
    assert rig.data.bones["forearm.L"].ewbik.active_cone_index == 1
    for pose_bone in rig.pose.bones:
        pose_store = stored_properties(pose_bone)
        kept = set(pose_store["ewbik"].keys()) if pose_store is not None and "ewbik" in pose_store else set()
        assert kept == ({"stiffness"} if pose_bone.name in stiffness else set()), pose_bone.name
        assert pose_bone.ewbik.stiffness == pytest.approx(stiffness.get(pose_bone.name, 0.0))


def test_limits_that_cannot_be_moved_stay_on_the_pose_bone_and_are_reported(metarig):
    with_preset(metarig)
    write_as_earlier_versions(metarig)
    old = stored_properties(metarig.pose.bones["forearm.L"])["ewbik"]
    old["cones"][0]["direction"] = "not an axis"
    stored_settings = addon_module("ewbik_addon.com.stored_settings")
    with pytest.raises(stored_settings.LimitsNotMoved) as caught:
        stored_settings._move_limits(old, metarig.data.bones["forearm.L"])
    assert caught.value.field == "bone 'forearm.L'"
    problems = stored_settings.move_limits_to_bones(metarig)
    assert len(problems) == 1 and "forearm.L" in problems[0] and "not an axis" in problems[0]
    assert "cones" in stored_properties(metarig.pose.bones["forearm.L"])["ewbik"]
    bone_store = stored_properties(metarig.data.bones["forearm.L"])
    assert bone_store is None or "ewbik" not in bone_store
    assert "forearm.R" in bone_limits(metarig)


def test_a_shared_armature_keeps_the_first_limits_and_reports_other_ones(metarig):
    with_preset(metarig)
    twin = metarig.copy()
    bpy.context.scene.collection.objects.link(twin)
    write_as_earlier_versions(metarig)
    stored_settings = addon_module("ewbik_addon.com.stored_settings")
    old = stored_properties(metarig.pose.bones["forearm.L"])["ewbik"]
    twin_old = stored_properties(twin.pose.bones["forearm.L"], create=True)
    twin_old["ewbik"] = {
        "cones": [{"direction": array.array("f", (0.0, 1.0, 0.0)), "radius": math.radians(10)}]
    }
    assert "cones" in old
    assert stored_settings.move_limits_to_bones(metarig) == []
    problems = stored_settings.move_limits_to_bones(twin)
    assert len(problems) == 1 and "forearm.L" in problems[0]
    assert "cones" in stored_properties(twin.pose.bones["forearm.L"])["ewbik"]
    assert math.degrees(metarig.data.bones["forearm.L"].ewbik.cones[0].radius) != pytest.approx(10.0)


def test_a_linked_armature_with_earlier_limits_is_left_and_names_its_library(metarig, tmp_path):
    with_preset(metarig)
    write_as_earlier_versions(metarig)
    name, library = metarig.name, str(tmp_path / "library.blend")
    bpy.ops.wm.save_as_mainfile(filepath=library)
    bpy.ops.wm.read_homefile(use_empty=True)
    with bpy.data.libraries.load(library, link=True) as (source, linked):
        linked.objects = [name]
    rig = linked.objects[0]
    bpy.context.scene.collection.objects.link(rig)
    problems = addon_module("ewbik_addon.com.stored_settings").move_limits_to_bones(rig)
    assert len(problems) == 1 and "library.blend" in problems[0] and name in problems[0]
    assert "cones" in stored_properties(rig.pose.bones["forearm.L"])["ewbik"]


def overridden(rig, path):
    """`rig` saved as the library `path`, linked into a fresh file and given an object override:
    its armature data stays linked, and with it the limits; forearm.L active in Pose Mode."""
    name = rig.name
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.read_homefile(use_empty=True)
    with bpy.data.libraries.load(path, link=True) as (_source, linked):
        linked.objects = [name]
    bpy.context.scene.collection.objects.link(linked.objects[0])
    rig = linked.objects[0].override_create(remap_local_usages=True)
    assert rig.data.library is not None
    make_active(rig)
    bpy.ops.object.mode_set(mode="POSE")
    rig.data.bones.active = rig.data.bones["forearm.L"]
    return rig


@pytest.fixture
def overridden_rig(metarig, tmp_path):
    """The metarig with humanoid limits, linked with an object override (`overridden`)."""
    with_preset(metarig)
    return overridden(metarig, str(tmp_path / "library.blend"))


LIMIT_EDITS = [
    ("apply_limit_preset", {"preset": "humanoid"}),
    ("cone_add", {}),
    ("cone_remove", {}),
    ("cone_move", {"direction": "DOWN"}),
    ("reset_limits", {}),
    ("mirror_limits", {}),
    ("copy_limits", {}),
    ("limits_from_action", {}),
]


@pytest.mark.parametrize("operator, options", LIMIT_EDITS)
def test_limits_of_a_linked_armature_are_not_changed_in_vain(overridden_rig, operator, options):
    """An edit of limits on linked armature data would show until the file is saved, then be
    gone: every operator that changes limits says where they come from instead."""
    before = bone_limits(overridden_rig)
    assert len(before) > 20
    with pytest.raises(RuntimeError, match="library.blend"):
        getattr(bpy.ops.ewbik, operator)(**options)
    assert bone_limits(overridden_rig) == before


def test_a_linked_armature_shows_no_limit_handles(overridden_rig):
    assert addon_module("ewbik_addon.viewport.limit_gizmos").editable_bone(bpy.context) is None


def test_pinning_a_linked_armature_without_limits_sets_none_and_says_why(metarig, tmp_path):
    metarig.ewbik.auto_limits = True
    rig = overridden(metarig, str(tmp_path / "library.blend"))
    said = addon_module("ewbik_addon.limits.limit_presets").set_humanoid_limits_if_none(rig, 1)
    assert said.startswith("; no humanoid limits set:") and "library.blend" in said
    assert bone_limits(rig) == {}


def test_a_scene_document_with_other_limits_is_refused_on_a_linked_armature(overridden_rig, tmp_path):
    scene_export = addon_module("ewbik_addon.documents.scene_export")
    scene_import = addon_module("ewbik_addon.documents.scene_import")
    RigError = addon_module("ewbik_addon.com.armature_checks").RigError
    document = scene_export.scene_document(overridden_rig)
    same = scene_import.apply_document(bpy.context, overridden_rig, document)
    assert isinstance(same, list)
    for bone in document["bones"]:
        if bone["name"] == "forearm.L":
            bone["limits"] = {}
    before = bone_limits(overridden_rig)
    with pytest.raises(RigError, match="library.blend") as caught:
        scene_import.apply_document(bpy.context, overridden_rig, document)
    assert caught.value.field == "limits"
    assert bone_limits(overridden_rig) == before


def test_saving_an_overridden_rig_reads_its_pin_list_without_an_error(overridden_rig, tmp_path, capfd):
    """Saving a file with a library override reads every overridable property, the pin list's
    row too, in a context that has no active object."""
    bpy.ops.object.mode_set(mode="OBJECT")
    bpy.ops.wm.save_as_mainfile(filepath=str(tmp_path / "shot.blend"))
    bpy.ops.wm.open_mainfile(filepath=str(tmp_path / "shot.blend"))
    assert "Error" not in capfd.readouterr().err
