"""Helpers shared by the Blender tests: install paths, pinning through the operator, rigs.

Imported after conftest.py has pointed BLENDER_USER_RESOURCES at a temporary directory.
"""

import importlib
import importlib.util
import json
import pathlib

import bpy  # first: it makes addon_utils importable
import numpy as np

# isort: split
import addon_utils

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = "bl_ext.user_default.ewbik"
MOCAP_CLIP = pathlib.Path(__file__).resolve().parents[1] / "data" / "mocap" / "cmu_131_01.bvh"
# The metarig bones an animator pins first: hands, feet and head.
HANDS_FEET_HEAD = ("hand.L", "hand.R", "foot.L", "foot.R", "spine.006")
POSE_BONE_HAS_SELECT = "select" in bpy.types.PoseBone.bl_rna.properties  # Blender 5.x


def load_build_tool():
    """tools/build_extension.py as a module (tools/ is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "ewbik_build_extension", REPO_ROOT / "tools" / "build_extension.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def addon_module(name):
    """A submodule of the installed extension, e.g. addon_module("ewbik_addon.solve.armature_solve")."""
    return importlib.import_module(f"{PACKAGE}.{name}")


def extension_enabled():
    return PACKAGE in bpy.context.preferences.addons


def enable_extension():
    if not extension_enabled():
        addon_utils.enable(PACKAGE, default_set=True)
    assert extension_enabled(), f"{PACKAGE} could not be enabled"


def disable_extension():
    addon_utils.disable(PACKAGE, default_set=True)


def select_pose_bones(obj, names):
    """Select exactly these pose bones (the selection flag lives on PoseBone in 5.x, on Bone before)."""
    wanted = set(names)
    for pose_bone in obj.pose.bones:
        owner = pose_bone if POSE_BONE_HAS_SELECT else pose_bone.bone
        owner.select = pose_bone.name in wanted
    if names:
        obj.data.bones.active = obj.data.bones[names[-1]]


def make_active(obj):
    view_layer = bpy.context.view_layer
    if bpy.context.object is not None and bpy.context.object.mode != "OBJECT":
        bpy.ops.object.mode_set(mode="OBJECT")
    for other in view_layer.objects:
        other.select_set(False)
    obj.select_set(True)
    view_layer.objects.active = obj


def build_armature(name, bones, *, connect_touching=False):
    """A new armature object, linked to the scene, active and in Object Mode, with bones from
    (name, parent name or None, head, tail, roll); connect_touching connects a bone whose head
    is on its parent's tail."""
    data = bpy.data.armatures.new(name)
    obj = bpy.data.objects.new(name, data)
    bpy.context.scene.collection.objects.link(obj)
    make_active(obj)
    bpy.ops.object.mode_set(mode="EDIT")
    for bone_name, parent, head, tail, roll in bones:
        bone = data.edit_bones.new(bone_name)
        bone.head, bone.tail, bone.roll = head, tail, roll
        if parent is not None:
            bone.parent = data.edit_bones[parent]
            bone.use_connect = connect_touching and (bone.parent.tail - bone.head).length < 1e-4
    bpy.ops.object.mode_set(mode="OBJECT")
    return obj


def pin(obj, *names):
    """Pin these bones the way a user does: pose mode, select them, run ewbik.pin.

    Returns {bone name: target empty}.
    """
    make_active(obj)
    bpy.ops.object.mode_set(mode="POSE")
    select_pose_bones(obj, names)
    result = bpy.ops.ewbik.pin()
    assert result == {"FINISHED"}, result
    return {name: obj.pose.bones[name].ewbik.target for name in names}


def solve_fully_on_update(obj, iterations=200):
    """Live updates run without a time budget, to convergence or `iterations`, so one update is
    enough to check reaching (and the same solves on a busy machine)."""
    obj.ewbik.time_budget_ms = 0.0
    obj.ewbik.iterations = iterations


def update():
    """Let Blender evaluate the depsgraph, which runs depsgraph_update_post handlers."""
    bpy.context.view_layer.update()


def settle():
    """What Blender's refinement timer does once the mouse stops (timers never fire in the bpy
    module): solve again without the time budget the armatures whose last live solve ran out of it."""
    live = addon_module("ewbik_addon.solve.live")
    if live.has_unconverged():
        live.refine_unconverged()
        update()


def pose_values(obj):
    """Every bone's quaternion and location channels as Blender holds them, in one flat array."""
    rotations = np.empty(len(obj.pose.bones) * 4, np.float32)
    obj.pose.bones.foreach_get("rotation_quaternion", rotations)
    locations = np.empty(len(obj.pose.bones) * 3, np.float32)
    obj.pose.bones.foreach_get("location", locations)
    return np.concatenate([rotations, locations])


def bone_world(obj, name):
    """Blender's own evaluated pose matrix of a bone, in world space."""
    return obj.matrix_world @ obj.pose.bones[name].matrix


def distance_to_target(obj, bone):
    """How far a pinned bone's head is from its target (scene units)."""
    target = obj.pose.bones[bone].ewbik.target
    return (bone_world(obj, bone).translation - target.matrix_world.translation).length


def worst_distance(obj, bones):
    """The largest distance of these pinned bones from their targets (scene units)."""
    return max(distance_to_target(obj, bone) for bone in bones)


def pose_quaternions(obj):
    """Every bone's quaternion channel as Blender holds it, (N, 4)."""
    values = np.empty(len(obj.pose.bones) * 4, np.float32)
    obj.pose.bones.foreach_get("rotation_quaternion", values)
    return values.reshape(-1, 4).astype(float)


def stored_properties(struct, create=False):
    """The stored bpy.props values of `struct`, bypassing the update rules (as an older file may
    hold them; Blender 5 keeps them apart from custom properties)."""
    if hasattr(struct, "bl_system_properties_get"):
        return struct.bl_system_properties_get(do_create=create)
    return struct


def export_scene(path):
    """The active armature exported through ewbik.export_scene, read back as a document."""
    assert bpy.ops.ewbik.export_scene(filepath=str(path)) == {"FINISHED"}
    with open(path, encoding="utf-8") as stream:
        return json.load(stream)


def fcurve_keys():
    """The installed extension's F-Curve key reading and writing."""
    return addon_module("ewbik_addon.bake.fcurve_keys")


def build_metarig(location=(0.0, 0.0, 0.0)):
    """The Rigify human metarig (159 bones), active, in object mode."""
    if bpy.context.object is not None and bpy.context.object.mode != "OBJECT":
        bpy.ops.object.mode_set(mode="OBJECT")
    bpy.ops.object.armature_human_metarig_add()
    obj = bpy.context.object
    obj.location = location
    assert obj.type == "ARMATURE" and len(obj.pose.bones) == 159
    return obj


def import_mocap_rig(path=MOCAP_CLIP):
    """An armature built from a BVH clip (the CMU one by default) by Blender's BVH importer, at the
    clip's first frame."""
    bpy.ops.import_anim.bvh(
        filepath=str(path),
        global_scale=0.056444,
        rotate_mode="NATIVE",
        axis_forward="-Z",
        axis_up="Y",
    )
    obj = bpy.context.object
    assert obj.type == "ARMATURE"
    return obj
