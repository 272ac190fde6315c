"""Blender's default keymaps, to check that the extension's shortcuts take no key Blender uses."""

import os
import sys

import bpy


def default_pose_mode_bindings():
    """(key, shift, ctrl, alt) of every press in Blender's default keymaps that are active in Pose Mode.

    Read from Blender's own keymap data (the headless module has no window, so its live key
    configurations are nearly empty).
    """
    sys.path.append(os.path.join(bpy.utils.system_resource("SCRIPTS"), "presets", "keyconfig", "keymap_data"))
    import blender_default

    active = {"Pose", "3D View", "3D View Generic", "Object Non-modal", "Window", "Screen", "Frames"}
    bindings = set()
    for name, _args, data in blender_default.generate_keymaps(blender_default.Params()):
        if name in active:
            for _idname, event, _props in data["items"]:
                if event.get("value") in {"PRESS", "CLICK"}:
                    modifiers = [
                        bool(event.get(key)) or bool(event.get("any")) for key in ("shift", "ctrl", "alt")
                    ]
                    bindings.add((event["type"], *modifiers))
    return bindings
