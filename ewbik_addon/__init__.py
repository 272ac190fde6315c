"""Blender glue: stored settings, the armature <-> solver bridge, the live handler, the bake (and its
command line command), the overlay and its limit handles, menu entries and shortcuts; one
subpackage per concern."""

from __future__ import annotations

import importlib
from types import ModuleType

_REGISTERED = (  # in this order; unregistered in reverse
    "ui.properties",
    "com.messages",
    "solve.live",
    "bake.batch",
    "viewport.overlay",
    "viewport.limit_gizmos",
    "ui.menus",
    "ui.keymaps",
)


def _modules() -> list[ModuleType]:
    return [importlib.import_module(f"{__name__}.{name}") for name in _REGISTERED]


def register() -> None:
    for module in _modules():
        module.register()


def unregister() -> None:
    for module in reversed(_modules()):
        module.unregister()
