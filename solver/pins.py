"""Pins: the targets an animator drags, as small validated value objects."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from .skeleton import rigid_frame
from .validation import MAX_WEIGHT, SceneError, name, number, vector, weight

MAX_PRIORITY = 1e6
AIM_AXES = ("X", "-X", "Y", "-Y", "Z", "-Z")  # a look-at pin's bone axis: which one, which way


@dataclass(frozen=True)
class Pin:
    """A bone's pose matrix should reach `target` (armature space: head position + axes).

    `orientation_weights` weigh the bone's X, Y, Z axes against the target's;
    all zero makes a position-only pin. `falloff` says how much bones above this
    pinned bone still feel pins further down the hierarchy (0 = not at all).
    `priority` settles pins that cannot all be reached: the lowest yields first (`solve`).
    `pole` (a point in armature space, or None) is where the limb above the pinned bone bends
    toward: its middle joint lies in the plane through the limb's root joint, the pinned bone's
    head and the pole (`poles.turn_to_poles`).
    `aim` (one of `AIM_AXES`, or None) makes a look-at pin: that axis of the bone points at the
    target's position, the bone's own position and the target's turn are free and
    `orientation_weights` are not used (`aim.py`).
    Bad values raise `SceneError` with the field relative to the pin (`weight`, `target[0][3]`).
    """

    bone: str
    target: np.ndarray
    weight: float = 1.0
    orientation_weights: tuple = (1.0, 1.0, 1.0)
    falloff: float = 0.0
    priority: float = 0.0
    pole: np.ndarray | None = None
    aim: str | None = None
    target_rotation: np.ndarray = field(init=False, repr=False, compare=False)
    target_position: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        bone = name(self.bone, "bone")
        try:
            self._check()
        except SceneError as error:
            raise SceneError(error.field, f"{error.reason} (pin '{bone}')") from None

    def _check(self) -> None:
        rotation, position = rigid_frame(self.target, "target")
        object.__setattr__(self, "target_rotation", rotation)
        object.__setattr__(self, "target_position", position)
        object.__setattr__(self, "weight", weight(self.weight, "weight"))
        axes = vector(self.orientation_weights, 3, "orientation_weights", MAX_WEIGHT)
        object.__setattr__(
            self,
            "orientation_weights",
            tuple(weight(w, f"orientation_weights[{k}]") for k, w in enumerate(axes)),
        )
        object.__setattr__(self, "falloff", number(self.falloff, "falloff", 0.0, 1.0))
        object.__setattr__(self, "priority", number(self.priority, "priority", -MAX_PRIORITY, MAX_PRIORITY))
        if self.pole is not None:
            object.__setattr__(self, "pole", vector(self.pole, 3, "pole"))
        if self.aim is not None and (not isinstance(self.aim, str) or self.aim not in AIM_AXES):
            raise SceneError("aim", f"expected one of {', '.join(AIM_AXES)} or null, got {self.aim!r}")

    def moved_to(self, target: np.ndarray, rotation: np.ndarray, position: np.ndarray) -> Pin:
        """This pin with a new target that the caller built rigid: `target` (4, 4) with unit
        quaternion `rotation` and `position` as its frame. Only the target changed, so the
        weights stay validated and the 4x4 is not checked again (the live bridge, every drag)."""
        pin = self._copy()
        object.__setattr__(pin, "target", target)
        object.__setattr__(pin, "target_rotation", rotation)
        object.__setattr__(pin, "target_position", position)
        return pin

    def with_pole(self, pole: ArrayLike | None) -> Pin:
        """This pin with another pole (a point, or None), only the pole validated: the live
        bridge, when a pole object moves."""
        pin = self._copy()
        object.__setattr__(pin, "pole", None if pole is None else vector(pole, 3, "pole"))
        return pin

    def renamed(self, bone: str) -> Pin:
        """This pin on another name of the same bone (a crowd's combined skeleton), unvalidated."""
        pin = self._copy()
        object.__setattr__(pin, "bone", bone)
        return pin

    def _copy(self) -> Pin:
        """A shallow copy, made directly: `copy.copy` goes through `__reduce_ex__` and costs four
        times as much, on every pin of every live update."""
        pin = object.__new__(type(self))
        pin.__dict__.update(self.__dict__)
        return pin
