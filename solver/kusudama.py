"""Kusudama joint limits: ordered limit cones joined by tangent cones, plus a twist range.

Everything is expressed in the bone's rest frame (Blender's pose-bone local space): the swing
direction of a local rotation Q is Q applied to +Y, so (0, 1, 0) is the rest direction, and the
twist is the rotation about the bone's own axis relative to rest.

Allowed swing region (the EWBIK paper's Kusudama with tangent cones): inside any cone, or, for each consecutive pair
of cones, inside one of the two spherical triangles (A, T, B) spanned with the tangent cones but
outside that tangent cone. Cones and tangent cones are treated alike as "regions" with a centre X,
a radius r and a side: a cone allows the inside, a tangent cone allows the outside of its circle
within its triangle. The closest allowed direction of an outside point p is always the centre of
the nearest region's circle turned toward p by r, so a single arg-min over a padded array of
regions answers every bone of a batch at once with no loop over bones or cones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike

from . import quat
from .validation import MAX_ANGLE, SceneError, mapping, number, vector

if TYPE_CHECKING:
    from .native_limits import NativeLimits

_Y = np.array([0.0, 1.0, 0.0])
_UNIT_TOLERANCE = 1e-4
# Shared with csrc/kusudama.c through ewbik_limits (native_limits.py), so both clamps agree.
INSIDE_TOLERANCE = 1e-9
PLANE_TOLERANCE = 1e-12
COMFORT_RATE = 0.25
COMFORT_DECAY = 0.5
_NEXT = np.array([1, 2, 0])
_AFTER = np.array([2, 0, 1])
_Y_TURN = np.array([[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0], [-1.0, 0.0, 0.0, 0.0], [0.0, -1.0, 0.0, 0.0]])


def _swing_form() -> np.ndarray:
    """(16, 3) matrix M with outer(q, q).reshape(16) @ M = q applied to +Y, for unit q."""
    form = np.zeros((4, 4, 3))
    form[1, 2, 0], form[0, 3, 0] = 2.0, -2.0
    form[[0, 2], [0, 2], 1] = 1.0
    form[[1, 3], [1, 3], 1] = -1.0
    form[2, 3, 2], form[0, 1, 2] = 2.0, 2.0
    return form.reshape(16, 3)


_SWING_FORM = _swing_form()


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cross product over the last axis (np.cross is several times slower on small arrays)."""
    return a[..., _NEXT] * b[..., _AFTER] - a[..., _AFTER] * b[..., _NEXT]


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=-1)


def _unit(v: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return np.where(n > 1e-12, v / np.where(n > 1e-12, n, 1.0), fallback)


def _as_unit(v: np.ndarray) -> np.ndarray:
    """Normalize, but keep vectors that are already unit to rounding bit for bit (idempotence)."""
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return np.where(np.abs(n - 1.0) < 1e-12, v, _unit(v, _Y))


def _angle_between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Accurate angle between unit vectors, also near 0 and pi (atan2 of |a x b| and a . b)."""
    return np.arctan2(np.linalg.norm(_cross(a, b), axis=-1), _dot(a, b))


def _turn_toward(
    centre: np.ndarray, target: np.ndarray, angle: np.ndarray, fallback: np.ndarray
) -> np.ndarray:
    """The point at `angle` from `centre` on the great circle toward `target`.

    When target is (anti)parallel to centre every direction is equally good; `fallback` (a unit
    vector perpendicular to centre) makes the answer finite and deterministic.
    """
    off = target - _dot(target, centre)[..., None] * centre
    off = _unit(off, fallback)
    return np.cos(angle)[..., None] * centre + np.sin(angle)[..., None] * off


@dataclass(frozen=True)
class LimitCone:
    """A cone of allowed swing directions: unit `direction` (bone rest frame), half-angle `radius`.

    Radius 0 allows exactly one direction; radius >= pi allows every direction.
    """

    direction: tuple
    radius: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "direction", _unit_direction(self.direction, "direction"))
        object.__setattr__(self, "radius", number(self.radius, "radius", 0.0, MAX_ANGLE))


@dataclass(frozen=True)
class TwistLimit:
    """Allowed twist about the bone's own axis relative to rest, [min, max] radians."""

    min: float
    max: float

    def __post_init__(self) -> None:
        low = number(self.min, "min", -MAX_ANGLE, MAX_ANGLE)
        high = number(self.max, "max", -MAX_ANGLE, MAX_ANGLE)
        if low > high:
            raise SceneError("min", f"{low:g} is greater than max ({high:g})")
        object.__setattr__(self, "min", low)
        object.__setattr__(self, "max", high)

    @property
    def unlimited(self) -> bool:
        return self.max - self.min >= 2.0 * np.pi


MIN_DIRECTION = 1e-9
"""Shorter cone directions have none: refused by documents and solves, skipped where drawn."""


def cone_direction(direction: ArrayLike) -> np.ndarray | None:
    """A cone direction of any length (Blender's panel stores it so) as a unit vector, or None
    when it has none (not finite, or shorter than MIN_DIRECTION)."""
    v = np.asarray(direction, dtype=float)
    n = float(np.linalg.norm(v))
    return v / n if np.isfinite(n) and n >= MIN_DIRECTION else None


def _unit_direction(value: object, field: str) -> tuple[float, ...]:
    """A unit 3-vector of real numbers (text and booleans are refused), normalized exactly."""
    v = vector(value, 3, field)
    n = float(np.linalg.norm(v))
    if n < MIN_DIRECTION:
        raise SceneError(field, "is a zero vector")
    if abs(n - 1.0) > _UNIT_TOLERANCE:
        raise SceneError(field, f"is not a unit vector (length {n:.6g})")
    return tuple(float(c) for c in v / n)


class Kusudama:
    """Swing limit (ordered cones; consecutive cones bridged by tangent cones) plus optional twist.

    No cones means the swing is free (a twist-only limit). The twist of a rotation whose swing
    direction is d is measured against the swing arc(centre -> d) * arc(+Y -> centre), where the
    centre is a direction inside the allowed region: rest has twist 0, pure hinge motions have
    twist 0, and the decomposition's singular direction (-centre) is as far from the allowed
    region as it can be. `comfort` (0..1, default 0) is a soft limit: see `JointLimits.constrain`.
    """

    def __init__(
        self, cones: Sequence[LimitCone] = (), twist: TwistLimit | None = None, comfort: float = 0.0
    ) -> None:
        self.cones = tuple(cones)
        for i, cone in enumerate(self.cones):
            if not isinstance(cone, LimitCone):
                raise SceneError(f"cones[{i}]", f"must be a LimitCone, got {cone!r}")
        if twist is not None and not isinstance(twist, TwistLimit):
            raise SceneError("twist", f"must be a TwistLimit or None, got {twist!r}")
        self.twist = twist
        self.comfort = number(comfort, "comfort", 0.0, 1.0)
        self._pack = _Packed([self], 1)

    def __repr__(self) -> str:
        return f"Kusudama(cones={self.cones!r}, twist={self.twist!r}, comfort={self.comfort})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Kusudama)
            and self.cones == other.cones
            and self.twist == other.twist
            and self.comfort == other.comfort
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], bone: str = "?", field: str = "limits") -> Kusudama:
        """Build from a scene document's `limits` field.

        Bad input raises SceneError whose field is the path below `field`
        (`limits.cones[0].direction`) and whose reason names the bone.
        """
        try:
            return cls._parse(d)
        except SceneError as error:
            raise SceneError(error.within(field).field, f"{error.reason} (bone '{bone}')") from None

    @classmethod
    def _parse(cls, d: Mapping[str, Any]) -> Kusudama:
        mapping(d, "", {"cones", "twist", "comfort"})
        cones_raw = d.get("cones", [])
        if not isinstance(cones_raw, (list, tuple)):
            raise SceneError("cones", "must be a list of cones")
        cones = []
        for i, raw in enumerate(cones_raw):
            mapping(raw, f"cones[{i}]", {"direction", "radius"})
            for key in ("direction", "radius"):
                if key not in raw:
                    raise SceneError(f"cones[{i}].{key}", "is missing")
            try:
                cones.append(LimitCone(raw["direction"], raw["radius"]))
            except SceneError as error:
                raise error.within(f"cones[{i}]") from None
        twist = None
        if d.get("twist") is not None:
            raw = mapping(d["twist"], "twist", {"min", "max"})
            for key in ("min", "max"):
                if key not in raw:
                    raise SceneError(f"twist.{key}", "is missing")
            try:
                twist = TwistLimit(raw["min"], raw["max"])
            except SceneError as error:
                raise error.within("twist") from None
        return cls(cones, twist, d.get("comfort", 0.0))

    def widened(self, angle: float) -> Kusudama:
        """This limit grown by `angle` radians: each cone's radius, both ends of the twist range."""
        cones = [LimitCone(c.direction, min(c.radius + angle, MAX_ANGLE)) for c in self.cones]
        twist = None
        if self.twist is not None:
            twist = TwistLimit(
                max(self.twist.min - angle, -MAX_ANGLE), min(self.twist.max + angle, MAX_ANGLE)
            )
        return Kusudama(cones, twist, self.comfort)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "cones": [{"direction": list(c.direction), "radius": c.radius} for c in self.cones]
        }
        if self.twist is not None:
            d["twist"] = {"min": self.twist.min, "max": self.twist.max}
        if self.comfort:
            d["comfort"] = self.comfort
        return d

    def allows(self, dirs: ArrayLike) -> np.ndarray:
        """Whether each unit direction (..., 3) lies in the allowed swing region."""
        dirs = np.asarray(dirs, dtype=float)
        flat = _as_unit(dirs.reshape(-1, 3))
        _, inside, _ = self._pack.closest(flat, self._rows(len(flat)))
        return inside.reshape(dirs.shape[:-1])

    def closest_allowed(self, dirs: ArrayLike) -> np.ndarray:
        """Nearest allowed direction (great-circle distance) of each direction (..., 3)."""
        dirs = np.asarray(dirs, dtype=float)
        flat = _as_unit(dirs.reshape(-1, 3))
        out, _, _ = self._pack.closest(flat, self._rows(len(flat)))
        return out.reshape(dirs.shape)

    def _rows(self, count: int) -> _Rows:
        return self._pack.gather(np.zeros(count, dtype=np.intp), cache=False)

    @property
    def centre(self) -> np.ndarray:
        """A unit direction well inside the allowed region (the twist frame's axis)."""
        return self._pack.centre[0].copy()

    def tangent_cones(self) -> tuple[np.ndarray, np.ndarray]:
        """(direction, radius) of the tangent cones actually used (for drawing and tests)."""
        on = self._pack.tangent_on[0]
        return self._pack.tangent_dir[0][on].copy(), self._pack.tangent_radius[0][on].copy()


def _tangents(
    a: np.ndarray, ra: float, b: np.ndarray, rb: float
) -> tuple[float, np.ndarray, np.ndarray, np.ndarray] | None:
    """Tangent cones bridging cones (a, ra) and (b, rb): (t, T1, T2) or None when no bridge.

    No bridge when the cones are nested (one inside the other, identical included) or when
    ra + rb >= pi (the cones overlap so much that the tangent radius would be <= 0).
    """
    t = 0.5 * (np.pi - (ra + rb))
    c = float(np.dot(a, b))
    separation = float(_angle_between(a, b))
    if t <= 0.0 or separation <= abs(ra - rb) + 1e-12:
        return None
    n = _cross(a, b)
    nn = float(np.linalg.norm(n))
    if nn < 1e-9:
        n = quat.perpendicular(a)
        nn = 1.0
    k = np.cos(ra + t)
    base = k * (a - b) / (1.0 - c)
    gamma = np.sqrt(max(0.0, 1.0 - float(np.dot(base, base)))) / nn
    t1 = base - gamma * n
    t2 = base + gamma * n
    return t, t1 / np.linalg.norm(t1), t2 / np.linalg.norm(t2), n / nn


class _Packed:
    """Padded arrays of the regions (cones + tangent cones) and twist frames of many rows.

    Per region the 7x3 matrix `probe` holds, as rows, the centre (dot product with p), the cross
    product matrix of the centre (|p x centre|) and the three triangle planes of a tangent cone
    (zero for a cone), so one batched matrix product answers every test for every region.
    """

    def __init__(self, kusudamas: Sequence[Kusudama], n_rows: int, rows: Iterable[int] | None = None) -> None:
        rows = list(range(len(kusudamas))) if rows is None else list(rows)
        n_cones = max([len(k.cones) for k in kusudamas] + [1])
        n_regions = n_cones + 2 * (n_cones - 1)
        self.centres = np.tile(_Y, (n_rows, n_regions, 1))
        self.radii = np.zeros((n_rows, n_regions))
        self.sign = np.ones((n_rows, n_regions))
        self.planes = np.zeros((n_rows, n_regions, 3, 3))
        self.on = np.zeros((n_rows, n_regions), dtype=bool)
        self.fallback = np.tile([1.0, 0.0, 0.0], (n_rows, n_regions, 1))
        self.swing_on = np.zeros(n_rows, dtype=bool)
        self.tangent_dir = np.zeros((n_rows, 2 * (n_cones - 1), 3))
        self.tangent_radius = np.zeros((n_rows, 2 * (n_cones - 1)))
        self.tangent_on = np.zeros((n_rows, 2 * (n_cones - 1)), dtype=bool)
        self.centre = np.tile(_Y, (n_rows, 1))
        self.twist_on = np.zeros(n_rows, dtype=bool)
        self.twist_frame = np.tile(quat.IDENTITY, (n_rows, 1))
        self.twist_half = np.full(n_rows, np.pi)
        self.comfort = np.zeros(n_rows)
        self._gathered: dict[bytes | None, _Rows] = {}
        fresh = [(row, k) for row, k in zip(rows, kusudamas) if getattr(k, "_pack", None) is None]
        for row, kusudama in fresh:
            self._fill_regions(row, kusudama, n_cones)
        self._build_probe()
        for row, kusudama in fresh:
            self._fill_twist(row, kusudama)
        by_cones: dict[int, list[tuple[int, _Packed]]] = {}
        for row, kusudama in zip(rows, kusudamas):
            if getattr(kusudama, "_pack", None) is not None:
                by_cones.setdefault(len(kusudama.cones), []).append((row, kusudama._pack))
        for k, packed in by_cones.items():
            cone_rows, packs = zip(*packed)
            self._copy_rows(cone_rows, packs, k, n_cones)
        self.any_comfort = bool(np.any(self.comfort > 0.0))

    def _copy_rows(self, rows: ArrayLike, packs: Sequence[_Packed], k: int, n_cones: int) -> None:
        """Rows `rows` from Kusudamas' own one-row packs (`k` cones each), their tangent cones
        moved to where `n_cones` cones put them: packing a skeleton's limits repeats no geometry,
        and the rows of one cone count are copied together."""
        rows = np.array(rows, dtype=int)
        tangents = 2 * max(k - 1, 0)
        regions = np.r_[0:k, n_cones : n_cones + tangents]
        own_regions = np.r_[0:k, k : k + tangents]
        for name in ("centres", "radii", "sign", "planes", "on", "fallback", "probe"):
            own = np.stack([getattr(pack, name)[0] for pack in packs])
            getattr(self, name)[rows[:, None], regions] = own[:, own_regions]
        for name in ("tangent_dir", "tangent_radius", "tangent_on"):
            own = np.stack([getattr(pack, name)[0] for pack in packs])
            getattr(self, name)[rows, :tangents] = own[:, :tangents]
        for name in ("swing_on", "centre", "twist_on", "twist_frame", "twist_half", "comfort"):
            getattr(self, name)[rows] = np.stack([getattr(pack, name)[0] for pack in packs])

    def _fill_regions(self, row: int, kusudama: Kusudama, n_cones: int) -> None:
        cones = kusudama.cones
        for i, cone in enumerate(cones):
            d = np.array(cone.direction)
            self.centres[row, i] = d
            self.radii[row, i] = min(cone.radius, np.pi)
            self.on[row, i] = True
            self.fallback[row, i] = quat.perpendicular(d)
        for i in range(len(cones) - 1):
            a, b = np.array(cones[i].direction), np.array(cones[i + 1].direction)
            bridge = _tangents(a, cones[i].radius, b, cones[i + 1].radius)
            if bridge is None:
                continue
            t, t1, t2, n = bridge
            for side, (tangent, planes) in enumerate(
                (
                    (t1, (_cross(a, t1), _cross(t1, b), -n)),
                    (t2, (_cross(t2, a), _cross(b, t2), n)),
                )
            ):
                j = n_cones + 2 * i + side
                self.centres[row, j] = tangent
                self.radii[row, j] = t
                self.sign[row, j] = -1.0
                self.planes[row, j] = planes
                self.on[row, j] = True
                mid = a + b - np.dot(a + b, tangent) * tangent
                self.fallback[row, j] = _unit(mid, quat.perpendicular(tangent))
                self.tangent_dir[row, 2 * i + side] = tangent
                self.tangent_radius[row, 2 * i + side] = t
                self.tangent_on[row, 2 * i + side] = True
        self.swing_on[row] = bool(cones)

    def _build_probe(self) -> None:
        x, y, z = self.centres[..., 0], self.centres[..., 1], self.centres[..., 2]
        zero = np.zeros_like(x)
        cross_matrix = np.stack(
            (np.stack((zero, -z, y), -1), np.stack((z, zero, -x), -1), np.stack((-y, x, zero), -1)), axis=-2
        )
        self.probe = np.concatenate((self.centres[..., None, :], cross_matrix, self.planes), -2)

    def _fill_twist(self, row: int, kusudama: Kusudama) -> None:
        cones = kusudama.cones
        if cones:
            weights = np.array([c.radius for c in cones]) + 1e-3
            mean = np.sum(weights[:, None] * np.array([c.direction for c in cones]), axis=0)
            mean = _unit(mean, np.array(cones[0].direction))
            centre, _, _ = self.closest(mean[None], self.gather(np.array([row]), cache=False))
            self.centre[row] = centre[0]
        twist = kusudama.twist
        if twist is not None and not twist.unlimited:
            frame = quat.shortest_arc(_Y, self.centre[row])
            middle = quat.from_axis_angle(_Y, 0.5 * (twist.min + twist.max))
            self.twist_on[row] = True
            self.twist_frame[row] = quat.multiply(frame, middle)
            self.twist_half[row] = 0.5 * (twist.max - twist.min)
        self.comfort[row] = kusudama.comfort

    def gather(self, rows: np.ndarray, cache: bool = True) -> _Rows:
        """The arrays of `rows`; cached per distinct row set, since the solver repeats its groups."""
        key = rows.tobytes() if cache else None
        found = self._gathered.get(key)
        if found is None:
            found = _Rows(self, rows)
            if cache and len(self._gathered) < 256:
                self._gathered[key] = found
        return found

    @staticmethod
    def closest(p: np.ndarray, g: _Rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(closest allowed direction, inside, angular distance) for unit directions p (k, 3)."""
        probed = g.probe @ p[:, None, :, None]
        dot = probed[..., 0, 0]
        cross = probed[..., 1:4, 0]
        # numpy's stubs type ufunc.reduce through typing.override, which Python 3.11 lacks.
        ang = np.arctan2(np.sqrt(np.add.reduce(cross * cross, -1)), dot)  # type: ignore[call-overload]
        dist = np.maximum(g.sign * (ang - g.radii), 0.0)
        dist[(np.minimum.reduce(probed[..., 4:, 0], -1) < -PLANE_TOLERANCE) | g.off] = np.inf  # type: ignore[call-overload]
        best = dist.argmin(1)
        k = g.arange
        gap = dist[k, best]
        inside = g.swing_off | (gap <= INSIDE_TOLERANCE)
        if inside.all():
            return p, inside, np.zeros(len(p))
        centre = g.centres[k, best]
        off = p - dot[k, best][:, None] * centre
        norm = np.sqrt(np.add.reduce(off * off, -1))[:, None]  # type: ignore[call-overload]
        off = np.where(norm > 1e-12, off / np.where(norm > 1e-12, norm, 1.0), g.fallback[k, best])
        radius = g.radii[k, best][:, None]
        moved = np.cos(radius) * centre + np.sin(radius) * off
        # A fallback off the centre's plane by rounding would leave `moved` a hair off unit.
        moved /= np.sqrt(np.add.reduce(moved * moved, -1))[:, None]  # type: ignore[call-overload]
        return np.where(inside[:, None], p, moved), inside, np.where(inside, 0.0, gap)

    @staticmethod
    def twist_offset(rotations: np.ndarray, g: _Rows) -> np.ndarray:
        """Twist of each rotation relative to the middle of its range, in [-pi, pi].

        Rows of `g.twist_probe` give the w and y components of (twist frame)^-1 * rotation; with
        the sign of q chosen so that w >= 0 the half angle stays within [-pi/2, pi/2].
        """
        wy = g.twist_probe @ rotations[:, :, None]
        w, y = wy[:, 0, 0], wy[:, 1, 0]
        return 2.0 * np.arctan2(np.where(w < 0.0, -y, y), np.abs(w))


class _Rows:
    """The packed arrays of one set of rows (a batch of bones), gathered once."""

    def __init__(self, pack: _Packed, rows: np.ndarray) -> None:
        self.probe = pack.probe[rows]
        self.centres = pack.centres[rows]
        self.radii = pack.radii[rows]
        self.sign = pack.sign[rows]
        self.off = ~pack.on[rows]
        self.arange = np.arange(len(rows))
        self.fallback = pack.fallback[rows]
        self.swing_off = ~pack.swing_on[rows]
        self.any_swing = not self.swing_off.all()
        self.twist_on = pack.twist_on[rows]
        self.any_twist = bool(self.twist_on.any())
        fw, fx, fy, fz = pack.twist_frame[rows].T
        self.twist_probe = np.stack(
            (np.stack((fw, fx, fy, fz), -1), np.stack((-fy, -fz, fw, fx), -1)), axis=1
        )
        self.twist_half = np.where(self.twist_on, pack.twist_half[rows], np.inf)
        self.comfort = pack.comfort[rows]
        self.any_comfort = bool(np.any(self.comfort > 0.0))
        self.centre = pack.centre[rows]


def _swing_direction(q: np.ndarray) -> np.ndarray:
    """q applied to +Y for a batch of unit quaternions (k, 4): a quadratic form in q."""
    return (q[:, :, None] * q[:, None, :]).reshape(-1, 16) @ _SWING_FORM


def _about_y(rotations: np.ndarray, angles: np.ndarray) -> np.ndarray:
    """rotations * (rotation by `angles` about +Y): turns each bone about its own axis.

    q * (c, 0, s, 0) = c q + s (q @ _Y_TURN), with (q @ _Y_TURN) = (-y, -z, w, x).
    """
    half = 0.5 * angles[:, None]
    return np.cos(half) * rotations + np.sin(half) * (rotations @ _Y_TURN)


def _swing_to(rotations: np.ndarray, current: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Pre-multiply by the shortest arc turning unit direction `current` into `wanted`."""
    arc = np.concatenate((1.0 + np.sum(current * wanted, axis=-1)[:, None], _cross(current, wanted)), axis=1)
    opposite = arc[:, 0] < 1e-9
    if opposite.any():
        arc[opposite] = np.concatenate(
            (np.zeros((int(opposite.sum()), 1)), quat.perpendicular(current[opposite])), axis=1
        )
    arc /= np.sqrt(np.sum(arc * arc, axis=-1))[:, None]
    return quat.multiply(arc, rotations)


class JointLimits:
    """The limits of a whole skeleton, packed for batched constraining inside the solver.

    `kusudamas` maps bone index -> Kusudama; other bones are free.
    """

    _native: NativeLimits  # set on first use by `native_limits.native_limits`

    def __init__(self, kusudamas: Mapping[int, Kusudama], n_bones: int) -> None:
        n_bones = int(n_bones)
        for index, kusudama in kusudamas.items():
            if not 0 <= int(index) < n_bones:
                raise SceneError("limits", f"bone index {index} is out of range (0..{n_bones - 1})")
            if not isinstance(kusudama, Kusudama):
                raise SceneError(f"limits[{index}]", f"must be a Kusudama, got {kusudama!r}")
        self.kusudamas = {int(i): k for i, k in kusudamas.items()}
        self.n_bones = n_bones
        order = sorted(self.kusudamas)
        self._pack = _Packed([self.kusudamas[i] for i in order], n_bones, rows=order)
        self.limited = self._pack.swing_on | self._pack.twist_on
        self._widened: dict[float, JointLimits] = {}
        self._centres: np.ndarray | None = None

    def widened(self, angle: float) -> JointLimits:
        """These limits grown by `angle` radians (every cone's radius and both ends of every twist
        range; cached): where pins win over limits, how far the limits may yield."""
        found = self._widened.get(angle)
        if found is None:
            found = self._widened[angle] = JointLimits(
                {i: k.widened(angle) for i, k in self.kusudamas.items()}, self.n_bones
            )
        return found

    def constrain(self, bones: ArrayLike, rotations: ArrayLike, iteration: int = 0) -> np.ndarray:
        """Bring local rotations (k, 4) of `bones` (k,) back inside their limits (swing, then twist).

        Comfort (soft limit): before the hard clamp each bone's swing direction turns toward the
        centre of its allowed region, and its twist toward the middle of its range, by the
        fraction 0.25 * comfort * 0.5**iteration. The pull is a contraction toward a fixed pose
        whose strength halves every iteration, so its total effect within one solve is bounded
        (at most 0.5 * comfort of the distance to the centre) and the late iterations are the
        plain hard-limit solve: a fixed target problem settles instead of trading pull against
        targets back and forth. Across warm-started calls the same bounded pull acts once per
        call, which gives a steady compromise pose, not an oscillation. The hard clamp comes
        last, so comfort can never push a bone outside its limits.
        """
        rotations = np.asarray(rotations, dtype=float)
        g = self._pack.gather(np.asarray(bones, dtype=np.intp))
        if g.any_comfort:
            rotations = self._comfort(g, rotations, iteration)
        if g.any_swing:
            current = _swing_direction(rotations)
            wanted, inside, _ = _Packed.closest(current, g)
            if not inside.all():
                rotations = _swing_to(rotations, current, wanted)
        if g.any_twist:
            offset = _Packed.twist_offset(rotations, g)
            excess = offset - np.clip(offset, -g.twist_half, g.twist_half)
            if np.any(excess != 0.0):
                rotations = _about_y(rotations, -excess)
        return rotations

    def centres(self) -> np.ndarray:
        """(N, 4) local rotations in the middle of each bone's limits (identity for free bones).

        The swing points at the centre of the allowed region and the twist sits in the middle of
        its range: the pose farthest from every boundary, from which the solver restarts when a
        warm start has wedged a bone against its limits. Computed once (read-only).
        """
        if self._centres is None:
            pack = self._pack
            swing = quat.shortest_arc(np.tile(_Y, (self.n_bones, 1)), pack.centre)
            self._centres = np.where(pack.twist_on[:, None], pack.twist_frame, swing)
            self._centres.flags.writeable = False
        return self._centres

    @staticmethod
    def _comfort(g: _Rows, rotations: np.ndarray, iteration: int) -> np.ndarray:
        fraction = COMFORT_RATE * g.comfort * COMFORT_DECAY ** max(0, int(iteration))
        current = _swing_direction(rotations)
        ang = _angle_between(current, g.centre)
        pulled = _turn_toward(current, g.centre, fraction * ang, quat.perpendicular(current))
        pull = (~g.swing_off & (fraction > 0.0))[:, None]
        rotations = np.where(pull, _swing_to(rotations, current, pulled), rotations)
        offset = np.where(g.twist_on, _Packed.twist_offset(rotations, g), 0.0)
        return _about_y(rotations, -fraction * offset)

    def violation(self, rotations: ArrayLike) -> np.ndarray:
        """Radians by which each bone's local rotation (N, 4) lies outside its limits (0 inside).

        The larger of the swing distance (angle from the swing direction to the allowed region)
        and the twist excess beyond the range.
        """
        rotations = np.asarray(rotations, dtype=float)
        if rotations.shape != (self.n_bones, 4):
            raise SceneError("rotations", f"must have shape ({self.n_bones}, 4), got {rotations.shape}")
        rotations = quat.normalize(rotations)
        g = self._pack.gather(np.arange(self.n_bones))
        _, _, swing = _Packed.closest(_swing_direction(rotations), g)
        offset = _Packed.twist_offset(rotations, g)
        twist = np.maximum(0.0, np.abs(offset) - g.twist_half)
        return np.maximum(swing, twist)
