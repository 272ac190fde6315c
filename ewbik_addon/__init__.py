"""Blender glue: stored settings, the armature <-> solver bridge, the live handler, the overlay."""

from . import live, overlay, properties

_MODULES = (properties, live, overlay)


def register():
    for module in _MODULES:
        module.register()


def unregister():
    for module in reversed(_MODULES):
        module.unregister()
