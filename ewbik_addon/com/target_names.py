"""How the empties and collections this extension makes are named and marked.

Pin and Unpin, the panels and the live handler tell our empties from the user's by the mark, and
the collection Pin gathers them in by its name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import bpy

TARGET_MARK = "ewbik_pin_of"  # custom property on the empties this extension creates: the armature's name
TARGET_BONE = "ewbik_pin_bone"  # custom property on them: the bone they were made for (their name follows it)
_COLLECTION_PREFIX = "EWBIK Targets "


def target_collection_name(obj: bpy.types.Object) -> str:
    return f"{_COLLECTION_PREFIX}{obj.name}"


def is_targets_collection(collection: bpy.types.Collection) -> bool:
    return collection.name.startswith(_COLLECTION_PREFIX)


def target_name(obj: bpy.types.Object, bone_name: str) -> str:
    return f"{obj.name} {bone_name} target"
