"""Pictures of the EWBIK sidebar tab as a user sees it, drawn by the panels' own draw code.

Run with a bpy venv's Python: `~/.cache/ewbik/venvs/bpy-5.2/bin/python tools/sidebar_picture.py`.
Headless Blender has no region to draw panels into, so every panel's `poll`, `draw_header` and
`draw` run against `SketchLayout`, a stand-in for `bpy.types.UILayout` that records rows, columns,
properties (with their UI names and values in the units Blender shows), operators and labels; the
recording is then laid out like Blender's sidebar and written as SVG (docs/sidebar_pose.svg:
Pose Mode with a pinned foot active). Any change to the panels shows in the next picture.
"""

import os
import pathlib
import sys
import tempfile

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
USER_RESOURCES = tempfile.mkdtemp(prefix="ewbik-sidebar-user-")
os.environ["BLENDER_USER_RESOURCES"] = USER_RESOURCES  # before bpy: never touch the real config

import math  # noqa: E402
import shutil  # noqa: E402
from xml.sax.saxutils import escape  # noqa: E402

import bpy  # noqa: E402  (first: it makes addon_utils importable)

# isort: split
import addon_utils  # noqa: E402

sys.path.insert(0, str(REPO_ROOT / "tools"))
import build_extension  # noqa: E402

PANELS = ("EWBIK_PT_solver", "EWBIK_PT_pins", "EWBIK_PT_limits", "EWBIK_PT_limits_twist", "EWBIK_PT_bake")
WIDTH = 360
ROW = 22  # height of one widget row, as Blender's at 1x resolution scale
CHAR = 6.4  # mean advance of an 11 px sans-serif character, to cut text that would overflow
GAP = 4
PAD = 10
HEADER_END = 64  # width of the header's right end (draw_header_preset), as a checkbox with a short label
COLOURS = {
    "back": "#303030",
    "panel": "#3d3d3d",
    "header": "#2b2b2b",
    "field": "#545454",
    "button": "#585858",
    "text": "#e6e6e6",
    "dim": "#9a9a9a",
    "check": "#4772b3",
    "list": "#282828",
}
ICON_TEXT = {
    "ADD": "+",
    "REMOVE": "\u2212",
    "TRIA_UP": "\u25b2",
    "TRIA_DOWN": "\u25bc",
    "X": "\u00d7",
    "RESTRICT_SELECT_OFF": "\u2197",
    "ARROW_LEFTRIGHT": "\u21c4",
    "PLAY": "\u25b6",
}


class Widget:
    """One drawn item: kind is "prop", "check", "button", "label", "list" or "vector"."""

    def __init__(self, kind, text="", value="", split=False, lines=1, icon_only=False):
        self.kind, self.text, self.value = kind, text, value
        self.split, self.lines, self.icon_only = split, lines, icon_only


class SketchLayout:
    """Records what a panel's draw asks of its UILayout, in the same nesting."""

    def __init__(self, kind="column", heading=""):
        self.kind, self.heading, self.children = kind, heading, []
        self.use_property_split = False
        self.use_property_decorate = True
        self.active = True
        self.enabled = True

    def _child(self, kind, heading=""):
        child = SketchLayout(kind, heading)
        child.use_property_split = self.use_property_split
        self.children.append(child)
        return child

    def row(self, align=False, heading=""):
        return self._child("row", heading)

    def column(self, align=False, heading=""):
        return self._child("column", heading)

    box = split = column
    grid_flow = column_flow = column

    def prop(self, data, name, text=None, icon="NONE", slider=False, emboss=True, **_):
        self.children.append(property_widget(data, name, text, self.use_property_split))

    def prop_search(self, data, name, search_data, search_name, text=None, **_):
        self.children.append(property_widget(data, name, text, self.use_property_split))

    def operator(self, idname, text=None, icon="NONE", **_):
        category, name = idname.split(".")
        label = getattr(getattr(bpy.ops, category), name).get_rna_type().name if text is None else text
        icon_only = not label
        self.children.append(Widget("button", label or ICON_TEXT.get(icon, "\u2022"), icon_only=icon_only))
        return type("OperatorProperties", (), {})()

    def menu(self, idname, text=None, icon="NONE", **_):
        self.children.append(Widget("button", f"{text or getattr(bpy.types, idname).bl_label} \u25be"))

    def label(self, text="", icon="NONE", **_):
        self.children.append(Widget("label", text))

    def separator(self, **_):
        pass

    def template_list(self, list_type, list_id, data, propname, active_data, active_propname, rows=5, **_):
        items = visible_list_items(list_type, data, propname)
        active = getattr(active_data, active_propname)
        lines = [(text, index == active) for index, text in items]
        self.children.append(Widget("list", value=lines, lines=max(rows, len(lines))))


def visible_list_items(list_type, data, propname):
    """(index, one line of text) per item the UIList shows, drawn by its own draw_item."""
    ui_list = getattr(bpy.types, list_type)
    items = getattr(data, propname)
    fake = type(
        "FakeList", (), {"filter_name": "", "use_filter_sort_alpha": False, "bitflag_filter_item": 1}
    )()
    flags = (
        ui_list.filter_items(fake, bpy.context, data, propname)[0]
        if hasattr(ui_list, "filter_items")
        else None
    )
    shown = []
    for index, item in enumerate(items):
        if flags is not None and not flags[index]:
            continue
        row = SketchLayout("row")
        ui_list.draw_item(fake, bpy.context, row, data, item, 0, None, "", index)
        shown.append((index, "   ".join(text for text in flatten_text(row) if text)))
    return shown


def flatten_text(layout):
    for child in layout.children:
        if isinstance(child, SketchLayout):
            yield from flatten_text(child)
        else:
            yield (
                child.value
                if child.kind == "prop" and not child.text
                else (f"{child.text} {child.value}".strip() if child.kind == "prop" else child.text)
            )


def property_widget(data, name, text, split):
    """A widget showing one RNA property as Blender shows it: UI name, value with its unit."""
    prop = data.bl_rna.properties[name]
    label = prop.name if text is None else text
    value = getattr(data, name)
    if prop.type == "BOOLEAN":
        return Widget("check", label, "\u2713" if value else "", split)
    if prop.type == "FLOAT" and getattr(prop, "array_length", 0):
        return Widget("vector", label, [format_float(prop, v) for v in value], split, lines=len(value))
    return Widget("prop", label, format_value(prop, value), split)


def format_value(prop, value):
    if prop.type == "ENUM":
        return next(item.name for item in prop.enum_items if item.identifier == value)
    if prop.type == "POINTER":
        return value.name if value is not None else ""
    if prop.type == "FLOAT":
        return format_float(prop, value)
    return str(value)


def format_float(prop, value):
    if prop.subtype == "ANGLE":
        return f"{math.degrees(value):.0f}\u00b0"
    if prop.subtype == "DISTANCE":
        return f"{value * 1000.0:g} mm"
    if prop.subtype == "FACTOR":
        return f"{value:.3f}"
    return f"{value:.{min(prop.precision, 3)}f}"


def height(node):
    if isinstance(node, Widget):
        return node.lines * ROW
    sizes = [height(child) for child in node.children] or [0]
    if node.kind == "row":
        return max(sizes)
    return sum(sizes) + GAP * (len(sizes) - 1)


def is_narrow(node):
    """Icon-only buttons, alone or in a column of them, take one row's width (the list's +/- column)."""
    if isinstance(node, Widget):
        return node.icon_only
    return bool(node.children) and all(is_narrow(child) for child in node.children)


def draw_node(svg, node, x, y, width):
    """Append the SVG of a recorded layout node at (x, y); returns its height."""
    if isinstance(node, Widget):
        draw_widget(svg, node, x, y, width)
        return height(node)
    top = y
    if node.heading:
        svg.append(text_svg(x + width * 0.4 - 6, y + 15, node.heading, "end", COLOURS["dim"]))
    if node.kind == "row":
        fixed = [ROW if is_narrow(child) else None for child in node.children]
        free = max(1, fixed.count(None))
        share = (width - sum(f for f in fixed if f) - GAP * (len(fixed) - 1)) / free
        for child, size in zip(node.children, fixed):
            draw_node(svg, child, x, y, size or share)
            x += (size or share) + GAP
        return height(node)
    for child in node.children:
        y += draw_node(svg, child, x, y, width) + GAP
    return max(0, y - top - GAP)


def draw_widget(svg, widget, x, y, width):
    label_width = width * 0.4 if widget.split else 0.0
    if widget.split and widget.kind in {"prop", "vector"}:
        svg.append(text_svg(x + label_width - 6, y + 15, widget.text, "end", COLOURS["dim"]))
    field_x, field_w = x + label_width, width - label_width
    if widget.kind == "label":
        svg.append(text_svg(x + 4, y + 15, widget.text, "start", COLOURS["text"]))
    elif widget.kind == "check":
        svg.append(rect_svg(field_x, y + 4, 14, 14, COLOURS["check" if widget.value else "field"]))
        svg.append(text_svg(field_x + 3, y + 15, widget.value, "start", COLOURS["text"]))
        svg.append(text_svg(field_x + 20, y + 15, widget.text, "start", COLOURS["text"], field_w - 20))
    elif widget.kind == "button":
        svg.append(rect_svg(x, y, width, ROW - 2, COLOURS["button"]))
        svg.append(text_svg(x + width / 2, y + 15, widget.text, "middle", COLOURS["text"], width))
    elif widget.kind == "vector":
        for i, value in enumerate(widget.value):
            svg.append(rect_svg(field_x, y + i * ROW, field_w, ROW - 2, COLOURS["field"]))
            svg.append(
                text_svg(
                    field_x + field_w / 2, y + i * ROW + 15, f"{'XYZ'[i]}  {value}", "middle", COLOURS["text"]
                )
            )
    elif widget.kind == "list":
        svg.append(rect_svg(x, y, width, widget.lines * ROW - 2, COLOURS["list"]))
        for i, (line, active) in enumerate(widget.value):
            if active:
                svg.append(rect_svg(x, y + i * ROW, width, ROW - 2, COLOURS["check"]))
            svg.append(text_svg(x + 6, y + i * ROW + 15, line, "start", COLOURS["text"], width - 8))
    else:
        svg.append(rect_svg(field_x, y, field_w, ROW - 2, COLOURS["field"]))
        shown = (
            widget.value
            if widget.split
            else f"{widget.text}: {widget.value}"
            if widget.text
            else widget.value
        )
        svg.append(text_svg(field_x + field_w / 2, y + 15, shown, "middle", COLOURS["text"], field_w))


def rect_svg(x, y, w, h, fill):
    return f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{h:.1f}" rx="3" fill="{fill}"/>'


def text_svg(x, y, text, anchor, fill, room=None):
    """A text element; cut with an ellipsis to `room` pixels, as Blender clips a field's text."""
    text = str(text)
    if text and room is not None and len(text) * CHAR > room - 8:
        text = text[: max(1, int((room - 8) / CHAR) - 1)] + "…"
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" fill="{fill}">{escape(text)}</text>'


def record_panel(panel_class):
    """(header layout or None, header's right end or None, body layout) of a panel, drawn by its
    own code in the current context."""
    header, header_end = None, None
    if hasattr(panel_class, "draw_header"):
        header = SketchLayout("row")
        panel_class.draw_header(type("FakePanel", (), {"layout": header})(), bpy.context)
    if hasattr(panel_class, "draw_header_preset"):
        header_end = SketchLayout("row")
        panel_class.draw_header_preset(type("FakePanel", (), {"layout": header_end})(), bpy.context)
    body = SketchLayout("column")
    panel_class.draw(type("FakePanel", (), {"layout": body})(), bpy.context)
    return header, header_end, body


def sidebar_svg(panel_names):
    """The SVG of the panels that poll true in the current context, stacked as in the sidebar."""
    svg, y = [], PAD
    for name in panel_names:
        panel_class = getattr(bpy.types, name)
        if not panel_class.poll(bpy.context):
            continue
        header, header_end, body = record_panel(panel_class)
        indent = PAD if getattr(panel_class, "bl_parent_id", "") else 0
        x, width = PAD + indent, WIDTH - 2 * PAD - indent
        svg.append(rect_svg(x, y, width, ROW + 4, COLOURS["header"]))
        title_x = x + 20
        if header is not None and header.children:
            draw_node(svg, header.children[0], x + 18, y + 2, 20)
            title_x += 22
        if header_end is not None and header_end.children:
            draw_node(svg, header_end.children[0], x + width - HEADER_END, y + 2, HEADER_END - 6)
        svg.append(text_svg(x + 6, y + 17, "\u25be", "start", COLOURS["dim"]))
        svg.append(
            f'<text x="{title_x:.1f}" y="{y + 17:.1f}" fill="{COLOURS["text"]}" font-weight="bold">'
            f"{escape(panel_class.bl_label)}</text>"
        )
        y += ROW + 4 + GAP
        body_height = height(body)
        svg.append(rect_svg(x, y - GAP, width, body_height + 2 * PAD, COLOURS["panel"]))
        draw_node(svg, body, x + PAD, y + PAD - GAP, width - 2 * PAD)
        y += body_height + 2 * PAD + GAP
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{y + PAD:.0f}" '
        f'font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="11">'
    )
    return "\n".join([head, rect_svg(0, 0, WIDTH, y + PAD, COLOURS["back"]), *svg, "</svg>\n"])


def install_extension():
    zip_path = build_extension.build(pathlib.Path(USER_RESOURCES) / "dist")
    result = bpy.ops.extensions.package_install_files(
        filepath=str(zip_path), repo="user_default", enable_on_install=True
    )
    if result != {"FINISHED"}:
        raise SystemExit(f"sidebar_picture: installing {zip_path} failed: {result}")
    addon_utils.enable("rigify", default_set=True)


def pose_a_metarig():
    """The Rigify metarig in Pose Mode: hands, feet and head pinned, the feet planted, foot.L active."""
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.object.armature_human_metarig_add()
    rig = bpy.context.object
    bpy.ops.object.mode_set(mode="POSE")
    pinned = ("hand.L", "hand.R", "foot.L", "foot.R", "spine.006")
    select_flag_on_pose_bone = "select" in bpy.types.PoseBone.bl_rna.properties
    for pose_bone in rig.pose.bones:
        (pose_bone if select_flag_on_pose_bone else pose_bone.bone).select = pose_bone.name in pinned
    bpy.ops.ewbik.pin()
    for foot in ("foot.L", "foot.R"):
        rig.pose.bones[foot].ewbik.planted = True
    rig.pose.bones["hand.R"].ewbik.pin_kind = "POSITION"
    rig.data.bones.active = rig.data.bones["foot.L"]
    rig.ewbik.active_pin_index = rig.pose.bones.find("foot.L")
    bpy.context.view_layer.update()
    return rig


def main():
    out = REPO_ROOT / "docs" / "sidebar_pose.svg"
    try:
        install_extension()
        pose_a_metarig()
        out.write_text(sidebar_svg(PANELS), encoding="utf-8")
        print(f"wrote {out.relative_to(REPO_ROOT)}")
    finally:
        shutil.rmtree(USER_RESOURCES, ignore_errors=True)


if __name__ == "__main__":
    main()
    sys.stdout.flush()
    os._exit(0)  # the bpy module can crash while tearing down after Rigify ran
