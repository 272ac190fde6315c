"""Pins: the targets an animator drags, as small validated value objects."""

from dataclasses import dataclass, field

import numpy as np

from .skeleton import rigid_frame
from .validation import MAX_WEIGHT, SceneError, name, number, vector, weight


@dataclass(frozen=True)
class Pin:
    """A bone's pose matrix should reach `target` (armature space: head position + axes).

    `orientation_weights` weigh the bone's X, Y, Z axes against the target's;
    all zero makes a position-only pin. `falloff` says how much bones above this
    pinned bone still feel pins further down the hierarchy (0 = not at all).
    Bad values raise `SceneError` with the field relative to the pin (`weight`, `target[0][3]`).
    """

    bone: str
    target: np.ndarray
    weight: float = 1.0
    orientation_weights: tuple = (1.0, 1.0, 1.0)
    falloff: float = 0.0
    target_rotation: np.ndarray = field(init=False, repr=False, compare=False)
    target_position: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        bone = name(self.bone, "bone")
        try:
            self._check()
        except SceneError as error:
            raise SceneError(error.field, f"{error.reason} (pin '{bone}')") from None

    def _check(self):
        rotation, position = rigid_frame(self.target, "target")
        object.__setattr__(self, "target_rotation", rotation)
        object.__setattr__(self, "target_position", position)
        object.__setattr__(self, "weight", weight(self.weight, "weight"))
        axes = vector(self.orientation_weights, 3, "orientation_weights", MAX_WEIGHT)
        object.__setattr__(self, "orientation_weights",
                           tuple(weight(w, f"orientation_weights[{k}]") for k, w in enumerate(axes)))
        object.__setattr__(self, "falloff", number(self.falloff, "falloff", 0.0, 1.0))
