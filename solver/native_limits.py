"""The joint limits as the native loop sees them: `ewbik_limits` of solver/csrc/kusudama.h.

A `JointLimits` is packed for C once and the result cached on it, since the solver hands the
same limits to every call. The packed arrays of `_Packed` are copied into C-contiguous float64
and uint8 arrays that the structure keeps alive: the C side holds only raw pointers into them.
"""

import ctypes

import numpy as np

from . import kusudama

_FIELDS = (
    "limited",
    "centres",
    "radii",
    "sign",
    "planes",
    "on",
    "fallback",
    "swing_on",
    "twist_on",
    "twist_frame",
    "twist_half",
    "comfort",
    "centre",
)
_FLAGS = {"limited", "on", "swing_on", "twist_on"}
_CONSTANTS = ("inside_tolerance", "plane_tolerance", "comfort_rate", "comfort_decay")


class NativeLimits(ctypes.Structure):
    """`ewbik_limits`: the region count per bone, then one pointer per packed array."""

    _fields_ = (
        [("n_regions", ctypes.c_int)]
        + [(name, ctypes.c_void_p) for name in _FIELDS]
        + [(name, ctypes.c_double) for name in _CONSTANTS]
    )


def native_limits(limits):
    """The `NativeLimits` of a `JointLimits`, built on first use and cached on it."""
    found = getattr(limits, "_native", None)
    if found is None:
        pack = limits._pack
        arrays = [
            np.array(
                limits.limited if name == "limited" else getattr(pack, name),
                dtype=np.uint8 if name in _FLAGS else np.float64,
                order="C",
            )
            for name in _FIELDS
        ]
        constants = (
            kusudama.INSIDE_TOLERANCE,
            kusudama.PLANE_TOLERANCE,
            kusudama.COMFORT_RATE,
            kusudama.COMFORT_DECAY,
        )
        found = NativeLimits(pack.radii.shape[1], *(a.ctypes.data for a in arrays), *constants)
        found.arrays = arrays
        limits._native = found
    return found
