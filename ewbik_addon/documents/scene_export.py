"""The armature as a scene document (export, bug reports), read as a solve would read it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...solver import scene
from ..bridge.pin_reading import read_pins
from ..bridge.pose_underneath import start_pose
from ..bridge.rig_cache import rig_for
from ..com.armature_checks import check_armature
from ..com.limit_settings import scene_bones
from ..solve.armature_solve import read_start_pose, solver_settings

if TYPE_CHECKING:
    import bpy


def scene_document(obj: bpy.types.Object) -> dict[str, Any]:
    """The armature as a scene document, version 1 (export, bug reports): its pose is the pose
    underneath (`pose_underneath`), where a solve of it starts, and each bone's stiffness the one
    a solve hands the solver (`Rig.solve_stiffness`: 1 for locked and held bones).

    Every solver setting is written (`solver.scene.scene_settings`), and each bone's `blender`
    field carries what the solver ignores but Blender needs to rebuild and pose the rig the same
    way: rotation mode, rotation and location locks (partly locked bones are held after the
    solve), the connect flag and the bone collections.
    """
    check_armature(obj)
    rig = rig_for(obj, True)
    assert rig.stretch is not None and rig.limit_dicts is not None  # scanned by rig_for
    locks = read_start_pose(obj, rig, False)[2]
    rotations, locations = start_pose(rig)
    stiffness = rig.solve_stiffness(locks)
    rest = {bone["name"]: bone for bone in scene_bones(obj)}
    stretch = rig.stretch[rig.to_solver]
    bones = [
        scene.scene_bone(
            **rest[name],
            rotation=rotations[index],
            location=locations[index],
            stiffness=stiffness[index],
            stretch=stretch[index] if stretch[index] > 1.0 else None,
            limits=rig.limit_dicts.get(name),
            blender=_blender_fields(obj.pose.bones[name]),
        )
        for index, name in enumerate(rig.names)
    ]
    pins = [scene.scene_pin(pin) for pin in read_pins(obj, rig)]
    return scene.scene_document(bones, pins, scene.scene_settings(solver_settings(obj, full=False)))


def _blender_fields(pose_bone: bpy.types.PoseBone) -> dict[str, Any]:
    """A bone's `blender` field of the scene document."""
    bone = pose_bone.bone
    values = {key: getattr(pose_bone, key) for key in scene.POSE_BONE_FIELDS}
    return {
        **{key: value if isinstance(value, (bool, str)) else list(value) for key, value in values.items()},
        "connected": bone.use_connect,
        "collections": [collection.name for collection in bone.collections],
    }
