"""Pins: the targets an animator drags, as small validated value objects."""

import copy
from dataclasses import dataclass, field

import numpy as np

from .skeleton import rigid_frame


@dataclass(frozen=True)
class Pin:
    """A bone's pose matrix should reach `target` (armature space: head position + axes).

    `orientation_weights` weigh the bone's X, Y, Z axes against the target's;
    all zero makes a position-only pin. `falloff` says how much bones above this
    pinned bone still feel pins further down the hierarchy (0 = not at all).
    """

    bone: str
    target: np.ndarray
    weight: float = 1.0
    orientation_weights: tuple = (1.0, 1.0, 1.0)
    falloff: float = 0.0
    target_rotation: np.ndarray = field(init=False, repr=False, compare=False)
    target_position: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        name = f"pin '{self.bone}'"
        rotation, position = rigid_frame(self.target, f"{name}: target")
        object.__setattr__(self, "target_rotation", rotation)
        object.__setattr__(self, "target_position", position)
        weight = float(self.weight)
        if not np.isfinite(weight) or weight < 0:
            raise ValueError(f"{name}: weight must be a finite number >= 0, got {self.weight}")
        ow = np.asarray(self.orientation_weights, dtype=float)
        if ow.shape != (3,) or not np.all(np.isfinite(ow)) or np.any(ow < 0):
            raise ValueError(f"{name}: orientation_weights must be 3 finite numbers >= 0")
        falloff = float(self.falloff)
        if not 0.0 <= falloff <= 1.0:
            raise ValueError(f"{name}: falloff must lie in [0, 1], got {self.falloff}")
        object.__setattr__(self, "weight", weight)
        object.__setattr__(self, "orientation_weights", tuple(ow))
        object.__setattr__(self, "falloff", falloff)

    def moved_to(self, target, rotation, position):
        """This pin with a new target that the caller built rigid: `target` (4, 4) with unit
        quaternion `rotation` and `position` as its frame. Only the target changed, so the
        weights stay validated and the 4x4 is not checked again (the live bridge, every drag)."""
        pin = copy.copy(self)
        object.__setattr__(pin, "target", target)
        object.__setattr__(pin, "target_rotation", rotation)
        object.__setattr__(pin, "target_position", position)
        return pin

    def renamed(self, bone):
        """This pin on another name of the same bone (a crowd's combined skeleton), unvalidated."""
        pin = copy.copy(self)
        object.__setattr__(pin, "bone", bone)
        return pin
