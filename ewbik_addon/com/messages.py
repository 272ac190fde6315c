"""Words and numbers in what the extension tells the user: counts with the right plural, distances
in the scene's length unit (as Blender's fields show them), angles in degrees, never scientific
notation; and `ewbik.report_problem`, which shows a problem of live solving in the status bar.

The live handler cannot report (it is not an operator); its timer calls `ewbik.report_problem`
once per new error, so a user with the sidebar closed still learns why the body stopped
following. Blender shows the reports of an operator run from Python in the interface only when
the operator goes modal, so its `invoke` reports, waits for the next event and finishes; its
`execute` (no window: background runs) reports to the terminal. `report_problem` picks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import bpy
from bpy.props import StringProperty

_LENGTH_UNITS = {  # scene length_unit -> (metres per unit, symbol)
    "KILOMETERS": (1000.0, "km"),
    "METERS": (1.0, "m"),
    "CENTIMETERS": (0.01, "cm"),
    "MILLIMETERS": (0.001, "mm"),
    "MICROMETERS": (1e-6, "µm"),
    "MILES": (1609.344, "mi"),
    "FEET": (0.3048, "'"),
    "INCHES": (0.0254, '"'),
    "THOU": (2.54e-5, "thou"),
}
SIGNIFICANT_DIGITS = 3
MAX_DECIMALS = 5  # as Blender's length fields: 0.00001 m, 0.01 mm; anything smaller reads as 0
ANGLE_DECIMALS = 2
SMALL_METRIC = 0.01  # metres: shorter distances read in millimetres when the unit is m or km


def count(n: int, noun: str, plural: str | None = None) -> str:
    """'1 pin', '2 pins', '0 bones'."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def plain_number(value: float, max_decimals: int = MAX_DECIMALS) -> str:
    """A number with three significant digits, at most max_decimals, in positional notation
    ('0.00012', '1230')."""
    if not math.isfinite(value):
        return "infinite" if math.isinf(value) else "not a number"
    if value == 0.0:
        return "0"
    decimals = SIGNIFICANT_DIGITS - 1 - math.floor(math.log10(abs(value)))
    text = f"{value:.{min(max(decimals, 0), max_decimals)}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def distance(scene: bpy.types.Scene, value: float) -> str:
    """A scene distance (Blender units) as the scene's unit settings show lengths: '19 cm', '0.19 m';
    in metres or kilometres, a distance under a centimetre in millimetres ('0.02 mm', not
    '0.00002 m' or '0 m'), as the gaps pins leave are read."""
    units = scene.unit_settings
    if units.system == "NONE" or not math.isfinite(value):
        return plain_number(value)
    metres = value * units.scale_length
    fixed = _LENGTH_UNITS.get(units.length_unit)
    if fixed is None:  # ADAPTIVE: Blender picks the unit
        return bpy.utils.units.to_string(units.system, "LENGTH", metres, precision=SIGNIFICANT_DIGITS)
    if units.system == "METRIC" and fixed[0] >= 1.0 and abs(metres) < SMALL_METRIC:
        fixed = _LENGTH_UNITS["MILLIMETERS"]
    per_unit, symbol = fixed
    text = plain_number(metres / per_unit)
    return f"{text}{symbol}" if symbol in ("'", '"') else f"{text} {symbol}"


def degrees(radians: float) -> str:
    """An angle as the panels show it: '12.5°'."""
    return f"{plain_number(math.degrees(radians), ANGLE_DECIMALS)}°"


def deleted_targets(bones: Sequence[str]) -> str:
    """What the user reads about pins whose target was deleted (they are no longer pinned), in one
    wording wherever a solve, a scan or the live handler notices it."""
    names = ", ".join(f"'{bone}'" for bone in bones)
    those = "that bone is" if len(bones) == 1 else "those bones are"
    return f"The target of {count(len(bones), 'pin')} ({names}) was deleted: {those} no longer pinned"


def report_problem(message: str) -> None:
    """Report an error through `ewbik.report_problem` in the first window, where the interface
    shows it (status bar, Info log); without a window (background) it is printed."""
    window_manager = bpy.context.window_manager
    windows = list(window_manager.windows) if window_manager is not None else []
    try:
        if windows:
            with bpy.context.temp_override(window=windows[0]):
                bpy.ops.ewbik.report_problem("INVOKE_DEFAULT", message=message)
        else:
            bpy.ops.ewbik.report_problem(message=message)
    except RuntimeError:
        pass  # an ERROR report raises in its Python caller once shown: nothing more to do


class EWBIK_OT_report_problem(bpy.types.Operator):
    """Show a live-solving problem in the status bar"""

    bl_idname = "ewbik.report_problem"
    bl_label = "Report EWBIK Problem"
    bl_options = {"INTERNAL"}

    message: StringProperty(name="Message", options={"SKIP_SAVE"})

    def execute(self, context: bpy.types.Context) -> set[str]:
        self.report({"ERROR"}, self.message)
        return {"FINISHED"}

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        self.report({"ERROR"}, self.message)
        context.window_manager.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def modal(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        return {"FINISHED", "PASS_THROUGH"}


def register() -> None:
    bpy.utils.register_class(EWBIK_OT_report_problem)


def unregister() -> None:
    bpy.utils.unregister_class(EWBIK_OT_report_problem)
