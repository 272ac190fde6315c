"""Input checks shared by the scene parser, the settings, pins, skeletons, limits and `solve`'s
per-bone arrays.

Every refusal is a `SceneError` naming the offending field as a path into the scene document
(`bones[3].limits.cones[0].direction`), so callers and tests tell errors apart by type and field,
and a user reads where to look. The bounds keep every accepted value inside what float64
arithmetic carries through the solver: squared distances times weights, and their squares in the
eigenvalue step, stay far below overflow and above underflow.
"""

import math
import numbers
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np

from .errors import EwbikError
from .stretch import MAX_STRETCH

if TYPE_CHECKING:  # skeleton.py imports this module
    from .skeleton import Skeleton

MAX_COORDINATE = 1e7
"""Largest accepted coordinate, length, target distance or tolerance (armature units)."""
MIN_LENGTH = 1e-6
"""Shortest accepted bone; with MAX_COORDINATE every distance is within 1e13 rig sizes."""
MAX_WEIGHT = 1e6
MIN_WEIGHT = 1e-6
"""Non-zero pin and axis weights lie in [MIN_WEIGHT, MAX_WEIGHT]; 0 switches a pin or an axis off."""
MAX_TIME_BUDGET_MS = 1e9
MAX_ANGLE = 4.0 * math.pi
"""Largest accepted limit angle (cone radius, twist bound) in magnitude, radians."""


class SceneError(EwbikError):
    """Bad solver input. `field` is the path of the offending value, `reason` what is wrong with it;
    an empty field is the document itself."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(field, reason, None if field else f"the document {reason}")

    def within(self, prefix: str) -> "SceneError":
        """The same error with its field seen from an enclosing document (`prefix` + "." + field)."""
        joined = (
            prefix if not self.field else f"{prefix}{'' if self.field.startswith('[') else '.'}{self.field}"
        )
        return SceneError(joined, self.reason)


def is_real(value: object) -> TypeGuard[numbers.Real]:
    """A real number that is not a bool (JSON true/false and Python bools are not numbers here)."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def number(
    value: object,
    field: str,
    low: float = -math.inf,
    high: float = math.inf,
    *,
    open_low: bool = False,
    open_high: bool = False,
) -> float:
    """`value` as a float inside [low, high] (open ends on request); finite always."""
    if not is_real(value):
        raise SceneError(field, f"must be a number, got {_shown(value)}")
    try:
        result = float(value)
    except OverflowError:
        raise SceneError(field, "is too large a number") from None
    if not math.isfinite(result):
        raise SceneError(field, f"must be a finite number, not NaN or infinity ({result})")
    below = result <= low if open_low else result < low
    above = result >= high if open_high else result > high
    if below or above:
        raise SceneError(
            field,
            f"must lie in {'(' if open_low else '['}{_bound(low)}, {_bound(high)}"
            f"{')' if open_high else ']'}, got {result:g}",
        )
    return result


def whole(value: object, field: str, low: int, high: int) -> int:
    """`value` as an int inside [low, high]; whole floats (12.0) count, bools and text do not."""
    if is_real(value) and not isinstance(value, numbers.Integral) and float(value).is_integer():
        value = int(value)  # type: ignore[call-overload]  # numbers.Real declares no __int__; every real here has one
    if not isinstance(value, numbers.Integral) or isinstance(value, (bool, np.bool_)):
        raise SceneError(field, f"must be a whole number, got {_shown(value)}")
    result = int(value)
    if not low <= result <= high:
        raise SceneError(field, f"must be a whole number in [{low}, {high}], got {_shown(value)}")
    return result


def flag(value: object, field: str) -> bool:
    """`value` as a bool; only true and false are accepted."""
    if not isinstance(value, (bool, np.bool_)):
        raise SceneError(field, f"must be true or false, got {_shown(value)}")
    return bool(value)


def weight(value: object, field: str) -> float:
    """A pin or axis weight: 0, or within [MIN_WEIGHT, MAX_WEIGHT]."""
    result = number(value, field, 0.0, MAX_WEIGHT)
    if 0.0 < result < MIN_WEIGHT:
        raise SceneError(field, f"must be 0 or at least {MIN_WEIGHT:g}, got {result:g}")
    return result


def coordinate(value: object, field: str) -> float:
    return number(value, field, -MAX_COORDINATE, MAX_COORDINATE)


def vector(value: object, size: int, field: str, bound: float = MAX_COORDINATE) -> np.ndarray:
    """A list of `size` numbers, each within [-bound, bound], as a float array."""
    fast = _checked_array(value, (size,), bound)
    if fast is not None:
        return fast
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or len(value) != size:
        raise SceneError(field, f"must be a list of {size} numbers, got {_shown(value)}")
    return np.array([number(v, f"{field}[{k}]", -bound, bound) for k, v in enumerate(value)])


def matrix(value: object, field: str) -> np.ndarray:
    """A 4x4 matrix (4 rows of 4 numbers within MAX_COORDINATE) as a float array."""
    fast = _checked_array(value, (4, 4), MAX_COORDINATE)
    if fast is not None:
        return fast
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or len(value) != 4:
        raise SceneError(field, "must be a 4x4 matrix (4 rows of 4 numbers)")
    return np.array([vector(row, 4, f"{field}[{r}]") for r, row in enumerate(value)])


def bone_array(
    skeleton: "Skeleton", values: np.ndarray, shape: tuple[int, ...], field: str, bound: float
) -> np.ndarray:
    """Finite values within [-bound, bound]; fields name the bone in skeleton order (`bones[i].location`)."""
    try:
        arr = np.array(values, dtype=float, order="C")
    except (TypeError, ValueError, OverflowError):
        raise SceneError(field, f"must be an array of numbers of shape {shape}") from None
    if arr.shape != shape:
        raise SceneError(field, f"expected shape {shape}, got {arr.shape}")
    if not np.abs(arr).max() <= bound:  # NaN fails the comparison too
        bad = ~(np.isfinite(arr) & (np.abs(arr) <= bound)).reshape(shape[0], -1).all(-1)
        i = int(np.flatnonzero(bad)[0])
        raise SceneError(
            f"bones[{i}].{field}",
            f"contains NaN, infinity or a value beyond {bound:g} (bone '{skeleton.names[i]}')",
        )
    return arr


def bone_rotations(skeleton: "Skeleton", rotations: np.ndarray) -> np.ndarray:
    """(N, 4) the start pose's rotations as unit quaternions; a zero quaternion is refused, naming the bone."""
    arr = bone_array(skeleton, rotations, (len(skeleton), 4), "rotation", MAX_COORDINATE)
    norm = np.linalg.norm(arr, axis=-1)
    if norm.min() < 1e-9:
        i = int(np.flatnonzero(norm < 1e-9)[0])
        raise SceneError(f"bones[{i}].rotation", f"is a zero quaternion (bone '{skeleton.names[i]}')")
    return arr / norm[:, None]


def bone_stretch(skeleton: "Skeleton", stretch: np.ndarray) -> np.ndarray:
    """(N,) each bone's maximum stretch, within [1, MAX_STRETCH]; SceneError naming the bone otherwise."""
    stretch = bone_array(skeleton, stretch, (len(skeleton),), "stretch", MAX_STRETCH)
    if np.any(stretch < 1.0):
        i = int(np.flatnonzero(stretch < 1.0)[0])
        raise SceneError(
            f"bones[{i}].stretch", f"must lie in [1, {MAX_STRETCH:g}] (bone '{skeleton.names[i]}')"
        )
    return stretch


def _checked_array(value: object, shape: tuple[int, ...], bound: float) -> np.ndarray | None:
    """A float copy of a numeric array that passes every check at once, else None (then the
    element-wise checks find and name the culprit). Solver calls from Blender pass arrays."""
    if not isinstance(value, np.ndarray) or value.shape != shape or value.dtype.kind not in "fiu":
        return None
    copy = value.astype(float)
    return copy if bool((np.abs(copy) <= bound).all()) else None


def name(value: object, field: str) -> str:
    """A non-empty bone name without NUL characters (which would cut the name short in Blender) that
    UTF-8 can write: JSON spells lone surrogates (`"\\ud800"`), which no file or Blender name holds."""
    if not isinstance(value, str) or not value:
        raise SceneError(field, f"must be a non-empty string, got {_shown(value)}")
    if "\0" in value:
        raise SceneError(field, f"contains a NUL character: {_shown(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise SceneError(field, f"is not valid Unicode (a lone surrogate): {ascii(value)[:40]}") from None
    return value


def mapping(value: object, field: str, allowed: Collection[str]) -> Mapping[str, Any]:
    """`value` must be an object whose keys are all in `allowed`; returns it."""
    if not isinstance(value, Mapping):
        raise SceneError(field, f"must be an object, got {_shown(value)}")
    unknown = sorted((k for k in value if k not in allowed), key=str)
    if unknown:
        raise SceneError(f"{field}.{unknown[0]}" if field else str(unknown[0]), "is not a known field")
    return value


def _bound(value: float) -> str:
    if value == math.inf:
        return "inf"
    if value == -math.inf:
        return "-inf"
    return f"{value:g}"


def _shown(value: object, limit: int = 40) -> str:
    """A short repr (a 400-digit integer or a long string would flood a one-line message)."""
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # a 5000-digit integer, a deeply nested list
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
