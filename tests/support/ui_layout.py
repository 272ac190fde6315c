"""A stand-in for bpy.types.UILayout: headless Blender has no region to draw panels into.

`draw` runs a panel against `RecordingLayout`, which checks what real UILayouts check (every
property exists on the data it is read from, every operator, menu and UI list is registered and
every operator property it sets exists) and records what was asked for.
"""

import bpy


class OperatorProperties:
    """What `layout.operator()` returns: only the operator's own properties may be set."""

    def __init__(self, idname):
        category, name = idname.split(".")
        operator = getattr(getattr(bpy.ops, category), name)
        self.__dict__["_names"] = set(operator.get_rna_type().properties.keys())
        self.__dict__["_idname"] = idname

    def __setattr__(self, name, value):
        assert name in self._names, f"{self._idname} has no property {name!r}"
        self.__dict__[name] = value


class RecordingLayout:
    """A stand-in for bpy.types.UILayout that validates and records what a draw function asks for."""

    def __init__(self, log):
        self.log = log
        self.use_property_split = False
        self.use_property_decorate = True
        self.active = True
        self.enabled = True

    def _child(self, *args, **kwargs):
        return type(self)(self.log)

    row = column = box = split = column_flow = grid_flow = _child

    def prop(self, data, name, **kwargs):
        assert name in data.bl_rna.properties, f"{data.bl_rna.identifier} has no property {name!r}"
        self.log.append(("prop", name))

    def operator(self, idname, **kwargs):
        assert hasattr(bpy.types, operator_class_name(idname)), f"operator {idname} is not registered"
        self.log.append(("operator", idname))
        return OperatorProperties(idname)

    def menu(self, idname, **kwargs):
        assert hasattr(bpy.types, idname), f"menu {idname} is not registered"
        self.log.append(("menu", idname))

    def template_list(self, list_type, list_id, data, propname, active_data, active_propname, **kwargs):
        assert hasattr(bpy.types, list_type), f"UI list {list_type} is not registered"
        assert propname in data.bl_rna.properties
        assert active_propname in active_data.bl_rna.properties
        self.log.append(("list", list_type))

    def prop_search(self, data, name, search_data, search_name, **kwargs):
        assert name in data.bl_rna.properties and search_name in search_data.bl_rna.properties
        self.log.append(("search", name))

    def label(self, text="", **kwargs):
        self.log.append(("label", text))

    def separator(self, **kwargs):
        pass


def operator_class_name(idname):
    category, name = idname.split(".")
    return f"{category.upper()}_OT_{name}"


def draw(panel_name, method="draw"):
    """Run a panel's draw (or draw_header) with the current context; returns what it asked for."""
    log = []
    panel = getattr(bpy.types, panel_name)
    fake = type("FakePanel", (), {"layout": RecordingLayout(log)})()
    getattr(panel, method)(fake, bpy.context)
    return log
