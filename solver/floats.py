"""3-vectors and quaternions as Python floats, for the few-vector work above the loops (a pole's
swivel, a soft limb's bend, the torso's place): there one numpy call costs more than the
arithmetic it does. Vectors are sequences of three floats, quaternions (w, x, y, z)."""

import math
from collections.abc import Sequence


def minus(a: Sequence[float], b: Sequence[float]) -> list[float]:
    return [a[0] - b[0], a[1] - b[1], a[2] - b[2]]


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def cross(a: Sequence[float], b: Sequence[float]) -> list[float]:
    return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]


def across(vector: Sequence[float], axis: Sequence[float], tiny: float) -> list[float] | None:
    """`vector`'s part across the unit `axis`, normalized; None where it is shorter than `tiny`
    times `vector`."""
    along = dot(vector, axis)
    part = [v - along * a for v, a in zip(vector, axis)]
    length = math.sqrt(dot(part, part))
    scale = max(math.sqrt(dot(vector, vector)), 1e-300)
    return None if length < tiny * scale else [a / length for a in part]


def product(
    aw: float, ax: float, ay: float, az: float, bw: float, bx: float, by: float, bz: float
) -> tuple[float, float, float, float]:
    """The unit quaternion (w >= 0, as `quat.normalize`) of the Hamilton product a * b of two
    quaternions given by their components."""
    w = aw * bw - ax * bx - ay * by - az * bz
    x = aw * bx + ax * bw + ay * bz - az * by
    y = aw * by - ax * bz + ay * bw + az * bx
    z = aw * bz + ax * by - ay * bx + az * bw
    scale = (1.0 if w >= 0.0 else -1.0) / math.sqrt(w * w + x * x + y * y + z * z)
    return w * scale, x * scale, y * scale, z * scale


def arc(u: Sequence[float], v: Sequence[float]) -> tuple[float, ...]:
    """The smallest rotation taking direction `u` to direction `v` (neither zero nor opposite)."""
    nu, nv = math.sqrt(dot(u, u)), math.sqrt(dot(v, v))
    u, v = [a / nu for a in u], [a / nv for a in v]
    q = (1.0 + dot(u, v), *cross(u, v))
    n = math.sqrt(sum(c * c for c in q))
    return tuple(c / n for c in q)
