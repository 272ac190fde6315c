"""The empties pins are dragged by: made at the bone's pose, gathered per armature."""

import bpy
import mathutils

TARGET_MARK = "ewbik_pin_of"  # custom property on the empties this extension creates: the armature's name


def target_collection_name(obj):
    return f"EWBIK Targets {obj.name}"


def _target_collection(context, obj):
    """The armature's target collection, created and linked to the scene when missing."""
    name = target_collection_name(obj)
    collection = bpy.data.collections.get(name)
    if collection is None or collection.library is not None:
        collection = bpy.data.collections.new(name)
    if not any(child == collection for child in context.scene.collection.children_recursive):
        context.scene.collection.children.link(collection)
    return collection


def new_target(context, obj, pose_bone):
    """An empty at the bone's current pose (world), sized to the bone, in the armature's collection."""
    world = obj.matrix_world @ pose_bone.matrix
    location, rotation, _ = world.decompose()
    scale = obj.matrix_world.to_scale()
    empty = bpy.data.objects.new(f"{obj.name} {pose_bone.name} target", None)
    empty.empty_display_type = "SPHERE"
    empty.empty_display_size = max(pose_bone.bone.length * max(abs(s) for s in scale) * 0.25, 1e-3)
    empty.matrix_world = mathutils.Matrix.LocRotScale(location, rotation, None)
    empty[TARGET_MARK] = obj.name
    _target_collection(context, obj).objects.link(empty)
    return empty
