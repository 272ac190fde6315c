"""Blender glue: stored settings, the armature <-> solver bridge, the live handler, the bake, the
overlay and its limit handles, menu entries and shortcuts; one subpackage per concern."""

import importlib

_REGISTERED = (  # in this order; unregistered in reverse
    "ui.properties",
    "com.messages",
    "solve.live",
    "viewport.overlay",
    "viewport.limit_gizmos",
    "ui.menus",
    "ui.keymaps",
)


def _modules():
    return [importlib.import_module(f"{__name__}.{name}") for name in _REGISTERED]


def register():
    for module in _modules():
        module.register()


def unregister():
    for module in reversed(_modules()):
        module.unregister()
