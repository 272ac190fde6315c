"""The armature as a scene document (export, bug reports), read as a solve would read it."""

from ...solver.scene import POSE_BONE_FIELDS, SETTINGS_FIELDS
from ..bridge.pin_reading import read_pins
from ..bridge.pose_underneath import start_pose
from ..bridge.rig_cache import rig_for
from ..com.armature_checks import check_armature
from ..com.limit_settings import scene_bones
from ..solve.armature_solve import read_start_pose, solver_settings


def scene_document(obj):
    """The armature as a scene document, version 1 (export, bug reports): its pose is the pose
    underneath (`pose_underneath`), where a solve of it starts, and each bone's stiffness the one
    a solve hands the solver (`Rig.solve_stiffness`: 1 for locked and held bones).

    Every solver setting is written (`SETTINGS_FIELDS`), and each bone's `blender` field carries
    what the solver ignores but Blender needs to rebuild and pose the rig the same way: rotation
    mode, rotation and location locks (partly locked bones are held after the solve), the connect
    flag and the bone collections.
    """
    check_armature(obj)
    rig = rig_for(obj, True)
    locks = read_start_pose(obj, rig, False)[2]
    rotations, locations = start_pose(rig)
    stiffness = rig.solve_stiffness(locks)
    rest_bones = {bone["name"]: bone for bone in scene_bones(obj)}
    bones = []
    for index, name in enumerate(rig.names):
        bone = {
            **rest_bones[name],
            "rotation": rotations[index].tolist(),
            "location": locations[index].tolist(),
            "stiffness": float(stiffness[index]),
            "blender": _blender_fields(obj.pose.bones[name]),
        }
        if rig.stretch[rig.to_solver[index]] > 1.0:
            bone["stretch"] = float(rig.stretch[rig.to_solver[index]])
        if name in rig.limit_dicts:
            bone["limits"] = rig.limit_dicts[name]
        bones.append(bone)
    pins = [
        {
            "bone": pin.bone,
            "target": pin.target.tolist(),
            "weight": pin.weight,
            "orientation_weights": list(pin.orientation_weights),
            "falloff": pin.falloff,
            "priority": pin.priority,
            **({} if pin.pole is None else {"pole": pin.pole.tolist()}),
            "aim": pin.aim,
        }
        for pin in read_pins(obj, rig)
    ]
    settings = solver_settings(obj, full=False)
    return {
        "format": "ewbik-scene",
        "version": 1,
        "bones": bones,
        "pins": pins,
        "settings": {field: getattr(settings, field) for field in SETTINGS_FIELDS},
    }


def _blender_fields(pose_bone):
    """A bone's `blender` field of the scene document."""
    bone = pose_bone.bone
    values = {key: getattr(pose_bone, key) for key in POSE_BONE_FIELDS}
    return {
        **{key: value if isinstance(value, (bool, str)) else list(value) for key, value in values.items()},
        "connected": bone.use_connect,
        "collections": [collection.name for collection in bone.collections],
    }
