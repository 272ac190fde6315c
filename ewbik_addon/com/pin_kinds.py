"""What each kind of pin holds (`PoseBone.ewbik.pin_kind`): one table that the property, the pin
reader, the status line, the checks of what Blender evaluated and the sidebar all ask.

A kind says whether the bone's head goes to the target's place, whether the bone turns as the
target turns (its axis weights count), and whether an axis of the bone points at the target. A
pin that neither reaches a place nor aims (Rotation Only) takes its place from a solve of the
other pins (`armature_solve`).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class PinKind:
    identifier: str
    name: str
    description: str
    reaches_place: bool
    turns_with_target: bool
    aims: bool = False

    @property
    def placed_by_other_pins(self) -> bool:
        return not (self.reaches_place or self.aims)


PIN_KINDS = (
    PinKind(
        "BOTH",
        "Position & Rotation",
        "The bone reaches the target's place and turns as the target turns",
        reaches_place=True,
        turns_with_target=True,
    ),
    PinKind(
        "POSITION",
        "Position Only",
        "The bone reaches the target's place; its rotation is left to the body",
        reaches_place=True,
        turns_with_target=False,
    ),
    PinKind(
        "ROTATION",
        "Rotation Only",
        "The bone turns as the target turns; where it sits is left to the other pins",
        reaches_place=False,
        turns_with_target=True,
    ),
    PinKind(
        "AIM",
        "Aim",
        "The bone's Aim Axis points at the target; its position is free (a head, eyes, a torch)",
        reaches_place=False,
        turns_with_target=False,
        aims=True,
    ),
)
DEFAULT_PIN_KIND = "BOTH"
AIM_PIN_KIND = next(
    kind.identifier for kind in PIN_KINDS if kind.aims
)  # what an aim in a scene document becomes
_BY_IDENTIFIER = {kind.identifier: kind for kind in PIN_KINDS}


def pin_kind(identifier: str) -> PinKind:
    """The kind a stored `pin_kind` names."""
    return _BY_IDENTIFIER[identifier]


def pin_kind_items() -> tuple[tuple[str, str, str], ...]:
    """The kinds as the items of Blender's enum property."""
    return tuple((kind.identifier, kind.name, kind.description) for kind in PIN_KINDS)
