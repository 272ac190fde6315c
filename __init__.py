# SPDX-License-Identifier: GPL-3.0-or-later
"""EWBIK for Blender: full-body inverse kinematics with Kusudama joint limits.

The extension root. `solver/` is the bpy-free numpy core; `ewbik_addon/` holds
the Blender glue (properties, armature bridge, live handler, overlay),
`operators/` the user actions and `panels/` the sidebar.
"""

from . import ewbik_addon, operators, panels

_MODULES = (ewbik_addon, operators, panels)


def register():
    for module in _MODULES:
        module.register()


def unregister():
    for module in reversed(_MODULES):
        module.unregister()
