"""Blender glue: stored settings, the armature <-> solver modules, the live handler, the overlay,
the limit handles, menu entries and shortcuts."""

import bpy

register, unregister = bpy.utils.register_submodule_factory(
    __name__, ("properties", "live", "overlay", "limit_gizmos", "menus", "keymaps")
)
