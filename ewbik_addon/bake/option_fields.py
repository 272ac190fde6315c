"""The bake's options as users meet them: each `BakeOptions` field's label, description, bounds
and command-line flag, written once. The Bake operator's properties (and so the Bake panel) and
the bake command's flags are made from this table; defaults come from `BakeOptions` itself.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from bpy.props import BoolProperty, FloatProperty, IntProperty

from .bake_engine import BakeOptions


@dataclasses.dataclass(frozen=True)
class OptionField:
    name: str  # the BakeOptions field
    label: str
    description: str
    flag: str | None = None  # the bake command's flag; None: the command keeps the default
    metavar: str | None = None
    minimum: float | None = None
    soft_max: float | None = None

    @property
    def default(self) -> Any:
        return _DEFAULTS[self.name]


OPTION_FIELDS = (
    OptionField(
        "step",
        "Step",
        "Solve and key every this many frames (the end frame is always keyed)",
        "--step",
        "N",
        minimum=1,
    ),
    OptionField(
        "keys_only",
        "Only Where Keyed",
        "Solve and key only the frames where the pin targets (or the objects they are parented to) "
        "or the armature have keys; Blender interpolates the frames between",
        "--keys-only",
    ),
    OptionField(
        "tolerance_mm",
        "Tolerance (mm)",
        "Above 0, drop the keys without which every pinned bone stays within this many millimetres "
        "of the frame-by-frame bake, and every bone within the angle tolerance. 0 keeps a key on "
        "every baked frame",
        "--tolerance",
        "MM",
        minimum=0.0,
        soft_max=10.0,
    ),
    OptionField(
        "tolerance_deg",
        "Angle Tolerance (°)",
        "With a tolerance: how far (in degrees) a bone may turn from the frame-by-frame bake",
        "--tolerance-deg",
        "DEG",
        minimum=0.0,
        soft_max=10.0,
    ),
    OptionField(
        "only_selected",
        "Only Selected Bones",
        "Key only the selected bones among those the solver moves",
    ),
    OptionField(
        "replace_range",
        "Replace Keys in Range",
        "Remove the existing keys inside the range on the baked channels; otherwise only keys on "
        "the baked frames are replaced. Keys outside the range are always kept",
    ),
    OptionField(
        "new_action",
        "Into a New Action",
        "Key a copy of the armature's action, which the armature then plays; the action itself "
        "keeps its keys",
        "--new-action",
    ),
    OptionField(
        "disable_live",
        "Turn Off Live Solving",
        "Stop live solving afterwards, so the baked keys play back instead of the pins",
    ),
)
_DEFAULTS = {field.name: field.default for field in dataclasses.fields(BakeOptions)}


def option_properties() -> type:
    """Operator mixin: a property per option field, named as the field, with its default."""

    class BakeOptionProperties:
        pass

    BakeOptionProperties.__annotations__ = {field.name: _property(field) for field in OPTION_FIELDS}
    return BakeOptionProperties


def _property(field: OptionField) -> Any:
    bounds = {
        key: value
        for key, value in (("min", field.minimum), ("soft_max", field.soft_max))
        if value is not None
    }
    if isinstance(field.default, bool):
        return BoolProperty(name=field.label, description=field.description, default=field.default)
    if isinstance(field.default, int):
        return IntProperty(name=field.label, description=field.description, default=field.default, **bounds)
    return FloatProperty(name=field.label, description=field.description, default=field.default, **bounds)


def options_of(owner: Any, frame_start: int, frame_end: int) -> BakeOptions:
    """`BakeOptions` from an object holding every option field by name (the operator), over a range."""
    return BakeOptions(
        frame_start=frame_start,
        frame_end=frame_end,
        **{field.name: getattr(owner, field.name) for field in OPTION_FIELDS},
    )
