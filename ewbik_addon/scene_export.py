"""The armature as a scene document (export, bug reports), read as a solve would read it."""

from .armature_checks import check_armature
from .armature_solve import solver_settings
from .limit_settings import scene_bones
from .pin_reading import read_pins
from .pose_io import read_pose
from .properties import STORED_SETTINGS
from .rig_cache import rig_for


def scene_document(obj):
    """The armature as an INTERFACE.md scene document, version 1 (export, bug reports)."""
    check_armature(obj)
    rig = rig_for(obj, True)
    rotations, locations, locks = read_pose(obj, rig)
    stiffness = rig.stiffness[rig.to_solver].copy()
    stiffness[locks.fully_locked] = 1.0
    rest_bones = {bone["name"]: bone for bone in scene_bones(obj)}
    bones = []
    for index, name in enumerate(rig.names):
        bone = {
            **rest_bones[name],
            "rotation": rotations[index].tolist(),
            "location": locations[index].tolist(),
            "stiffness": float(stiffness[index]),
        }
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
        }
        for pin in read_pins(obj, rig)
    ]
    settings = solver_settings(obj, full=False)
    return {
        "format": "ewbik-scene",
        "version": 1,
        "bones": bones,
        "pins": pins,
        "settings": {name: getattr(settings, name) for name in STORED_SETTINGS},
    }
