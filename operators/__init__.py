"""User actions (`bpy.ops.ewbik.*`), one module per job."""

import bpy

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


def register():
    _register_classes()
    limit_handles.register_keymap()


def unregister():
    limit_handles.unregister_keymap()
    _unregister_classes()
