"""Balance (`SolverSettings.balance`): the body's centre of mass kept over its feet.

A standing person whose hand reaches forward pushes the hips back, so the centre of mass stays
over the feet. The loops only meet pins, so balance is a fixed point above them, like aim pins
(`aim.py`): solve; when the centre of mass's ground projection lies outside the support polygon
(the convex hull of the planted feet's contact points), pin the translating root's head at a
point shifted horizontally toward the polygon, at the lowest priority and with free axes, and
solve again from the same start pose, a few rounds. Every round is a deterministic solve of the
inputs, so the answer stays a function of the targets, the settings and the start pose; the
user's pins stay exact (the root pin gives way first where they cannot all be met).

Segment masses are fractions of the body's mass by body role, from Winter's table of
Dempster's cadaver data (docs/balance.md); bones with no role take the segment of their nearest
ancestor with one, and a segment's mass is shared by its bones by length.
"""

import dataclasses
import functools

import numpy as np

from . import quat
from .frames import pose_frames
from .pins import MAX_PRIORITY, Pin
from .validation import SceneError, vector

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
MARGIN = 0.02  # the centre of mass is brought this far (x the rig's size) inside the polygon
REACHABLE = 0.985  # share of a pinned chain's straight length the root's head is kept within
CLOSE_ENOUGH = 0.25  # the rounds end once the centre of mass lies within this share of MARGIN of its goal
PLANTED = 0.05  # feet whose lowest contact lies this close (x the rig's size) to the lowest one support
HEEL = 0.25  # the heel lies behind the ankle by this share of the foot bone (ankle to ball), an estimate
_PROJECTIONS = 16  # projections onto the shrunk polygon's edges before it counts as too narrow
_GAIN_RANGE = (0.2, 1.5)  # how far the centre of mass may be taken to follow the root, per unit


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

    def __post_init__(self):
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

    def centres_in(self, skeleton):
        """(N, 3) each bone's mass centre in its frame (the middle where `centres` is None)."""
        if self.centres is not None:
            return self.centres
        centres = np.zeros((len(skeleton), 3))
        centres[:, 1] = skeleton.lengths * 0.5
        return centres

    def within(self, whole, part, rotations=None, locations=None):
        """This body (of skeleton `whole`) for `part`, a skeleton of some of its bones (the
        pinned chains): each bone's mass carried by its nearest ancestor in `part`, at the place
        the local pose `rotations`, `locations` (`whole` order) holds it in that ancestor's frame
        (the solve turns no bone off the chains, so it stays there; None: the rest pose)."""
        if rotations is None:
            rotations = np.tile(quat.IDENTITY, (len(whole), 1))
            locations = np.zeros((len(whole), 3))
        world, heads = whole.forward(rotations, locations)
        axes = quat.to_matrix(world)
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


def body_of(skeleton, roles, up=(0.0, 0.0, 1.0)):
    """The Body of `skeleton` whose bones have `roles` ({bone name: role}, `presets.bone_roles`):
    masses from `SEGMENT_MASS`, feet the foot bones with contact points at the heads and tails
    of them and the toe bones under them (at rest)."""
    return Body(bone_masses(skeleton, roles), _feet(skeleton, roles), np.asarray(up, dtype=float))


def bone_masses(skeleton, roles):
    """(N,) share of the body's mass per bone: each segment's share split over its bones by
    length; bones without a role belong to the nearest ancestor's segment; by length alone when
    no bone has a role."""
    segments = [None] * len(skeleton)
    for i in range(len(skeleton)):  # parents first
        role = roles.get(skeleton.names[i])
        parent = skeleton.parents[i]
        segments[i] = _segment(role) if role else (segments[parent] if parent >= 0 else None)
    if not any(segments):
        return skeleton.lengths / skeleton.lengths.sum()
    masses = np.zeros(len(skeleton))
    for segment in set(segments) - {None}:
        members = np.array([s == segment for s in segments])
        lengths = skeleton.lengths[members]
        masses[members] = SEGMENT_MASS[segment[0]] * lengths / lengths.sum()
    return masses / masses.sum()


def _segment(role):
    """(segment, side) of a role ("forearm.L" -> ("forearm", "L"), "clavicle.L" -> ("trunk", ""))."""
    base, _, side = role.partition(".")
    segment = _SEGMENT_OF_ROLE.get(base, "hand")
    return segment, "" if segment in _CENTRAL else side


def _feet(skeleton, roles):
    """{foot bone: (K, 3) contact points in its frame}: its head (the ankle), the heel behind it
    (`HEEL`), its tail and the tails of the toe bones below it, at rest."""
    feet = {}
    for i, bone in enumerate(skeleton.names):
        if roles.get(bone, "").partition(".")[0] != "foot":
            continue
        toes = [t for t in range(len(skeleton)) if skeleton.parents[t] == i]
        toes = [t for t in toes if roles.get(skeleton.names[t], "").startswith("toes")]
        tails = skeleton.rest_head + skeleton.rest[:, :3, 1] * skeleton.lengths[:, None]
        heel = skeleton.rest_head[i] - HEEL * (tails[i] - skeleton.rest_head[i])
        points = np.vstack([skeleton.rest_head[i], heel, tails[i], tails[toes]])
        feet[bone] = (points - skeleton.rest_head[i]) @ skeleton.rest[i, :3, :3]
    return feet


def centre_of_mass(masses, heads, tails):
    """The centre of mass of bones weighing `masses` (N,) each at the middle of its `heads` and
    `tails` (N, 3): the overlay's measure of the pose Blender shows."""
    return masses @ ((heads + tails) * 0.5) / masses.sum()


def pose_centre_of_mass(skeleton, body, rotations, locations):
    """The centre of mass of `skeleton` in a local pose."""
    world, heads = pose_frames(skeleton, rotations, locations)
    points = heads + np.einsum("nij,nj->ni", world, body.centres_in(skeleton))
    return body.masses @ points / body.masses.sum()


def first_gain(skeleton, body, root, feet):
    """How far the centre of mass is taken to follow the root's head, per unit, before a round
    has measured it: the share of the mass off the legs (the bones from the root, exclusive,
    down to the pinned `feet`), which moves with the hips while the feet stay (a little less
    where pinned hands and head hold the chest back: 0.56 to 0.67 measured of a metarig's 0.68)."""
    legs = set()
    for foot in feet:
        legs.update(b for b in skeleton.ancestors(skeleton.index[foot]) if b != root)
    share = 1.0 - body.masses[sorted(legs)].sum() / body.masses.sum()
    return float(np.clip(share, *_GAIN_RANGE))


@dataclasses.dataclass(frozen=True)
class Support:
    """The support polygon: `corners` (M, 3) on the ground (armature space, at the height of the
    lowest contact), counter-clockwise seen from above; `axes` (2, 3) the ground's directions."""

    corners: np.ndarray
    axes: np.ndarray
    up: np.ndarray

    def depth(self, point):
        """How far `point`'s ground projection lies inside the polygon (negative: outside by
        that much; a polygon of one or two corners has no inside)."""
        flat, p = self.corners @ self.axes.T, self.axes @ point
        return _depth(flat, p)

    def shift(self, point, margin):
        """(3,) the horizontal move that takes `point`'s ground projection to the nearest point
        at least `margin` inside the polygon (where the polygon is narrower than that, `margin`
        from its nearest edge toward its middle; on a polygon of two corners, the nearest point
        of the segment at least `margin` from its ends; of one, that point); zero when it is
        there already."""
        flat, p = self.corners @ self.axes.T, self.axes @ point
        if _depth(flat, p) >= margin:
            return np.zeros(3)
        goal = _on_line(flat, p, margin) if len(flat) < 3 else _inside_by(flat, p, margin)
        if goal is None:  # narrower than twice the margin: the margin toward the middle
            near = p if _depth(flat, p) >= 0 else _nearest_on_boundary(flat, p)
            inward = flat.mean(0) - near
            length = np.linalg.norm(inward)
            goal = near + inward * (min(margin, length) / length) if length > 0 else near
        return (goal - p) @ self.axes


def _on_line(corners, p, margin):
    """The point of a polygon of one or two corners (a point, a segment) nearest to 2D `p` and
    at least `margin` from the segment's ends (its middle where it is shorter than that)."""
    if len(corners) == 1:
        return corners[0].copy()
    start, edge = corners[0], corners[1] - corners[0]
    length = np.linalg.norm(edge)
    if not length > 2.0 * margin:
        return start + 0.5 * edge
    share = np.clip((p - start) @ edge / (length * length), margin / length, 1.0 - margin / length)
    return start + share * edge


def _inside_by(corners, p, margin):
    """The point nearest to 2D `p` at least `margin` inside a counter-clockwise polygon (the
    polygon shrunk by `margin`), by cyclic projections onto the shrunk edges' half-planes; None
    where the polygon is narrower than twice the margin there."""
    edges = np.roll(corners, -1, axis=0) - corners
    normals = np.stack([-edges[:, 1], edges[:, 0]], axis=1) / np.linalg.norm(edges, axis=1)[:, None]
    offsets = np.einsum("ij,ij->i", normals, corners) + margin
    q = np.array(p, dtype=float)
    for _ in range(_PROJECTIONS):
        short = offsets - normals @ q
        if short.max() <= 1e-12 * margin:
            return q
        worst = int(np.argmax(short))
        q = q + short[worst] * normals[worst]
    return q if (offsets - normals @ q).max() <= 1e-6 * margin else None


def support_of(pins, body, unit):
    """The Support of the pinned feet whose lowest contact lies within `PLANTED` x `unit` of the
    lowest pinned foot's, their contact points placed by the pins' targets (pins are met
    exactly, so the polygon is a function of the targets); None when no foot is pinned."""
    feet = [pin for pin in pins if pin.bone in body.feet and pin.aim is None]
    points = [
        body.feet[pin.bone] @ quat.to_matrix(pin.target_rotation).T + pin.target_position for pin in feet
    ]
    return support_from(points, body.up, unit)


def support_from(points, up, unit):
    """The Support of feet whose contact points are `points` ((K, 3) arrays, armature space):
    those whose lowest point lies within `PLANTED` x `unit` of the lowest carry the body; None
    for no feet. The overlay draws the polygon of the posed feet with it."""
    if not points:
        return None
    up = np.asarray(up, dtype=float) / np.linalg.norm(up)
    lowest = np.array([(p @ up).min() for p in points])
    planted = np.vstack([p for p, low in zip(points, lowest) if low <= lowest.min() + PLANTED * unit])
    axes = _ground_axes(up)
    hull = _hull(planted @ axes.T)
    return Support(hull @ axes + up * lowest.min(), axes, up)


def _ground_axes(up):
    """(2, 3) two unit directions along the ground, a right-handed pair about `up`."""
    return _axes_about(tuple(np.asarray(up, dtype=float).tolist()))


@functools.lru_cache(maxsize=16)
def _axes_about(up):
    """`_ground_axes` of an `up` given as a tuple, kept: a live drag asks for the same one."""
    up = np.array(up)
    other = np.eye(3)[int(np.argmin(np.abs(up)))]
    first = np.cross(up, other)
    first /= np.linalg.norm(first)
    axes = np.array([first, np.cross(up, first)])
    axes.setflags(write=False)
    return axes


def _hull(points):
    """The convex hull of (K, 2) points, counter-clockwise (Andrew's monotone chain)."""
    points = np.unique(np.round(points, 12), axis=0)
    if len(points) < 3:
        return points

    def half(ordered):
        chain = []
        for p in ordered:
            while len(chain) >= 2 and _cross(chain[-2], chain[-1], p) <= 0:
                chain.pop()
            chain.append(p)
        return chain[:-1]

    return np.array(half(points) + half(points[::-1]))


def _cross(o, a, b):
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def _depth(corners, p):
    """Signed distance of 2D point `p` inside a counter-clockwise polygon (-inf-like outside
    measures for fewer than 3 corners: minus the distance to them)."""
    if len(corners) < 3:
        return -float(np.linalg.norm(_nearest_on_boundary(corners, p) - p))
    edges = np.roll(corners, -1, axis=0) - corners
    lengths = np.linalg.norm(edges, axis=1)
    inside = (edges[:, 0] * (p[1] - corners[:, 1]) - edges[:, 1] * (p[0] - corners[:, 0])) / lengths
    if inside.min() >= 0:
        return float(inside.min())
    return -float(np.linalg.norm(_nearest_on_boundary(corners, p) - p))


def _nearest_on_boundary(corners, p):
    """The point of the polygon's edges (or its one corner) nearest to 2D point `p`."""
    starts = corners
    edges = np.roll(corners, -1, axis=0) - corners
    along = np.einsum("ij,ij->i", p - starts, edges) / np.maximum(np.einsum("ij,ij->i", edges, edges), 1e-300)
    near = starts + edges * np.clip(along, 0.0, 1.0)[:, None]
    return near[np.argmin(np.linalg.norm(near - p, axis=1))]


def balanced(solve_pins, skeleton, pins, rotations, locations, body, tolerance):
    """The SolveResult of `pins` with the centre of mass kept over the support polygon.

    `solve_pins(pins, rotations, locations)` solves checked arguments (aim pins included) in the
    caller's time budget; the skeleton's root must translate (`translate_root`). When the
    centre of mass of the plain solve lies outside the polygon (or less than `MARGIN` inside),
    each round solves again with one more pin: a position-only pin on the root's head at the
    plain solve's height, moved along the ground by the shifts asked so far (each divided by how
    far the centre of mass follows the root: first the share of the mass off the legs,
    `first_gain`, then as measured in the round before), at a priority below every
    user pin, so the hips go back and the spine leans while the user's pins are met as in any
    solve (where they cannot all be met, the root's pin gives way first). A round starts from
    the pose of the round before, which lies near its answer. A round whose user pins miss by
    more than the plain solve's (or `tolerance`), as one the time budget or the iteration cap
    cut, is never kept: it ends the rounds and the result is marked unconverged, so a live
    solve is refined. The rounds are a fixed sequence of solves of the inputs, so the answer
    stays a function of the targets, the settings and the start pose.
    """
    if len(body.masses) != len(skeleton):
        raise SceneError("body.masses", f"has {len(body.masses)} masses for {len(skeleton)} bones")
    plain = solve_pins(pins, rotations, locations)
    support = support_of(pins, body, skeleton.unit)
    roots = {int(skeleton.root_of[skeleton.index[pin.bone]]) for pin in pins}
    root = roots.pop() if len(roots) == 1 else None
    if support is None or root is None or any(skeleton.index[pin.bone] == root for pin in pins):
        return plain
    heads = pose_frames(skeleton, plain.rotations, plain.locations)[1]
    com = pose_centre_of_mass(skeleton, body, plain.rotations, plain.locations)
    lowest = max(min(pin.priority for pin in pins) - 1.0, -MAX_PRIORITY)
    allowed = np.maximum(plain.position_errors, tolerance)
    feet, margin = [pin.bone for pin in pins if pin.bone in body.feet], MARGIN * skeleton.unit
    offset, gain = np.zeros(3), first_gain(skeleton, body, root, feet)
    reaches = REACHABLE * chain_reaches(skeleton, pins)
    iterations, moved = plain.iterations, plain.moved.copy()
    best, kept, cut = (-support.depth(com), plain), plain, False
    for _ in range(BALANCE_ROUNDS):
        shift = support.shift(com, margin)
        if not np.linalg.norm(shift) > max(tolerance, CLOSE_ENOUGH * margin):
            break
        step = _within_reach(shift / gain, heads[root] + offset, pins, reaches)
        if not np.linalg.norm(step) > tolerance:
            break  # the hips cannot go further without taking a pin beyond its chain's reach
        offset = offset + step
        target = np.eye(4)
        target[:3, 3] = heads[root] + offset
        hips = _hips_pin(skeleton.names[root], lowest).moved_to(target, quat.IDENTITY, target[:3, 3])
        result = _without_last_pin(solve_pins([*pins, hips], kept.rotations, kept.locations))
        iterations, moved = iterations + result.iterations, moved | result.moved
        if (result.position_errors > allowed).any():
            cut = True
            break
        kept = result
        new_com = pose_centre_of_mass(skeleton, body, result.rotations, result.locations)
        gain = float(np.clip((new_com - com) @ step / (step @ step), *_GAIN_RANGE))
        com = new_com
        best = min(best, (-support.depth(com), result), key=lambda pair: pair[0])
    result = best[1]
    result.iterations, result.moved, result.converged = iterations, moved, result.converged and not cut
    return result


def chain_reaches(skeleton, pins):
    """(P,) how far each pin's bone's head can lie from the root's head: the lengths of the
    chain between them laid straight (the distances between consecutive heads at rest)."""
    reaches = np.zeros(len(pins))
    for k, pin in enumerate(pins):
        chain = skeleton.ancestors(skeleton.index[pin.bone])[:-1]
        offsets = skeleton.rest_head[chain] - skeleton.rest_head[skeleton.parents[chain]]
        reaches[k] = np.linalg.norm(offsets, axis=1).sum()
    return reaches


def _within_reach(step, hips, pins, reaches):
    """`step` (3,), the move of the root's head from `hips`, shortened so that no pin's target
    ends farther from the root's head than its `reaches` (P,) where it was not already: a
    chain at (or near) full stretch the loops cannot meet, and a round that asks for one only
    costs a failed solve."""
    share, length = 1.0, step @ step
    if not length > 0.0:
        return step
    for pin, reach in zip(pins, reaches):
        if pin.aim is not None:
            continue  # its position is free
        way = pin.target_position - hips  # the root's head moves along `step` from `hips`
        along, beyond = way @ step, way @ way - reach * reach
        if beyond > 0.0:  # already beyond: only moves that bring it closer
            share = min(share, max(0.0, 2.0 * along / length))
            continue
        share = min(share, (along + np.sqrt(along * along - length * beyond)) / length)
    return step * max(share, 0.0)


@functools.lru_cache(maxsize=16)
def _hips_pin(bone, priority):
    """Balance's pin on the root's head (validated once; each round moves its target)."""
    return Pin(bone, np.eye(4), orientation_weights=(0.0, 0.0, 0.0), priority=priority)


def _without_last_pin(result):
    """`result` with the per-pin measures of its last pin (balance's own) left out."""
    for field in ("position_errors", "orientation_errors_deg", "yielded", "beyond_reach"):
        setattr(result, field, getattr(result, field)[:-1])
    return result
