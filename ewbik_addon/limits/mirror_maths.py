"""The side-independent rules of mirroring limits, without Blender (see `limit_mirror`).

A partner bone's name is the name flipped by Blender's own rule (passed in: `bpy.utils.flip_name`)
after any namespace such as Mixamo's `mixamorig:`. Limits are carried by a mirror map of rest-frame
directions, and since a mirror reverses turning, the twist range [min, max] becomes [-max, -min].
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def mirror_name(name: str, flip_name: Callable[[str], str]) -> str:
    """The other side's bone name: `flip_name` applied to the part after the last colon."""
    namespace, colon, rest = name.rpartition(":")
    return namespace + colon + flip_name(rest)


def mirrored_limits(
    limits: dict[str, Any], carry: Callable[[Sequence[float]], tuple[float, ...]]
) -> dict[str, Any]:
    """A limits dict as it reads on the mirror-image bone; `carry` maps a unit direction of the
    source's rest frame to the partner's (a tuple)."""
    mirrored: dict[str, Any] = {
        "cones": [
            {"direction": carry(cone["direction"]), "radius": cone["radius"]}
            for cone in limits.get("cones", ())
        ]
    }
    if "twist" in limits:
        mirrored["twist"] = {"min": -limits["twist"]["max"], "max": -limits["twist"]["min"]}
    if "comfort" in limits:
        mirrored["comfort"] = limits["comfort"]
    return mirrored
