"""Joint limits fitted from motion: the smallest Kusudama per bone that holds most of a clip.

Given every bone's local rotation over a clip, each bone gets ordered limit cones (consecutive
cones bridged by tangent cones, as `kusudama.Kusudama` defines the region) and a twist range,
both in the bone's rest frame, that hold a chosen fraction (`coverage`) of the frames:

1. Outliers: the (1 - coverage) frames farthest from the rest of the motion are dropped, jointly
   for swing and twist. A frame's distance to the motion is the distance to its k-th nearest
   frame (k = frames dropped + 1) in the combined (swing angle, twist difference) metric, so a
   small cluster of stray frames counts as stray and a sparse but continuous edge does not.
2. Swing: the kept swing directions (Q applied to +Y) are covered by 1..max_cones cones. One
   cone is the smallest enclosing cap. For a chain of n cones the directions, ordered along
   their principal axis (in the tangent plane of the enclosing cap's centre), are cut into n
   runs that a few spherical k-means rounds settle around the dense parts of the motion; each
   run gets its own smallest cap, so an elongated or curved set of directions gets cones along
   its length, in order. Every candidate's region, bridges included, is measured (a Fibonacci
   lattice over a cap bounding it) and the smallest wins; a chain must beat the best so far by
   `_CHAIN_GAIN`, so sampling noise never buys an extra cone. (The candidates are measured one
   Kusudama at a time: at most 2 (max_cones - 1) per bone, all other steps are batched.)
3. Hinges: a bone whose directions (and the rest direction) lie on one great circle turns
   about one axis (an elbow or a knee). Its region becomes a band of constant width along that
   arc (two cones at its ends, joined by their bridge) from the rest direction, the straight
   limb, to past the most bent direction: the limb bends only its captured way, and a solve
   starting from rest cannot cross the straight pose to the other side.
4. Margin: a clip shows only some of the motion a joint makes, and a region that is tight on
   it forces the solver against the boundary on other motion (iterations, jitter, wrong-way
   restarts). Every cone grows by `margin` times the bone's spread (the radius of the
   smallest cap holding all its directions, taken within [`MIN_SPREAD`, `MAX_SPREAD`]); a
   hinge band's bent end reaches that far past the captured arc and its sides at most
   `HINGE_SIDE_MARGIN` past the off-plane spread.
5. Twist: measured in the twist frame `JointLimits` derives from the fitted cones (the angle of
   (shortest_arc(+Y, centre))^-1 Q about +Y), so the fitted range is what the solver enforces.
   The range is the interval of the kept twists, widened on each side by `margin` times its
   width (within the same bounds), within [-pi, pi] (where twists are measured); when it misses less
   than `FLOOR_TWIST` of the whole turn the bone gets no twist limit.

Floors: cones of at least `FLOOR_RADIUS` and twist ranges of at least `FLOOR_TWIST`. A bone
the clip never turns by more than `STILL_ANGLE` (a CMU collar or hip helper: a fixed offset of
the rig's build, not a joint the actor moved) gets no margin on its cones, so it keeps only the
floor cone around its pose (its twist range keeps the margin: without it the knees jittered
more): left free, or given the margin's room, the solver swings it wherever the pins pull (the
shoulders and hips then wander from the captured body and jitter). A still bone at the end of a
chain (no bone below it turns more than `STILL_SPREAD`: a captured hand or finger held against
the forearm by few markers) gets at least `END_RADIUS` cones and an `END_TWIST` twist range:
such bones carry the pins, and a region as tight as their captured jitter would tie the pinned
orientation into the whole limb, which then swings about from frame to frame to honour it. Root
bones get no limits, and neither does any bone of a clip in which no bone turns by more than
`STILL_ANGLE` (a pose held, not motion).
"""

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from . import quat
from .errors import EwbikError
from .kusudama import Kusudama, LimitCone, TwistLimit

FLOOR_RADIUS = math.radians(2.0)
FLOOR_TWIST = math.radians(4.0)
STILL_ANGLE = math.radians(0.1)
DEFAULT_MAX_CONES = 4
DEFAULT_MARGIN = 0.35
MIN_SPREAD = math.radians(20.0)
MAX_SPREAD = math.radians(40.0)
HINGE_WIDTH = math.radians(6.0)
HINGE_MIN_ARC = math.radians(30.0)
HINGE_SIDE_MARGIN = math.radians(3.0)
STILL_SPREAD = math.radians(5.0)
END_RADIUS = math.radians(35.0)
END_TWIST = math.radians(90.0)

_Y = np.array([0.0, 1.0, 0.0])
_MARGIN = 1e-6
_CAP_ITERATIONS = 200
_CAP_GAP = 1e-6
_CAP_CANDIDATES = 64
_AREA_SAMPLES = 1024
_CHAIN_GAIN = 0.97
_KMEANS_ROUNDS = 5
_NEIGHBOUR_REFERENCES = 256
_CHUNK_ELEMENTS = 4_000_000
_GOLDEN_ANGLE = math.pi * (3.0 - math.sqrt(5.0))


class FitError(EwbikError):
    """Bad input to `fit_limits`; `field` names the offending argument."""


def fit_limits(
    bones: Sequence[Mapping[str, Any]],
    rotations: ArrayLike,
    coverage: float = 0.99,
    max_cones: int = DEFAULT_MAX_CONES,
    margin: float = DEFAULT_MARGIN,
) -> dict[str, dict[str, Any]]:
    """Fit joint limits to a clip: {bone name: scene-document limits dict}.

    `bones` are scene-document bone dicts (name, parent, ...); `rotations` is (F, N, 4), the
    local rotations (w, x, y, z, relative to rest) of the N bones in `bones` order over F frames.
    Each fitted bone's limits hold at least `coverage` of the frames; `margin` (a share of each
    bone's spread, 0 = the tight fit) widens them for motion the clip did not show; see the
    module docstring.
    """
    names, parents = _check_bones(bones)
    rotations = _check_rotations(rotations, len(names))
    coverage = _check_coverage(coverage)
    max_cones = _check_max_cones(max_cones)
    margin = _check_margin(margin)
    frames = quat.normalize(np.swapaxes(rotations, 0, 1))
    fitted = np.flatnonzero([p is not None for p in parents])
    turned = quat.angle(quat.multiply(quat.conjugate(frames[fitted, :1]), frames[fitted]))
    if len(fitted) == 0 or turned.max() <= STILL_ANGLE:
        return {}
    kept = _drop_outliers(frames[fitted], coverage)
    dirs = _swing_directions(kept)
    cones, spread = _fit_cones(dirs, max_cones)
    cone_margins = np.where(turned.max(axis=1) <= STILL_ANGLE, 0.0, margin)
    widen = cone_margins * np.clip(spread, MIN_SPREAD, MAX_SPREAD)
    ends = _still_ends(fitted, parents, names, spread)
    floor = np.where(ends, END_RADIUS, 0.0)
    cones = [
        [(d, min(max(r + w, f), np.pi)) for d, r in bone_cones]
        for bone_cones, w, f in zip(cones, widen, floor)
    ]
    if max_cones >= 2:
        cones = _hinge_bands(dirs, cones, widen)
    kusudamas = [Kusudama([LimitCone(tuple(d), float(r)) for d, r in bone_cones]) for bone_cones in cones]
    twists = _twist_ranges(
        kept, np.array([k.centre for k in kusudamas]), margin, np.where(ends, END_TWIST, FLOOR_TWIST)
    )
    return {
        names[bone]: Kusudama(kusudama.cones, twist).to_dict()
        for bone, kusudama, twist in zip(fitted, kusudamas, twists)
    }


def _still_ends(
    fitted: np.ndarray, parents: Sequence[str | None], names: Sequence[str], spread: np.ndarray
) -> np.ndarray:
    """(B,) whether each fitted bone turns at most `STILL_SPREAD` and so does every fitted bone
    below it."""
    row = {names[bone]: i for i, bone in enumerate(fitted)}
    moving = spread > STILL_SPREAD
    above_moving = np.zeros(len(fitted), dtype=bool)
    for i in np.flatnonzero(moving):
        parent = row.get(parents[fitted[i]])
        while parent is not None and not above_moving[parent]:
            above_moving[parent] = True
            parent = row.get(parents[fitted[parent]])
    return ~moving & ~above_moving


def _check_bones(bones: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[str | None]]:
    if not isinstance(bones, (list, tuple)) or not bones:
        raise FitError("bones", "must be a non-empty list of bone dicts")
    names, parents = [], []
    for i, bone in enumerate(bones):
        if not isinstance(bone, dict) or not isinstance(bone.get("name"), str):
            raise FitError(f"bones[{i}]", "needs a string 'name'")
        names.append(bone["name"])
        parents.append(bone.get("parent"))
    if len(set(names)) != len(names):
        raise FitError("bones", "bone names are not unique")
    return names, parents


def _check_rotations(rotations: ArrayLike, n_bones: int) -> np.ndarray:
    try:
        rotations = np.asarray(rotations, dtype=float)
    except (TypeError, ValueError):
        raise FitError("rotations", "is not an array of numbers") from None
    if rotations.ndim != 3 or rotations.shape[1:] != (n_bones, 4) or rotations.shape[0] < 1:
        raise FitError("rotations", f"must have shape (frames, {n_bones}, 4), got {rotations.shape}")
    if not np.all(np.isfinite(rotations)):
        raise FitError("rotations", "contains NaN or infinite values")
    if np.any(np.linalg.norm(rotations, axis=-1) < 1e-9):
        raise FitError("rotations", "contains zero quaternions")
    return rotations


def _check_coverage(coverage: object) -> float:
    if isinstance(coverage, bool) or not isinstance(coverage, (int, float, np.number)):
        raise FitError("coverage", f"is not a number ({coverage!r})")
    if not 0.0 < float(coverage) <= 1.0:
        raise FitError("coverage", f"must lie in (0, 1] ({coverage})")
    return float(coverage)


def _check_max_cones(max_cones: object) -> int:
    if isinstance(max_cones, bool) or not isinstance(max_cones, (int, np.integer)):
        raise FitError("max_cones", f"is not an integer ({max_cones!r})")
    if max_cones < 1:
        raise FitError("max_cones", f"must be at least 1 ({max_cones})")
    return int(max_cones)


def _check_margin(margin: object) -> float:
    if isinstance(margin, bool) or not isinstance(margin, (int, float, np.number)):
        raise FitError("margin", f"is not a number ({margin!r})")
    if not 0.0 <= float(margin) <= 1.0:
        raise FitError("margin", f"must lie in [0, 1] ({margin})")
    return float(margin)


def _swing_directions(q: np.ndarray) -> np.ndarray:
    return quat.rotate(q, _Y)


def _twist_angles(q: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Twist (..., F) of rotations q (B, F, 4) about +Y in the frame shortest_arc(+Y, centre)."""
    frame = quat.conjugate(quat.shortest_arc(_Y, centres))
    local = quat.multiply(frame[:, None, :], q)
    w, y = local[..., 0], local[..., 2]
    return 2.0 * np.arctan2(np.where(w < 0.0, -y, y), np.abs(w))


def _drop_outliers(q: np.ndarray, coverage: float) -> np.ndarray:
    """The ceil(coverage * F) frames (B, M, 4) of each bone that lie closest to the others.

    Frames are compared by chord distances: |d_i - d_j|^2 of the swing directions plus the same
    of the twists as points on the unit circle, i.e. 4 - 2 f_i.f_j for features
    f = (d, cos twist, sin twist), one matrix product per chunk of bones.
    """
    n_frames = q.shape[1]
    n_kept = max(1, math.ceil(coverage * n_frames - 1e-9))
    if n_kept >= n_frames:
        return q
    dirs = _swing_directions(q)
    twist = _twist_angles(q, _unit(dirs.mean(1)))
    features = np.concatenate((dirs, np.cos(twist)[..., None], np.sin(twist)[..., None]), -1)
    references = np.unique(np.linspace(0, n_frames - 1, min(n_frames, _NEIGHBOUR_REFERENCES)).astype(int))
    k = min(len(references) - 1, math.ceil((n_frames - n_kept + 1) * len(references) / n_frames))
    chunk = max(1, _CHUNK_ELEMENTS // (n_frames * len(references)))
    closeness = np.concatenate(
        [_neighbour_closeness(features[s : s + chunk], references, k) for s in range(0, len(q), chunk)]
    )
    kept = np.sort(np.argsort(-closeness, axis=1, kind="stable")[:, :n_kept], axis=1)
    return np.take_along_axis(q, kept[..., None], axis=1)


def _neighbour_closeness(features: np.ndarray, references: np.ndarray, k: int) -> np.ndarray:
    """f_i.f_j of every frame with its k-th nearest reference frame (larger = closer)."""
    similarity = np.einsum("bfk,brk->bfr", features, features[:, references])
    largest_first = similarity.shape[2] - 1 - k
    return np.partition(similarity, largest_first, axis=2)[:, :, largest_first]


def _unit(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return np.where(n > 1e-9, v / np.where(n > 1e-9, n, 1.0), _Y)


def _enclosing_caps(points: np.ndarray, member: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Smallest caps holding subsets of each bone's points: centres (B, S, 3), radii (B, S).

    `points` (B, M, 3) are unit directions, `member` (B, S, M) picks S subsets per bone. The
    smallest cap's centre points at the point of the subset's convex hull nearest the origin
    (maximizing min p.c over unit c is that distance problem), found by Gilbert's min-norm-point
    iteration over the `_CAP_CANDIDATES` members farthest from the subset's mean (the hull's
    extreme points are among them in practice). The radius is then the exact largest angle to
    any member, so the cap holds every member whatever the iteration's accuracy. Empty subsets
    get radius -1.
    """
    x = _unit(member @ points)
    cos = np.where(member, x @ np.swapaxes(points, 1, 2), np.inf)
    count = min(_CAP_CANDIDATES, points.shape[1])
    far = np.argpartition(cos, count - 1, axis=-1)[..., :count]
    candidates = points[np.arange(len(points))[:, None, None], far]
    usable = np.isfinite(np.take_along_axis(cos, far, -1))
    for iteration in range(_CAP_ITERATIONS):
        support = np.where(usable, (candidates @ x[..., None])[..., 0], np.inf)
        nearest = support.argmin(-1)
        if iteration % 4 == 0 and np.all(
            np.sum(x * x, -1) - np.take_along_axis(support, nearest[..., None], -1)[..., 0] <= _CAP_GAP
        ):
            break
        step = x - np.take_along_axis(candidates, nearest[..., None, None], axis=2)[..., 0, :]
        length = np.maximum(np.sum(step * step, -1), 1e-30)
        x = x - np.clip(np.sum(x * step, -1) / length, 0.0, 1.0)[..., None] * step
    centre = _unit(x)
    cos = np.where(member, centre @ np.swapaxes(points, 1, 2), 1.0)
    radius = np.arccos(np.clip(cos.min(-1), -1.0, 1.0))
    return centre, np.where(member.any(-1), radius, -1.0)


def _floored(radius: np.ndarray) -> np.ndarray:
    return np.maximum(radius + _MARGIN, FLOOR_RADIUS)


def _fit_cones(dirs: np.ndarray, max_cones: int) -> tuple[list[list[tuple[np.ndarray, float]]], np.ndarray]:
    """Per bone, the ordered cones [(direction, radius), ...] of the smallest candidate region,
    and the radius of the smallest cap holding all directions (the spread of the motion, (B,))."""
    n_bones, n_kept, _ = dirs.shape
    centre, radius = (a[:, 0] for a in _enclosing_caps(dirs, np.ones((n_bones, 1, n_kept), dtype=bool)))
    best = [[(c, r)] for c, r in zip(centre, _floored(radius))]
    best_area = 2.0 * np.pi * (1.0 - np.cos(_floored(radius)))
    if max_cones == 1 or n_kept < 2:
        return best, radius
    position = _principal_position(dirs, centre)
    for n in range(2, max_cones + 1):
        cuts = _runs(dirs, position, n)
        for cut, labels in enumerate(cuts):
            member = labels[:, None, :] == np.arange(n)[None, :, None]
            run_centre, run_radius = _enclosing_caps(dirs, member)
            repeated = np.zeros(n_bones, dtype=bool)
            for earlier in cuts[:cut]:
                repeated |= np.all(earlier == labels, axis=1)
            for bone in np.flatnonzero(~repeated):
                chain = [
                    (c, float(_floored(r))) for c, r in zip(run_centre[bone], run_radius[bone]) if r >= 0.0
                ]
                widest = 2.0 * np.pi * (1.0 - np.cos(max(r for _, r in chain)))
                if widest >= _CHAIN_GAIN * best_area[bone]:
                    continue
                area = _region_area(chain, centre[bone])
                if area < _CHAIN_GAIN * best_area[bone]:
                    best[bone], best_area[bone] = chain, area
    return best, radius


def _hinge_bands(
    dirs: np.ndarray, cones: list[list[tuple[np.ndarray, float]]], widen: np.ndarray
) -> list[list[tuple[np.ndarray, float]]]:
    """`cones` with each one-axis joint's region replaced by a band along its arc of motion.

    A bone whose directions and rest direction lie within `HINGE_WIDTH` of a great circle, over
    an arc of at least `HINGE_MIN_ARC`, turns about one axis (an elbow or knee). Its region
    becomes two cones at the ends of that arc, which the bridge joins into a band of constant
    width: a chain of caps over a thin arc is a row of lenses as wide as each cap, which lets
    the limb swing out of its plane. The band is the off-plane spread plus at most
    `HINGE_SIDE_MARGIN` wide, and reaches from the rest direction (the straight limb) to
    `widen` beyond the most bent one: the rest end gets no margin, so the limb cannot bend
    through the straight pose the other way.
    """
    dirs = np.concatenate((dirs, np.broadcast_to(_Y, (len(dirs), 1, 3))), axis=1)
    normal = np.linalg.eigh(np.swapaxes(dirs, 1, 2) @ dirs)[1][..., 0]
    off = np.arcsin(np.clip(np.abs(np.einsum("bmk,bk->bm", dirs, normal)), 0.0, 1.0)).max(1)
    mean = dirs.mean(1)
    u = _unit(mean - np.sum(mean * normal, -1, keepdims=True) * normal)
    v = np.cross(normal, u)
    angle = np.arctan2(np.einsum("bmk,bk->bm", dirs, v), np.einsum("bmk,bk->bm", dirs, u))
    low, high = angle.min(1), angle.max(1)
    rest = np.arctan2(v[:, 1], u[:, 1])
    hinged = (off <= HINGE_WIDTH) & (high - low >= HINGE_MIN_ARC)
    low = np.where(rest - low < 1e-6, low, low - widen)
    high = np.where(high - rest < 1e-6, high, high + widen)
    hinged &= high - low < np.pi
    radius = _floored(off) + np.minimum(widen, HINGE_SIDE_MARGIN)
    out = list(cones)
    for bone in np.flatnonzero(hinged):
        ends = [np.cos(t) * u[bone] + np.sin(t) * v[bone] for t in (low[bone], high[bone])]
        out[bone] = [(end, radius[bone]) for end in ends]
    return out


def _principal_position(dirs: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """Position (B, M) of each direction along the principal axis of the set (log map at centre)."""
    e1 = quat.perpendicular(centre)
    e2 = np.cross(centre, e1)
    cos = np.clip(np.einsum("bmk,bk->bm", dirs, centre), -1.0, 1.0)
    across = dirs - cos[..., None] * centre[:, None, :]
    across = across * (np.arccos(cos) / np.maximum(np.linalg.norm(across, axis=-1), 1e-12))[..., None]
    plane = np.stack((np.einsum("bmk,bk->bm", across, e1), np.einsum("bmk,bk->bm", across, e2)), -1)
    plane -= plane.mean(1, keepdims=True)
    axis = np.linalg.eigh(np.swapaxes(plane, 1, 2) @ plane)[1][..., -1]
    return np.einsum("bmk,bk->bm", plane, axis)


def _runs(dirs: np.ndarray, position: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Cuts of the directions into n runs (labels (B, M)), in order along the principal axis.

    Equal lengths and equal counts along the axis, each then settled by a few spherical k-means
    rounds (every direction joins the run with the nearest mean direction): the runs gather
    around the dense parts of the motion and follow a curved set better than straight cuts.
    Runs stay in order since each starts from its slice of the axis and moves only locally.
    """
    low, high = position.min(1, keepdims=True), position.max(1, keepdims=True)
    width = np.maximum(high - low, 1e-12) / n
    by_length = np.clip(((position - low) / width).astype(int), 0, n - 1)
    rank = np.argsort(np.argsort(position, axis=1, kind="stable"), axis=1)
    by_count = rank * n // position.shape[1]
    return _settled(dirs, by_length, n), _settled(dirs, by_count, n)


def _settled(dirs: np.ndarray, labels: np.ndarray, n: int) -> np.ndarray:
    for _ in range(_KMEANS_ROUNDS):
        member = labels[:, None, :] == np.arange(n)[None, :, None]
        means = _unit(member @ dirs)
        labels = np.argmax(dirs @ np.swapaxes(means, 1, 2), axis=-1)
    return labels


def _region_area(chain: Sequence[tuple[np.ndarray, float]], around: np.ndarray) -> float:
    """Solid angle of the Kusudama of `chain`, sampled by a Fibonacci lattice over a bounding cap.

    The bounding cap (centre `around`) holds every cone, hence their bridges, which lie within
    the convex hull of the cones they join.
    """
    directions = np.array([d for d, _ in chain])
    radii = np.array([r for _, r in chain])
    reach = np.arccos(np.clip(directions @ around, -1.0, 1.0)) + radii
    bound = min(np.pi, float(reach.max()))
    k = np.arange(_AREA_SAMPLES) + 0.5
    y = 1.0 - (1.0 - np.cos(bound)) * k / _AREA_SAMPLES
    ring = np.sqrt(np.maximum(0.0, 1.0 - y * y))
    lattice = np.stack((ring * np.cos(_GOLDEN_ANGLE * k), y, ring * np.sin(_GOLDEN_ANGLE * k)), -1)
    samples = quat.rotate(quat.shortest_arc(_Y, around), lattice)
    kusudama = Kusudama([LimitCone(tuple(d), r) for d, r in chain])
    return 2.0 * np.pi * (1.0 - np.cos(bound)) * float(kusudama.allows(samples).mean())


def _twist_ranges(
    kept: np.ndarray, centres: np.ndarray, margin: float, floor: np.ndarray
) -> list[TwistLimit | None]:
    """Per bone a TwistLimit holding every kept twist (at least `floor` (B,) wide, widened by
    `margin` of the range (within [`MIN_SPREAD`, `MAX_SPREAD`]) on each side, within [-pi, pi]),
    or None when the range misses less than `FLOOR_TWIST` of the full turn (the twist is free in
    practice)."""
    twist = _twist_angles(kept, centres)
    low, high = twist.min(1), twist.max(1)
    widen = margin * np.clip(high - low, MIN_SPREAD, MAX_SPREAD) + _MARGIN
    low, high = low - widen, high + widen
    middle = 0.5 * (low + high)
    half = np.maximum(0.5 * (high - low), 0.5 * floor)
    middle = np.clip(middle, -np.pi + half, np.pi - half)
    low, high = np.maximum(middle - half, -np.pi), np.minimum(middle + half, np.pi)
    return [
        None if hi - lo >= 2.0 * np.pi - FLOOR_TWIST else TwistLimit(float(lo), float(hi))
        for lo, hi in zip(low, high)
    ]
