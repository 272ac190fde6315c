# SPDX-License-Identifier: GPL-3.0-or-later
"""EWBIK for Blender: full-body inverse kinematics with Kusudama joint limits.

The extension root. `solver/` is the bpy-free numpy core; `ewbik_addon/` holds
the Blender glue (properties, armature bridge, live handler, overlay),
`operators/` the user actions and `panels/` the sidebar.
"""

import bpy

register, unregister = bpy.utils.register_submodule_factory(__name__, ("ewbik_addon", "operators", "panels"))
