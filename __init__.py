"""EWBIK for Blender: full-body inverse kinematics with Kusudama joint limits.

The extension root. `solver/` is the bpy-free numpy core; `ewbik_addon/` holds
the Blender glue (properties, armature bridge, live handler, overlay),
`operators/` the user actions and `panels/` the sidebar.
"""

import sys

import bpy

register, _unregister_submodules = bpy.utils.register_submodule_factory(
    __name__, ("ewbik_addon", "operators", "panels")
)


def unregister():
    """Unregister, then forget the submodules: enabled again, the extension imports them afresh,
    so no module keeps a reference to another's state from before (Blender reloads the top
    module only)."""
    _unregister_submodules()
    for name in [name for name in sys.modules if name.startswith(__name__ + ".")]:
        del sys.modules[name]
