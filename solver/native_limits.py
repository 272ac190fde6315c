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
    "inside_cos",
    "twist_tan",
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


def native_limits(limits: kusudama.JointLimits) -> NativeLimits:
    """The `NativeLimits` of a `JointLimits`, built on first use and cached on it."""
    found = getattr(limits, "_native", None)
    if found is None:
        pack = limits._pack
        values = {"limited": limits.limited, **_sure_inside(pack)}
        arrays = [
            np.array(
                values[name] if name in values else getattr(pack, name),
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


_SURE = 1e-12  # how far inside a bound the quick tests below ask a rotation to be


def _sure_inside(pack: kusudama._Packed) -> dict[str, np.ndarray]:
    """{"inside_cos": (n, R), "twist_tan": (n,)}: bounds that let C tell without an arc tangent
    that a rotation is inside its limits, as the angle tests (`_Packed.closest`, the twist
    offset) would decide, a hair on the safe side of them; near a boundary C measures the angle.

    A cone (sign +1) holds a unit direction whose cosine to its centre is at least
    cos(radius + INSIDE_TOLERANCE); a tangent cone (sign -1) one whose cosine is at most
    cos(radius - INSIDE_TOLERANCE); a twist lies within half its range when the tangent of half
    the twist, |y| / |w|, is at most tan(half / 2).
    """
    bound = pack.radii + pack.sign * kusudama.INSIDE_TOLERANCE
    everywhere = np.where(pack.sign > 0, bound >= np.pi, bound <= 0.0)  # every direction is inside
    cosine = np.cos(np.clip(bound, 0.0, np.pi)) + pack.sign * _SURE
    inside_cos = np.where(everywhere, -2.0 * pack.sign, cosine)
    half = 0.5 * np.asarray(pack.twist_half, dtype=float)
    twist_tan = np.where(
        half < 0.5 * np.pi, np.tan(np.minimum(half, 0.5 * np.pi - 1e-9)) * (1.0 - _SURE), np.inf
    )
    return {"inside_cos": inside_cos, "twist_tan": twist_tan}
