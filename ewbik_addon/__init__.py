"""Blender glue: stored settings, the armature <-> solver bridge, the live handler, the overlay."""

import bpy

register, unregister = bpy.utils.register_submodule_factory(__name__, ("properties", "live", "overlay", "limit_gizmos"))
