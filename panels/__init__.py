"""The "EWBIK" tab of the 3D viewport."""

import bpy

from . import bake, sidebar

CLASSES = sidebar.CLASSES + bake.CLASSES

register, unregister = bpy.utils.register_classes_factory(CLASSES)
