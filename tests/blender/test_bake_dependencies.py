"""Which baked armatures something the bake reads depends on: the ones a bake writes every frame.

Two metarigs are baked; an empty stands for a pin target. Whatever way the empty follows the
first armature, the first must be written and the second, which nothing follows, need not; when
a dependency cannot be followed, both are written.
"""

import bpy
import pytest

from tests.support.blender_helpers import addon_module, build_metarig

BONE = "hand.L"


def parented_to_a_bone(empty, armature):
    empty.parent, empty.parent_type, empty.parent_bone = armature, "BONE", BONE


def copying_a_bone(empty, armature):
    constraint = empty.constraints.new("COPY_LOCATION")
    constraint.target, constraint.subtarget = armature, BONE


def held_by_the_armature_constraint(empty, armature):
    constraint = empty.constraints.new("ARMATURE")
    target = constraint.targets.new()
    target.target, target.subtarget = armature, BONE


def on_a_deformed_mesh(empty, armature):
    mesh = bpy.data.objects.new("skin", bpy.data.meshes.new("skin"))
    bpy.context.scene.collection.objects.link(mesh)
    mesh.modifiers.new("Armature", "ARMATURE").object = armature
    empty.parent = mesh


def shrinkwrapped_to_a_mesh_that_cuts_with_a_collection(empty, armature):
    mesh = bpy.data.objects.new("surface", bpy.data.meshes.new("surface"))
    bpy.context.scene.collection.objects.link(mesh)
    cutters = bpy.data.collections.new("cutters")
    cutters.objects.link(armature)
    boolean = mesh.modifiers.new("Boolean", "BOOLEAN")
    boolean.operand_type, boolean.collection = "COLLECTION", cutters
    empty.constraints.new("SHRINKWRAP").target = mesh


def driven_by_a_bone(owner, armature, path="location", index=0):
    driver = owner.driver_add(path, index).driver
    variable = driver.variables.new()
    variable.type = "TRANSFORMS"
    variable.targets[0].id, variable.targets[0].bone_target = armature, BONE
    driver.expression = variable.name


def on_a_mesh_whose_shape_key_a_bone_drives(empty, armature):
    mesh = bpy.data.objects.new("face", bpy.data.meshes.new("face"))
    bpy.context.scene.collection.objects.link(mesh)
    mesh.shape_key_add(name="Basis")
    smile = mesh.shape_key_add(name="smile")
    driven_by_a_bone(smile, armature, "value", -1)
    empty.parent = mesh


def on_an_empty_that_follows(empty, armature):
    middle = bpy.data.objects.new("middle", None)
    bpy.context.scene.collection.objects.link(middle)
    parented_to_a_bone(middle, armature)
    empty.parent = middle


def the_armature_itself(empty, armature):
    """An armature target (a pin on another armature's bone) is the armature itself."""


@pytest.mark.parametrize(
    "follow",
    [
        parented_to_a_bone,
        copying_a_bone,
        held_by_the_armature_constraint,
        on_a_deformed_mesh,
        shrinkwrapped_to_a_mesh_that_cuts_with_a_collection,
        driven_by_a_bone,
        on_a_mesh_whose_shape_key_a_bone_drives,
        on_an_empty_that_follows,
        the_armature_itself,
    ],
)
def test_a_target_that_follows_an_armature_has_it_written(follow):
    first, second = build_metarig(), build_metarig(location=(2.0, 0.0, 0.0))
    empty = bpy.data.objects.new("target", None)
    bpy.context.scene.collection.objects.link(empty)
    follow(empty, first)
    target = first if follow is the_armature_itself else empty

    read = addon_module("ewbik_addon.bake.bake_dependencies").armatures_read([first, second], [target])

    assert read == {first}


def test_an_armature_parented_to_another_has_that_one_written():
    first, second = build_metarig(), build_metarig(location=(2.0, 0.0, 0.0))
    second.parent, second.parent_type, second.parent_bone = first, "BONE", BONE
    empty = bpy.data.objects.new("target", None)
    bpy.context.scene.collection.objects.link(empty)

    read = addon_module("ewbik_addon.bake.bake_dependencies").armatures_read([first, second], [empty])

    assert read == {first}


def test_a_target_on_its_own_has_nothing_written():
    first, second = build_metarig(), build_metarig(location=(2.0, 0.0, 0.0))
    empty = bpy.data.objects.new("target", None)
    bpy.context.scene.collection.objects.link(empty)
    empty.animation_data_create()
    empty.location = (1.0, 0.0, 0.0)
    empty.keyframe_insert("location", frame=1)

    read = addon_module("ewbik_addon.bake.bake_dependencies").armatures_read([first, second], [empty])

    assert read == set()


def a_python_driver(empty):
    driver = empty.driver_add("location", 0).driver
    driver.expression = "sum((1.0, 2.0))"


def a_driver_on_a_scene_property(empty):
    driver = empty.driver_add("location", 0).driver
    variable = driver.variables.new()
    variable.targets[0].id_type = "SCENE"
    variable.targets[0].id = bpy.context.scene
    variable.targets[0].data_path = "frame_current"
    driver.expression = variable.name


def a_geometry_nodes_parent(empty):
    mesh = bpy.data.objects.new("nodes", bpy.data.meshes.new("nodes"))
    bpy.context.scene.collection.objects.link(mesh)
    mesh.modifiers.new("Nodes", "NODES")
    empty.parent = mesh


@pytest.mark.parametrize("unsure", [a_python_driver, a_driver_on_a_scene_property, a_geometry_nodes_parent])
def test_a_dependency_that_cannot_be_followed_has_every_armature_written(unsure):
    first, second = build_metarig(), build_metarig(location=(2.0, 0.0, 0.0))
    empty = bpy.data.objects.new("target", None)
    bpy.context.scene.collection.objects.link(empty)
    unsure(empty)

    read = addon_module("ewbik_addon.bake.bake_dependencies").armatures_read([first, second], [empty])

    assert read == {first, second}


def test_every_constraint_and_modifier_type_is_followed():
    """Each type's pointers are read without error; the ones that point at the armature have it
    written (a geometry nodes modifier has every armature written)."""
    first, second = build_metarig(), build_metarig(location=(2.0, 0.0, 0.0))
    bake_dependencies = addon_module("ewbik_addon.bake.bake_dependencies")
    constraint_types = bpy.types.Constraint.bl_rna.properties["type"].enum_items.keys()
    for kind in constraint_types:
        empty = bpy.data.objects.new(kind, None)
        bpy.context.scene.collection.objects.link(empty)
        constraint = empty.constraints.new(kind)
        aims = "target" in constraint.bl_rna.properties
        if aims:
            constraint.target = first
        assert bake_dependencies.armatures_read([first, second], [empty]) == ({first} if aims else set()), (
            kind
        )
    mesh = bpy.data.objects.new("mesh", bpy.data.meshes.new("mesh"))
    bpy.context.scene.collection.objects.link(mesh)
    for kind in bpy.types.Modifier.bl_rna.properties["type"].enum_items.keys():
        try:
            modifier = mesh.modifiers.new(kind, kind)
        except (RuntimeError, TypeError):
            continue  # not a mesh modifier
        if modifier is None:
            continue
        read = bake_dependencies.armatures_read([first, second], [mesh])
        assert read == ({first, second} if kind == "NODES" else set()), kind
        mesh.modifiers.remove(modifier)
