"""How the empties and collections this extension makes are named and marked.

Pin and Unpin, the panels and the live handler tell our empties from the user's by the mark, and
the collection Pin gathers them in by its name.
"""

TARGET_MARK = "ewbik_pin_of"  # custom property on the empties this extension creates: the armature's name
TARGET_BONE = "ewbik_pin_bone"  # custom property on them: the bone they were made for (their name follows it)
_COLLECTION_PREFIX = "EWBIK Targets "


def target_collection_name(obj):
    return f"{_COLLECTION_PREFIX}{obj.name}"


def is_targets_collection(collection):
    return collection.name.startswith(_COLLECTION_PREFIX)


def target_name(obj, bone_name):
    return f"{obj.name} {bone_name} target"
