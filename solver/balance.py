"""Balance (`SolverSettings.balance`): the body's centre of mass kept over its feet.

A standing person whose hand reaches forward pushes the hips back, so the centre of mass stays
over the feet. The loops only meet pins, so balance is a fixed point above them, like aim pins
(`aim.py`): solve; when the centre of mass's ground projection lies outside the support polygon
(the convex hull of the planted feet's contact points), hold the translating root's head at a
point shifted horizontally toward the polygon and solve again, a few rounds. Every round is a
deterministic solve of the inputs, so the answer stays a function of the targets, the settings
and the start pose; the user's pins stay exact (a round that misses them is dropped).

Segment masses are fractions of the body's mass by body role, from Winter's table of
Dempster's cadaver data (docs/balance.md); bones with no role take the segment of their nearest
ancestor with one, and a segment's mass is shared by its bones by length.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from . import native, quat
from .loop import pin_arrays
from .validation import SceneError, vector

if TYPE_CHECKING:
    from .pins import Pin
    from .settings import SolverSettings
    from .skeleton import Skeleton
    from .solve import SolveResult, _Solving

# Share of the body's mass per segment (Winter 2009, Table 4.1, after Dempster 1955).
SEGMENT_MASS = {
    "head_neck": 0.081,
    "trunk": 0.497,
    "upper_arm": 0.028,
    "forearm": 0.016,
    "hand": 0.006,
    "thigh": 0.100,
    "shank": 0.0465,
    "foot": 0.0145,
}
_SEGMENT_OF_ROLE = {
    "head": "head_neck",
    "neck": "head_neck",
    "hips": "trunk",
    "spine": "trunk",
    "chest": "trunk",
    "clavicle": "trunk",
    "pelvis_side": "trunk",
    "upper_arm": "upper_arm",
    "upper_arm_twist": "upper_arm",
    "forearm": "forearm",
    "forearm_twist": "forearm",
    "thigh": "thigh",
    "thigh_twist": "thigh",
    "shin": "shank",
    "shin_twist": "shank",
    "foot": "foot",
    "toes": "foot",
}  # every other role (wrist, palm, fingers, thumbs) is part of the hand
_CENTRAL = ("head_neck", "trunk")  # one segment for the body, sided roles (clavicles) included
BALANCE_ROUNDS = 6  # at most this many re-solves with the root shifted
ROUND_ITERATIONS = 12  # a round's iterations at most (a round that needs more has its root out of reach)
MARGIN = 0.03  # the rounds aim the centre of mass this far (x the rig's size) inside the polygon
SETTLED = 0.01  # this far (x the rig's size) inside, no round is needed (or ends the rounds)
PLANTED = 0.05  # feet whose lowest contact lies this close (x the rig's size) to the lowest one support
HEEL = 0.25  # the heel lies behind the ankle by this share of the foot bone (ankle to ball), an estimate
FOOT_WIDTH = 0.5  # the foot's breadth at the heel and the ball, a share of the foot bone, an estimate
_GAIN_RANGE = (0.2, 1.5)  # how far the centre of mass may be taken to follow the root, per unit
_REACH_SHARE = 0.98  # a round takes the root at most this share of the way to a pin's reach
_REACH_BOUND = 0.25  # a step cut below this share (squared) of its length by the pins' reach is the last


@dataclasses.dataclass(frozen=True)
class Body:
    """What balance needs of a skeleton: `masses` (N,) per bone (any scale), `feet` {bone name:
    (K, 3) ground contact points in that bone's frame (head at 0, the bone along +Y)}, `up` (3,)
    the ground's normal in armature space, and `centres` (N, 3) where each bone's mass lies in
    its frame (None: at its middle)."""

    masses: np.ndarray
    feet: dict
    up: np.ndarray = dataclasses.field(default_factory=lambda: np.array([0.0, 0.0, 1.0]))
    centres: np.ndarray | None = None
    _support: tuple[tuple, Support | None] | None = dataclasses.field(init=False, repr=False, compare=False)
    _pinned: dict = dataclasses.field(init=False, repr=False, compare=False)
    _shares: dict = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        masses = np.asarray(self.masses, dtype=float)
        if masses.ndim != 1 or not np.isfinite(masses).all() or (masses < 0).any() or not masses.sum() > 0:
            raise SceneError("body.masses", "must be finite, not negative, and not all zero")
        up = vector(self.up, 3, "body.up")
        if not np.linalg.norm(up) > 0:
            raise SceneError("body.up", "must not be zero")
        feet = {}
        for bone, points in self.feet.items():
            points = np.asarray(points, dtype=float).reshape(-1, 3)
            if not np.isfinite(points).all():
                raise SceneError(f"body.feet.{bone}", "must be finite points")
            feet[bone] = points
        if self.centres is not None:
            centres = np.asarray(self.centres, dtype=float)
            if centres.shape != (len(masses), 3) or not np.isfinite(centres).all():
                raise SceneError("body.centres", "must be one finite point per mass")
            object.__setattr__(self, "centres", centres)
        object.__setattr__(self, "masses", masses)
        object.__setattr__(self, "up", up / np.linalg.norm(up))
        object.__setattr__(self, "feet", feet)
        object.__setattr__(self, "_support", None)  # (feet pins' targets, unit, Support): `support_of`
        object.__setattr__(self, "_pinned", {})  # `pinned_feet`
        object.__setattr__(self, "_shares", {})  # `following_share`

    def pinned_feet(self, pins: Sequence[Pin]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """((F,) intc the places among `pins` of those that hold a foot (aim pins do not), (F,)
        intc contact points a foot, (sum, 3) the points in the feet's frames) for the compiled
        support polygon; None when no foot is pinned. Kept per pinned bones (a drag pins the
        same ones)."""
        key = tuple((pin.bone, pin.aim is None) for pin in pins)
        if key not in self._pinned:
            feet = [k for k, (bone, holds) in enumerate(key) if holds and bone in self.feet]
            self._pinned[key] = (
                (
                    np.array(feet, dtype=np.intc),
                    np.array([len(self.feet[key[k][0]]) for k in feet], dtype=np.intc),
                    np.vstack([self.feet[key[k][0]] for k in feet]),
                )
                if feet
                else None
            )
        return self._pinned[key]

    def following_share(self, skeleton: Skeleton, bones: tuple[str, ...], root: int) -> float:
        """`following_share` of pins on `bones` (names) with the free `root`, kept per
        skeleton, pinned bones and root (a drag asks again every update)."""
        key = (skeleton, bones, root)
        found = self._shares.get(key)
        if found is None:
            pinned = sorted({skeleton.index[bone] for bone in bones})
            found = self._shares[key] = following_share(skeleton, pinned, self, root)
        return found

    def centres_in(self, skeleton: Skeleton) -> np.ndarray:
        """(N, 3) each bone's mass centre in its frame (the middle where `centres` is None)."""
        if self.centres is not None:
            return self.centres
        centres = np.zeros((len(skeleton), 3))
        centres[:, 1] = skeleton.lengths * 0.5
        return centres

    def within(
        self,
        whole: Skeleton,
        part: Skeleton,
        rotations: np.ndarray | None = None,
        locations: np.ndarray | None = None,
    ) -> Body:
        """This body (of skeleton `whole`) for `part`, a skeleton of some of its bones (the
        pinned chains): each bone's mass carried by its nearest ancestor in `part`, at the place
        the local pose `rotations`, `locations` (`whole` order) holds it in that ancestor's frame
        (the solve turns no bone off the chains, so it stays there; None: the rest pose)."""
        if rotations is None or locations is None:
            rotations = np.tile(quat.IDENTITY, (len(whole), 1))
            locations = np.zeros((len(whole), 3))
        axes, heads = whole.frames(rotations, locations)
        points = heads + np.einsum("nij,nj->ni", axes, self.centres_in(whole))
        masses, moments = np.zeros(len(part)), np.zeros((len(part), 3))
        for i, mass in enumerate(self.masses):
            bone = next((b for b in whole.ancestors(i) if whole.names[b] in part.index), None)
            if bone is not None and mass > 0:
                k = part.index[whole.names[bone]]
                masses[k] += mass
                moments[k] += mass * (points[i] - heads[bone]) @ axes[bone]
        feet = {bone: points for bone, points in self.feet.items() if bone in part.index}
        if not masses.sum() > 0:
            return Body(np.ones(len(part)), feet, self.up)
        centres = np.zeros((len(part), 3))
        centres[:, 1] = part.lengths * 0.5
        held = masses > 0
        centres[held] = moments[held] / masses[held, None]
        return Body(masses, feet, self.up, centres)


def body_of(skeleton: Skeleton, roles: Mapping[str, str], up: ArrayLike = (0.0, 0.0, 1.0)) -> Body:
    """The Body of `skeleton` whose bones have `roles` ({bone name: role}, `presets.bone_roles`):
    masses from `SEGMENT_MASS`, feet the foot bones with contact points at their heads, heels and
    tails and the tails of the toe bones under them (at rest; `up` says which way is across)."""
    up = np.asarray(up, dtype=float)
    return Body(bone_masses(skeleton, roles), _feet(skeleton, roles, up), up)


def bone_masses(skeleton: Skeleton, roles: Mapping[str, str]) -> np.ndarray:
    """(N,) share of the body's mass per bone: each segment's share split over its bones by
    length; bones without a role belong to the nearest ancestor's segment; by length alone when
    no bone has a role."""
    segments: list[tuple[str, str] | None] = [None] * len(skeleton)
    for i in range(len(skeleton)):  # parents first
        role = roles.get(skeleton.names[i])
        parent = skeleton.parents[i]
        segments[i] = _segment(role) if role else (segments[parent] if parent >= 0 else None)
    if not any(segments):
        return skeleton.lengths / skeleton.lengths.sum()
    masses = np.zeros(len(skeleton))
    for segment in {s for s in segments if s is not None}:
        members = np.array([s == segment for s in segments])
        lengths = skeleton.lengths[members]
        masses[members] = SEGMENT_MASS[segment[0]] * lengths / lengths.sum()
    return masses / masses.sum()


def _segment(role: str) -> tuple[str, str]:
    """(segment, side) of a role ("forearm.L" -> ("forearm", "L"), "clavicle.L" -> ("trunk", ""))."""
    base, _, side = role.partition(".")
    segment = _SEGMENT_OF_ROLE.get(base, "hand")
    return segment, "" if segment in _CENTRAL else side


def _feet(skeleton: Skeleton, roles: Mapping[str, str], up: np.ndarray) -> dict[str, np.ndarray]:
    """{foot bone: (K, 3) contact points in its frame}: its head (the ankle), the heel behind it
    (`HEEL`) and its tail, these two `FOOT_WIDTH` wide across the foot (a foot has a breadth: the
    polygon of one planted foot has an inside), and the tails of the toe bones below it, at rest."""
    feet = {}
    tails = skeleton.rest_head + skeleton.rest[:, :3, 1] * skeleton.lengths[:, None]
    for i, bone in enumerate(skeleton.names):
        if roles.get(bone, "").partition(".")[0] != "foot":
            continue
        toes = [t for t in range(len(skeleton)) if skeleton.parents[t] == i]
        toes = [t for t in toes if roles.get(skeleton.names[t], "").startswith("toes")]
        along = tails[i] - skeleton.rest_head[i]
        heel = skeleton.rest_head[i] - HEEL * along
        across = np.cross(along, up)
        if not np.linalg.norm(across) > 0:  # a foot bone along the up axis: across its own X
            across = skeleton.rest[i, :3, 0]
        across = across * (0.5 * FOOT_WIDTH * np.linalg.norm(along) / np.linalg.norm(across))
        points = np.vstack([skeleton.rest_head[i], heel + across, heel - across, tails[i] + across])
        points = np.vstack([points, tails[i] - across, tails[toes]])
        feet[bone] = (points - skeleton.rest_head[i]) @ skeleton.rest[i, :3, :3]
    return feet


def centre_of_mass(masses: np.ndarray, heads: np.ndarray, tails: np.ndarray) -> np.ndarray:
    """The centre of mass of bones weighing `masses` (N,) each at the middle of its `heads` and
    `tails` (N, 3): the overlay's measure of the pose Blender shows."""
    return masses @ ((heads + tails) * 0.5) / masses.sum()


def pose_centre_of_mass(
    skeleton: Skeleton, body: Body, rotations: np.ndarray, locations: np.ndarray
) -> np.ndarray:
    """The centre of mass of `skeleton` in a local pose."""
    return _pose_centre(skeleton, body, body.centres_in(skeleton), rotations, locations, 0)[0]


def _pose_centre(
    skeleton: Skeleton,
    body: Body,
    centres: np.ndarray,
    rotations: np.ndarray,
    locations: np.ndarray,
    bone: int,
) -> tuple[np.ndarray, np.ndarray]:
    """(the centre of mass (3,), the head (3,) of `bone`) of a local pose, the bones' mass centres
    at `centres` (`Body.centres_in`)."""
    world, heads = skeleton.frames(rotations, locations)
    return _centre_of_mass(body, centres, world, heads), heads[bone]


def _balance_state(
    skeleton: Skeleton,
    body: Body,
    centres: np.ndarray,
    pins: Sequence[Pin],
    ground: tuple[np.ndarray, ...],
    pose: SolveResult,
    root: int,
) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """(the centre of mass (3,), the head (3,) of `root`, the centre's depth in the support
    polygon of the feet `ground` (`_ground_inputs`), its shift (3,) toward `MARGIN` inside) of a
    solve's pose: what each round asks, in one compiled call where the library is built
    (`native.balance_check`: the polygon costs less made again than looked up)."""
    unit = skeleton.unit
    found = native.balance_check(
        skeleton,
        pose.rotations,
        pose.locations,
        body.masses,
        centres,
        root,
        ground,
        PLANTED * unit,
        MARGIN * unit,
    )
    if found is not None:
        return found
    support = support_of(pins, body, unit)
    assert support is not None  # `ground` holds a foot
    com, head = _pose_centre(skeleton, body, centres, pose.rotations, pose.locations, root)
    return (com, head, *support.depth_and_shift(com, MARGIN * unit))


def _centre_of_mass(body: Body, centres: np.ndarray, world: np.ndarray, heads: np.ndarray) -> np.ndarray:
    """The centre of mass of bones whose frames are `world` (N, 3, 3) and `heads` (N, 3)."""
    return body.masses @ (heads + np.einsum("nij,nj->ni", world, centres)) / body.masses.sum()


@dataclasses.dataclass(frozen=True)
class Support:
    """The support polygon: `corners` (M, 3) on the ground (armature space, at the height of the
    lowest contact), counter-clockwise seen from above; `axes` (2, 3) the ground's directions.
    Its corners along the ground (`_flat`) are kept for depths and shifts, on Python floats
    (`_Lines`: a polygon has a dozen corners, too few for numpy to pay); a live solve asks the
    compiled library instead where it is built (`_balance_state`)."""

    corners: np.ndarray
    axes: np.ndarray
    up: np.ndarray
    _flat: np.ndarray = dataclasses.field(init=False, repr=False, compare=False)
    _lines: _Lines | None = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        axes = np.ascontiguousarray(self.axes, dtype=float)
        object.__setattr__(self, "axes", axes)
        object.__setattr__(
            self, "_flat", np.ascontiguousarray(np.asarray(self.corners) @ axes.T).reshape(-1, 2)
        )
        object.__setattr__(self, "_lines", None)

    @classmethod
    def on_ground(cls, flat: np.ndarray, frame: np.ndarray, floor: float) -> Support:
        """The Support whose corners are `flat` (M, 2) along the ground's `frame` (`_ground_frame`)
        at the height `floor`."""
        support = object.__new__(cls)
        for name, value in (
            ("corners", flat @ frame[:2] + frame[2] * floor),
            ("axes", frame[:2]),
            ("up", frame[2]),
            ("_flat", np.ascontiguousarray(flat)),
            ("_lines", None),
        ):
            object.__setattr__(support, name, value)
        return support

    def depth(self, point: np.ndarray) -> float:
        """How far `point`'s ground projection lies inside the polygon (negative: outside by
        that much; a polygon of one or two corners has no inside)."""
        return self.depth_and_shift(point, -math.inf)[0]

    def depth_and_shift(self, point: np.ndarray, margin: float) -> tuple[float, np.ndarray]:
        """(`depth` of `point`, (3,) the horizontal move that takes its ground projection to the
        nearest point at least `margin` inside the polygon (toward its middle where it is
        narrower); zero when it is there already)."""
        if self._lines is None:
            object.__setattr__(self, "_lines", _Lines.of(self._flat.tolist()))
        assert self._lines is not None
        return self._lines.depth_and_shift(self.axes, point, margin)


@dataclasses.dataclass(frozen=True)
class _Lines:
    """A polygon's edges along the ground (one from each corner), their lines and its middle, on
    Python floats: `Support.depth_and_shift` (the twin of
    `support_depth` in csrc/balance.c)."""

    edges: list
    middle: tuple

    @classmethod
    def of(cls, flat: list) -> _Lines:
        edges = []
        for (x0, y0), (x1, y1) in zip(flat, flat[1:] + flat[:1]):
            dx, dy = x1 - x0, y1 - y0
            length = math.hypot(dx, dy) or 1e-300
            nx, ny = -dy / length, dx / length
            edges.append((x0, y0, dx, dy, max(dx * dx + dy * dy, 1e-300), nx, ny, nx * x0 + ny * y0))
        middle = (sum(x for x, _ in flat) / len(flat), sum(y for _, y in flat) / len(flat))
        return cls(edges, middle)

    def depth_and_shift(self, axes: np.ndarray, point: np.ndarray, margin: float) -> tuple[float, np.ndarray]:
        px, py = (axes @ point).tolist()
        depth, (nx, ny) = self._placed(px, py)
        if depth >= margin:
            return depth, np.zeros(3)
        mx, my = self.middle
        length = math.hypot(mx - nx, my - ny)
        share = min(margin, length) / length if length > 0 else 1.0
        goal = (nx + (mx - nx) * share, ny + (my - ny) * share)
        return depth, (goal[0] - px) * axes[0] + (goal[1] - py) * axes[1]

    def _placed(self, px: float, py: float) -> tuple[float, tuple[float, float]]:
        """(signed distance of the ground point (`px`, `py`) inside the polygon (fewer than 3
        corners: minus the distance to them), the nearest point of the polygon to it (itself
        when inside))."""
        if len(self.edges) >= 3:  # one edge a corner
            inside = min(nx * px + ny * py - offset for *_, nx, ny, offset in self.edges)
            if inside >= 0:
                return inside, (px, py)
        gap, near = math.inf, (px, py)
        for x0, y0, dx, dy, span, *_ in self.edges:
            along = min(max(((px - x0) * dx + (py - y0) * dy) / span, 0.0), 1.0)
            qx, qy = x0 + dx * along, y0 + dy * along
            distance = (qx - px) ** 2 + (qy - py) ** 2
            if distance < gap:
                gap, near = distance, (qx, qy)
        return -math.sqrt(gap), near


def support_of(pins: Sequence[Pin], body: Body, unit: float) -> Support | None:
    """The Support of the pinned feet whose lowest contact lies within `PLANTED` x `unit` of the
    lowest pinned foot's, their contact points placed by the pins' targets (pins are met
    exactly, so the polygon is a function of the targets); None when no foot is pinned. The
    body keeps the last one: a drag moves a hand over feet that stay planted."""
    feet = body.pinned_feet(pins)
    if feet is None:
        return None
    made_from = (unit, *((pins[k].bone, pins[k].target.tobytes()) for k in feet[0].tolist()))
    if body._support is not None and body._support[0] == made_from:
        return body._support[1]
    ground = _ground_inputs(pins, body, feet)
    support = _support_on_ground(_grounded(pins, body, ground), ground[-1], unit)
    object.__setattr__(body, "_support", (made_from, support))
    return support


def _ground_inputs(
    pins: Sequence[Pin], body: Body, feet: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> tuple[np.ndarray, ...]:
    """The feet as the compiled geometry takes them (`native.balance_check`): `feet`
    (`Body.pinned_feet`), every pin's target axes and position (`loop.pin_arrays`), the ground's
    frame (`_ground_frame`); all kept by their owners."""
    _, _, places, axes = pin_arrays(pins)
    return (*feet, axes, places, _ground_frame(tuple(body.up.tolist())))


def _grounded(pins: Sequence[Pin], body: Body, ground: tuple[np.ndarray, ...]) -> list[np.ndarray]:
    """Each pinned foot's contact points (K, 3) along the ground's frame, placed by its pin's
    target: the Python steps of `support` in csrc/balance.c before the hull."""
    feet, _, _, axes, places, frame = ground
    turns = frame @ np.swapaxes(axes[feet], -1, -2)
    offsets = places[feet] @ frame.T
    return [body.feet[pins[k].bone] @ turn.T + offset for k, turn, offset in zip(feet, turns, offsets)]


def support_from(points: Sequence[np.ndarray], up: np.ndarray, unit: float) -> Support | None:
    """The Support of feet whose contact points are `points` ((K, 3) arrays, armature space):
    those whose lowest point lies within `PLANTED` x `unit` of the lowest carry the body; None
    for no feet. The overlay draws the polygon of the posed feet with it."""
    frame = _ground_frame(tuple((np.asarray(up, dtype=float) / np.linalg.norm(up)).tolist()))
    return _support_on_ground([p @ frame.T for p in points], frame, unit)


def _support_on_ground(feet: Sequence[np.ndarray], frame: np.ndarray, unit: float) -> Support | None:
    """`support_from` of feet whose contact points are given on the ground's `frame`
    (`_ground_frame`): (K, 3) per foot, along its two axes and the height (the twin of
    `support` in csrc/balance.c)."""
    if not feet:
        return None
    feet = [np.round(foot, 12).tolist() for foot in feet]  # points a rounding apart: one corner
    lowest = [min(height for *_, height in foot) for foot in feet]
    floor = min(lowest)
    planted = [(x, y) for foot, low in zip(feet, lowest) if low <= floor + PLANTED * unit for x, y, _ in foot]
    return Support.on_ground(_hull(planted), frame, floor)


def _ground_axes(up: ArrayLike) -> np.ndarray:
    """(2, 3) two unit directions along the ground, a right-handed pair about `up`."""
    return _ground_frame(tuple((np.asarray(up, dtype=float) / np.linalg.norm(up)).tolist()))[:2]


@functools.lru_cache(maxsize=16)
def _ground_frame(up: tuple[float, ...]) -> np.ndarray:
    """(3, 3) rows: `_ground_axes` of a unit `up` given as a tuple, then `up`; kept: a live drag
    asks for the same one."""
    normal = np.array(up)
    other = np.eye(3)[int(np.argmin(np.abs(normal)))]
    first = np.cross(normal, other)
    first /= np.linalg.norm(first)
    frame = np.array([first, np.cross(normal, first), normal])
    frame.setflags(write=False)
    return frame


def _hull(points: list[tuple[float, float]]) -> np.ndarray:
    """(M, 2) the convex hull of ground points, counter-clockwise (Andrew's monotone chain; on
    Python floats: a foot has a handful of points). Points a rounding apart must be given equal
    (`_support_on_ground` rounds them): two corners 1e-16 apart make an edge with no direction."""
    unique = sorted(set(points))
    if len(unique) < 3:
        return np.array(unique).reshape(-1, 2)
    return np.array(_half_hull(unique) + _half_hull(unique[::-1]))


def _half_hull(ordered: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The chain of `ordered` points that turns left at every corner, its last point left out."""
    chain: list[tuple[float, float]] = []
    for x, y in ordered:
        while len(chain) >= 2:
            (ox, oy), (ax, ay) = chain[-2], chain[-1]
            if (ax - ox) * (y - oy) - (ay - oy) * (x - ox) > 0:
                break
            chain.pop()
        chain.append((x, y))
    return chain[:-1]


def balanced(
    solving: _Solving,
    skeleton: Skeleton,
    pins: Sequence[Pin],
    rotations: np.ndarray,
    locations: np.ndarray,
    body: Body,
    settings: SolverSettings,
) -> SolveResult:
    """The SolveResult of `pins` with the centre of mass kept over the support polygon.

    `solving(settings)(pins, rotations, locations)` solves checked arguments (aim pins included)
    in the caller's time budget, `solving.stiffness` (N,) the bones' stiffness (a frozen root
    stays put: no rounds); the skeleton's root must translate (`translate_root`). When the
    centre of mass of the plain solve lies outside the polygon (or less than `SETTLED` inside),
    each round solves again with the root's head held (`round_settings`: the root does not
    translate) at the plain solve's height, moved along the ground by the shifts asked so far
    (each toward `MARGIN` inside), each scaled by how far the centre of mass follows the root
    (the first by `following_share`, which overrates it a little: the first round tends to fall
    short of its aim rather than take the root toward where a limb cannot follow; the next by
    what the round before measured), so the hips go back and the spine leans while the user's
    pins are met. A round starts from the pose of the round before with its root moved, next to
    its answer. The rounds end once the centre of mass is `SETTLED` inside, or inside where the
    pins' reach cuts the next step below half its length (`_REACH_BOUND`). A round whose user
    pins miss by more than the plain solve's (or the tolerance), the root's place out of their
    reach or the time budget cut short, is never kept: the next round tries half its step, and
    when that one misses too the rounds end and the result is marked unconverged. The rounds are
    a fixed sequence of solves of the inputs, so the answer stays a function of the targets, the
    settings and the start pose.
    """
    if len(body.masses) != len(skeleton):
        raise SceneError("body.masses", f"has {len(body.masses)} masses for {len(skeleton)} bones")
    feet = body.pinned_feet(pins)
    plain = solving(settings)(pins, rotations, locations)
    bones = tuple(pin.bone for pin in pins)
    root, lengths = _pinned_chains(skeleton, bones)
    if feet is None or root is None or solving.stiffness[root] >= 1.0:
        return plain
    centres, unit, ground = body.centres_in(skeleton), skeleton.unit, _ground_inputs(pins, body, feet)
    com, head, depth, shift = _balance_state(skeleton, body, centres, pins, ground, plain, root)
    if depth >= SETTLED * unit or not _length(shift) > settings.tolerance:
        return plain
    solve_round = solving(round_settings(settings))
    allowed = np.maximum(plain.position_errors, settings.tolerance)
    to_local = skeleton.rest[root, :3, :3]
    iterations, moved = plain.iterations, plain.moved.copy()
    best, kept, cut = (depth, plain), plain, False
    step = shift / _gain(body.following_share(skeleton, bones, root))
    reach = _Reach(lengths, [pin.target_position.tolist() for pin in pins])
    for _ in range(BALANCE_ROUNDS):
        wanted, step = step, reach.within(head, step)
        bound = step @ step < _REACH_BOUND * (wanted @ wanted)
        if not _length(step) > settings.tolerance or (bound and depth >= 0.0):
            break
        start = kept.locations.copy()
        start[root] += step @ to_local
        result = solve_round(pins, kept.rotations, start)
        iterations, moved = iterations + result.iterations, moved | result.moved
        if (result.position_errors > allowed).any():
            if cut:  # halved once in vain
                break
            cut, step = True, step * 0.5
            continue
        cut, kept = False, result
        new_com, head, depth, shift = _balance_state(skeleton, body, centres, pins, ground, result, root)
        gain = _gain((new_com - com) @ step / (step @ step))
        com = new_com
        best = (depth, result) if depth > best[0] else best
        if depth >= SETTLED * unit or not _length(shift) > settings.tolerance:
            break
        step = shift / gain
    result = best[1]
    result.iterations, result.moved, result.converged = iterations, moved, result.converged and not cut
    return result


@dataclasses.dataclass(frozen=True)
class _Reach:
    """How far each pin's bone can get from the root's head (`lengths` (P,): the heads along the
    chain between them, end to end) and its target (`targets` (P, 3)), on Python floats: a round
    that puts the root beyond a pin's reach cannot meet that pin, and is dropped."""

    lengths: Sequence[float]
    targets: Sequence[Sequence[float]]

    def within(self, head: np.ndarray, step: np.ndarray) -> np.ndarray:
        """`step` (3,) shortened so the root's `head` (3,) moved by it stays within every pin's
        reach that it is within now (a pin out of reach before stays so whatever the step); on
        Python floats, a handful of pins."""
        (hx, hy, hz), (sx, sy, sz) = head.tolist(), step.tolist()
        size, share = sx * sx + sy * sy + sz * sz, 1.0
        if not size > 0.0:
            return step
        for length, (tx, ty, tz) in zip(self.lengths, self.targets):
            ax, ay, az = hx - tx, hy - ty, hz - tz
            room = length * length - (ax * ax + ay * ay + az * az)
            if room >= 0.0:  # |away + t step|^2 <= length^2 for t up to the larger root
                along = ax * sx + ay * sy + az * sz
                t = (-along + math.sqrt(max(along * along + size * room, 0.0))) / size
                share = min(share, t * _REACH_SHARE)
        return step * max(share, 0.0)


@functools.lru_cache(maxsize=16)
def _arcs(skeleton: Skeleton) -> np.ndarray:
    """(N,) each bone's arc length: the chain of heads from its root's head to its own, end to end."""
    parents = skeleton.parents
    steps = np.linalg.norm(skeleton.rest_head - skeleton.rest_head[parents], axis=1)
    arc = np.zeros(len(skeleton))
    for i in np.flatnonzero(parents >= 0):  # parents first
        arc[i] = arc[parents[i]] + steps[i]
    arc.flags.writeable = False
    return arc


@functools.lru_cache(maxsize=16)
def _pinned_chains(skeleton: Skeleton, bones: tuple[str, ...]) -> tuple[int | None, list[float]]:
    """(the one root the pins on `bones` hang from, when no pin holds it, else None: balance has
    no root to move; each pinned bone's `_arcs` from that root's head), kept: a drag asks for the
    same pins every update."""
    pinned = [skeleton.index[bone] for bone in bones]
    roots = {int(skeleton.root_of[bone]) for bone in pinned}
    root = roots.pop() if len(roots) == 1 else None
    if root is None or root in pinned:
        return None, []
    arcs = _arcs(skeleton)
    return root, (arcs[pinned] - arcs[root]).tolist()


def _length(vector: np.ndarray) -> float:
    """The length of a (3,) vector (`np.linalg.norm` costs six times as much on three floats)."""
    return math.sqrt(vector @ vector)


def _gain(share: float) -> float:
    """A share the centre of mass follows the root by, kept within `_GAIN_RANGE`."""
    return min(max(float(share), _GAIN_RANGE[0]), _GAIN_RANGE[1])


def following_share(skeleton: Skeleton, pinned_bones: Sequence[int], body: Body, root: int) -> float:
    """How far the centre of mass follows the root's head while pins hold the bones
    `pinned_bones` (indices), per unit of the root's shift: the first round's guess (later rounds
    measure it). Each pinned chain bends evenly: a mass at arc length s from the root's head,
    whose nearest pinned bone below lies at arc length L, moves (1 - s/L) of the shift; a pinned
    bone's mass stays; a bone with no pin below moves as the point it hangs from. The root turns
    as well, which takes part of the shift: the centre of mass follows a little less than this
    share."""
    parents = skeleton.parents
    pinned = np.zeros(len(skeleton), dtype=bool)
    pinned[list(pinned_bones)] = True
    arc = _arcs(skeleton)
    nearest = np.where(pinned, arc, np.inf)
    for i in np.flatnonzero(parents >= 0)[::-1]:
        nearest[parents[i]] = min(nearest[parents[i]], nearest[i])
    middle = arc + body.centres_in(skeleton)[:, 1]
    share = np.zeros(len(skeleton))
    for i in range(len(skeleton)):
        parent = parents[i]
        if pinned[i] or (parent < 0 and i != root):
            continue
        if np.isfinite(nearest[i]):
            share[i] = 1.0 - middle[i] / nearest[i]
        elif parent < 0:
            share[i] = 1.0
        elif np.isfinite(nearest[parent]) and not pinned[parent]:
            share[i] = 1.0 - arc[i] / nearest[parent]
        else:
            share[i] = share[parent]
    return float(body.masses @ np.clip(share, 0.0, 1.0) / body.masses.sum())


@functools.lru_cache(maxsize=16)
def round_settings(settings: SolverSettings) -> SolverSettings:
    """A round's settings: the root holds its head where the round puts it (`translate_root`
    off), the round starts from the round before, next to its answer (no carried start,
    `stage_targets`), no pin gives way (`pins_give_way`: a round whose pins cannot all be met is
    dropped anyway) and at most `ROUND_ITERATIONS` iterations (a round near its answer meets the
    pins in a few; one that has not by then is dropped as out of reach)."""
    return dataclasses.replace(
        settings,
        translate_root=False,
        stage_targets=False,
        pins_give_way=False,
        iterations=min(settings.iterations, ROUND_ITERATIONS),
    )
