"""The "EWBIK" sidebar tab of the 3D viewport."""

import bpy

from . import sidebar

CLASSES = sidebar.CLASSES

register, unregister = bpy.utils.register_classes_factory(CLASSES)
