"""User actions (`bpy.ops.ewbik.*`), one module per job."""

import bpy

from . import bake, jump, limits, limits_from_action, pin, pin_tools, scene_io, solve

CLASSES = (
    pin.CLASSES + pin_tools.CLASSES + jump.CLASSES + solve.CLASSES + limits.CLASSES + limits_from_action.CLASSES
    + scene_io.CLASSES + bake.CLASSES
)

register, unregister = bpy.utils.register_classes_factory(CLASSES)
