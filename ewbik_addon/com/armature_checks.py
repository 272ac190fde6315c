"""Checks on the armature object itself, shared by everything that reads or poses it."""

from __future__ import annotations

import bpy

from ...solver import EwbikError


class RigError(EwbikError):
    """A problem with the user's rig, pins or what was asked of them; the message is shown to the
    user as is. `field` names the bone, pin, setting or file at fault as the message names it
    ("pin 'hand.L'", "influence")."""

    @classmethod
    def about(cls, name: str, field: str, reason: str) -> RigError:
        """The armature (or other data-block) `name`'s `field` refused, told as a sentence about
        it: "'<name>' <reason>"."""
        return cls(field, reason, f"'{name}' {reason}")

    @classmethod
    def told_after(cls, context: str, error: EwbikError) -> RigError:
        """`error` (any EwbikError) with `context` before its message ("Frame 12: "), its field and
        reason kept: where the glue knows more of where a refusal happened than the refusal does."""
        return cls(error.field, error.reason, f"{context}{error}")


MIN_BONE_LENGTH = 1e-5  # Blender keeps "zero-length" bones at about 2e-6


def check_armature(obj: bpy.types.Object | None) -> None:
    """RigError unless obj is a live armature object with bones (asked as `not bones`: `len` walks
    every bone, 23 us at 1000, and every live update asks several times)."""
    if obj is None:
        raise RigError("armature", "select an armature object", "no armature: select an armature object")
    try:
        kind = obj.type
    except ReferenceError:
        raise RigError("armature", "was deleted", "the armature was deleted") from None
    if kind != "ARMATURE":
        raise RigError.about(obj.name, "type", f"is a {kind.lower()} object, not an armature")
    if obj.pose is None or not obj.pose.bones:
        raise RigError.about(obj.name, "bones", "has no bones")


def limits_lock(obj: bpy.types.Object) -> str | None:
    """Why the joint limits of the armature `obj` cannot be changed, or None. They live on its
    armature's bones (`Bone.ewbik`): an armature linked from a library (an object override keeps
    it linked) holds what the library holds, so an edit would show until the file is saved and
    be gone when it is opened again."""
    data = obj.data
    if data.is_editable:
        return None
    where = (
        f"linked from '{data.library.filepath}'"
        if data.library is not None
        else "a read-only library override"
    )
    return (
        f"'{obj.name}' takes its joint limits from armature '{data.name}', {where}: "
        "change them there, or make the armature an editable library override"
    )


def check_writable(obj: bpy.types.Object) -> None:
    """RigError unless the armature's pose may be written: local or an editable override, not in Edit Mode."""
    check_armature(obj)
    if obj.library is not None:
        raise RigError.about(
            obj.name,
            "library",
            f"is linked from '{obj.library.filepath}' and cannot be posed: make a library override",
        )
    override = obj.override_library
    if (override is not None and override.is_system_override) or not obj.is_editable:
        raise RigError.about(
            obj.name, "override_library", "is a read-only library override: make it editable to pose it"
        )
    if obj.mode == "EDIT":
        raise RigError.about(obj.name, "mode", "is in Edit Mode: leave it first")


def armature_scale(obj: bpy.types.Object) -> float:
    """Scene lengths per armature unit: the object's mean scale (a centimetre rig at 0.01)."""
    return sum(abs(s) for s in obj.matrix_world.to_scale()) / 3.0


def scene_of(obj: bpy.types.Object) -> bpy.types.Scene:
    """The scene whose units the armature's messages speak."""
    return obj.users_scene[0] if obj.users_scene else bpy.context.scene
