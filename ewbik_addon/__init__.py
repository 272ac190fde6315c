"""Blender glue: stored settings, the armature <-> solver bridge, the live handler, the overlay,
menu entries and shortcuts."""

import bpy

register, unregister = bpy.utils.register_submodule_factory(
    __name__, ("properties", "live", "overlay", "menus", "keymaps")
)
