"""User actions (`bpy.ops.ewbik.*`), one module per job."""

import bpy

from ..ewbik_addon.ui import keymaps
from . import (
    bake,
    jump,
    limit_copy,
    limit_handles,
    limits,
    limits_from_action,
    pin,
    pin_tools,
    pole,
    rigify,
    scene_io,
    solve,
)

CLASSES = (
    pin.CLASSES
    + pin_tools.CLASSES
    + pole.CLASSES
    + jump.CLASSES
    + solve.CLASSES
    + limits.CLASSES
    + limits_from_action.CLASSES
    + scene_io.CLASSES
    + bake.CLASSES
    + limit_copy.CLASSES
    + limit_handles.CLASSES
    + rigify.CLASSES
)

_register_classes, _unregister_classes = bpy.utils.register_classes_factory(CLASSES)


def register() -> None:
    _register_classes()
    keymaps.add_shortcuts()


def unregister() -> None:
    keymaps.remove_shortcuts()
    _unregister_classes()
