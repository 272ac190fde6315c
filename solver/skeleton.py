"""The bone hierarchy as arrays, with batched forward kinematics.

Bones are stored parents-first so that one pass over depth levels computes
every world frame; each level is a single batch of numpy operations.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
from numpy.typing import ArrayLike

from . import native, quat
from .validation import MAX_COORDINATE, MIN_LENGTH, SceneError, is_real, matrix, name, number

_ORTHONORMAL_TOL = 1e-3


_KEPT_ANSWERS = 8  # answers a skeleton keeps (`Skeleton.kept`)
_Kept = TypeVar("_Kept")
Levels = tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]
"""Forward-kinematics levels (`Skeleton.kinematic_levels`): the roots, then per depth (bones, parents)."""


def rigid_frame(value: object, field: str) -> tuple[np.ndarray, np.ndarray]:
    """(rotation quaternion, translation) of a 4x4 matrix; scale is removed.

    Raises SceneError naming `field` for non-finite, out-of-range or degenerate matrices.
    """
    m = matrix(value, field)
    basis, degenerate, not_rotation = _unscaled_bases(m[None, :3, :3])
    if degenerate[0]:
        raise SceneError(field, "has a degenerate (zero-scale) basis")
    if not_rotation[0]:
        raise SceneError(field, "is not a rotation (sheared or mirrored basis)")
    return quat.from_matrix(basis[0]), m[:3, 3].copy()


def _unscaled_bases(bases: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(N, 3, 3) bases with each column's scale removed, and per basis whether it is degenerate
    (a zero scale) and whether it is no rotation (sheared or mirrored): the rules every rest
    frame and pin target meets."""
    scale = np.sqrt((bases * bases).sum(1))
    det = np.linalg.det(bases)
    degenerate = (scale.min(1) < 1e-9) | (np.abs(det) < 1e-12)
    unit = bases / np.where(degenerate[:, None], 1.0, scale)[:, None, :]
    gram = np.swapaxes(unit, -1, -2) @ unit
    not_rotation = ~degenerate & ((det < 0) | (np.abs(gram - np.eye(3)).max((1, 2)) > _ORTHONORMAL_TOL))
    return unit, degenerate, not_rotation


class Skeleton:
    """Names, parents, armature-space rest frames and lengths of an armature's bones."""

    def __init__(
        self,
        names: Sequence[str],
        parents: Sequence[str | None],
        rest: np.ndarray | Sequence[ArrayLike],
        lengths: np.ndarray | Sequence[float],
    ) -> None:
        """Bad input raises SceneError naming `bones[i].<field>`, i the bone's place in `names`."""
        names = [name(n, f"bones[{i}].name") for i, n in enumerate(names)]
        if not names:
            raise SceneError("bones", "a skeleton needs at least one bone")
        if not (len(parents) == len(rest) == len(lengths) == len(names)):
            raise SceneError("bones", "names, parents, rest and lengths differ in count")
        given = {}
        for i, bone in enumerate(names):
            if bone in given:
                raise SceneError(f"bones[{i}].name", f"'{bone}' is used twice")
            given[bone] = i
        parent_of = {}
        for i, (bone, parent) in enumerate(zip(names, parents)):
            if parent is not None and (not isinstance(parent, str) or parent not in given):
                raise SceneError(f"bones[{i}].parent", f"{parent!r} is not a bone (bone '{bone}')")
            if parent == bone:
                raise SceneError(f"bones[{i}].parent", f"is the bone itself (bone '{bone}')")
            parent_of[bone] = parent
        order = _parents_first(names, parent_of, given)
        self.names = tuple(order)
        self.index = {n: i for i, n in enumerate(order)}
        n = len(order)
        self.parents: np.ndarray = np.array(
            [-1 if (parent := parent_of[b]) is None else self.index[parent] for b in order], dtype=int
        )
        source = np.array([given[bone] for bone in order], dtype=int)
        frames = _rigid_frames(rest, lengths, n)
        if frames is None:
            frames = _rigid_frames_one_by_one(rest, lengths, order, given)
        else:
            frames = tuple(values[source] for values in frames)
        self.rest_rotation, self.rest_head, self.lengths = frames
        self.rest = np.zeros((n, 4, 4))
        self.rest[:, :3, :3] = quat.to_matrix(self.rest_rotation)
        self.rest[:, :3, 3] = self.rest_head
        self.rest[:, 3, 3] = 1.0
        parent_rot = np.where(self.parents[:, None] >= 0, self.rest_rotation[self.parents], quat.IDENTITY)
        self.local_rest_rotation = quat.multiply(quat.conjugate(parent_rot), self.rest_rotation)
        self.local_offset = self._local_offsets()
        depth, root_of = np.zeros(n, dtype=int), np.arange(n)
        for i in range(n):
            if self.parents[i] >= 0:
                depth[i] = depth[self.parents[i]] + 1
                root_of[i] = root_of[self.parents[i]]
        self.depth = depth
        self.root_of = root_of  # each bone's root: a crowd's armatures are solved apart by it
        self.levels = [np.flatnonzero(depth == d) for d in range(depth.max() + 1 if n else 0)]
        self.level_parents = [(idx, self.parents[idx]) for idx in self.levels[1:]]
        self.local_rest_matrix = quat.to_matrix(self.local_rest_rotation)
        self.plan_cache: dict[Hashable, Any] = {}
        self._kept: dict[Hashable, Any] = {}  # `kept`
        self._levels_of: dict[tuple[int, ...], Levels] = {}
        self.unit = _length_unit(self)
        self._normalized: Skeleton | None = None

    def normalized(self) -> Skeleton:
        """This skeleton measured in its own `unit` (same names and order; cached).

        The solver iterates on it, so its length constants (basis scaling, guards, the
        acceleration's mix of angles and lengths) mean the same for a rig built in metres,
        centimetres or millimetres.
        """
        if self.unit == 1.0:
            return self
        if self._normalized is None:
            scaled = copy.copy(self)
            scaled.rest = self.rest.copy()
            scaled.rest[:, :3, 3] /= self.unit
            scaled.rest_head = self.rest_head / self.unit
            scaled.lengths = self.lengths / self.unit
            scaled.local_offset = scaled._local_offsets()
            scaled.plan_cache, scaled._kept = {}, {}
            scaled.unit = 1.0
            self._normalized = scaled
        return self._normalized

    def kept(self, key: Hashable, make: Callable[[], _Kept]) -> _Kept:
        """`make()`, kept under `key` with the last few answers (the least recently used dropped
        first): a drag or a bake solves again and again from the same pose underneath, and what
        the solver works out of that pose alone need not be worked out again."""
        found = self._kept.pop(key, None)
        if found is None:
            found = make()
            if len(self._kept) >= _KEPT_ANSWERS:
                del self._kept[next(iter(self._kept))]
        self._kept[key] = found
        return found

    def _local_offsets(self) -> np.ndarray:
        """Each rest head in its parent's rest frame (armature space for roots)."""
        parent_rot = np.where(self.parents[:, None] >= 0, self.rest_rotation[self.parents], quat.IDENTITY)
        parent_head = np.where(self.parents[:, None] >= 0, self.rest_head[self.parents], 0.0)
        return quat.rotate(quat.conjugate(parent_rot), self.rest_head - parent_head)

    def __len__(self) -> int:
        return len(self.names)

    def ancestors(self, bone: int) -> list[int]:
        """Indices from `bone` itself up to its root."""
        chain = []
        while bone >= 0:
            chain.append(bone)
            bone = self.parents[bone]
        return chain

    def limb_above(self, end: int) -> tuple[int, int] | None:
        """(upper, lower): the two bones above `end`, the limb that ends at it (upper arm and
        forearm above a hand, thigh and shin above a foot), or None without a grandparent."""
        lower = self.parents[end]
        upper = self.parents[lower] if lower >= 0 else -1
        return None if upper < 0 else (int(upper), int(lower))

    def forward(
        self, rotations: np.ndarray, locations: np.ndarray, scales: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """World (armature-space) rotations (N, 4) and heads (N, 3) of a pose.

        Blender's rule: pose = parent_pose @ (parent_rest^-1 @ rest) @ T(location) @ R(rotation)
        @ S(scale); `scales` (N,) are the bones' Y scales (stretch, `stretch.py`; None: 1).
        """
        world, head = self.frames(rotations, locations, scales=scales)
        return quat.from_matrix(world), head

    def frames(
        self,
        rotations: np.ndarray,
        locations: np.ndarray,
        levels: Levels | None = None,
        scales: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """World rotation matrices (N, 3, 3) and heads (N, 3) of a pose (`forward_into` into new
        arrays; with `levels`, only their bones' rows are set)."""
        n = len(self.names)
        world, head = np.empty((n, 3, 3)), np.empty((n, 3))
        self.forward_into(rotations, locations, world, head, levels, scales)
        return world, head

    def forward_into(
        self,
        rotations: np.ndarray,
        locations: np.ndarray,
        world: np.ndarray,
        head: np.ndarray,
        levels: Levels | None = None,
        scales: np.ndarray | None = None,
    ) -> None:
        """World rotation matrices (N, 3, 3) and heads (N, 3) into preallocated arrays.

        Matrices make each depth level two batched matmuls; where the compiled library is built
        (and no bone is scaled) it does the same bone by bone (`native.forward_into`): a level's
        numpy calls cost more than a small rig's whole pass in C. `levels` (from
        `kinematic_levels`) restricts the pass to a subset of bones closed under ancestors; the
        others are left untouched. `scales` (N,) (None: 1)
        stretch each bone along its Y: a child's offset along its parent's Y scales with the
        parent's scale (the bases stay rotations: the solver's scale is only a bone's length).
        """
        if scales is None and native.forward_into(self, rotations, locations, world, head, levels):
            return
        roots, steps = levels if levels is not None else (self.levels[0], self.level_parents)
        local = self.local_rest_matrix @ quat.to_matrix(rotations)
        offset = (
            self.local_offset
            + (self.local_rest_matrix @ np.asarray(locations, dtype=float)[..., None])[..., 0]
        )
        if scales is not None:
            has_parent = self.parents >= 0
            offset[has_parent, 1] *= np.asarray(scales, dtype=float)[self.parents[has_parent]]
        world[roots] = local[roots]
        head[roots] = offset[roots]
        for idx, parent in steps:
            parent_world = world[parent]
            world[idx] = parent_world @ local[idx]
            head[idx] = head[parent] + (parent_world @ offset[idx][..., None])[..., 0]

    def kinematic_levels(self, bones: Iterable[int]) -> Levels:
        """Depth levels of `bones` and all their ancestors, for `forward_into(levels=...)`; kept
        per set of bones (the controls ask for the same limbs every solve; not to be modified)."""
        key = tuple(sorted({int(b) for b in bones}))
        found = self._levels_of.get(key)
        if found is None:
            keep = np.zeros(len(self.names), dtype=bool)
            for b in key:
                keep[self.ancestors(b)] = True
            steps = [(idx[keep[idx]], self.parents[idx[keep[idx]]]) for idx in self.levels[1:]]
            found = self._levels_of[key] = (
                self.levels[0][keep[self.levels[0]]],
                [(i, p) for i, p in steps if len(i)],
            )
        return found

    def parent_frames(self, bones: np.ndarray, world: np.ndarray) -> np.ndarray:
        """World rotation matrix of each bone's rest frame under its posed parent: the constraint frame."""
        p = self.parents[bones]
        if np.all(p >= 0):
            return world[p] @ self.local_rest_matrix[bones]
        parent_world = np.where((p >= 0)[:, None, None], world[p], np.eye(3))
        return parent_world @ self.local_rest_matrix[bones]


def _rigid_frames(
    rest: np.ndarray | Sequence[ArrayLike], lengths: np.ndarray | Sequence[float], n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(rest rotations (N, 4), rest heads (N, 3), lengths (N,)) in the given order, every bone
    checked at once; None when some bone fails a check or the input is not numeric arrays (then
    `_rigid_frames_one_by_one` names the bone). The bounds are `number`'s, the frames
    `_unscaled_bases`' as in `rigid_frame`."""
    if not isinstance(rest, np.ndarray) or rest.shape != (n, 4, 4) or rest.dtype.kind not in "fiu":
        return None
    if isinstance(lengths, np.ndarray):
        if lengths.shape != (n,) or lengths.dtype.kind not in "fiu":
            return None
    elif not all(is_real(length) for length in lengths):
        return None
    try:
        lengths = np.array(lengths, dtype=float)
    except OverflowError:
        return None
    rest = rest.astype(float)
    if not (
        np.all(np.abs(rest) <= MAX_COORDINATE)
        and np.all((lengths >= MIN_LENGTH) & (lengths <= MAX_COORDINATE))
    ):
        return None
    basis, degenerate, not_rotation = _unscaled_bases(rest[:, :3, :3])
    if degenerate.any() or not_rotation.any():
        return None
    return quat.from_matrix(basis), rest[:, :3, 3].copy(), lengths


def _rigid_frames_one_by_one(
    rest: np.ndarray | Sequence[ArrayLike],
    lengths: np.ndarray | Sequence[float],
    order: Sequence[str],
    given: Mapping[str, int],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What `_rigid_frames` gives, in `order`, bone by bone: the first bad bone raises its SceneError."""
    n = len(order)
    frames = np.empty((n, 4)), np.empty((n, 3)), np.empty(n)
    for i, bone in enumerate(order):
        src = given[bone]
        try:
            frames[2][i] = number(lengths[src], f"bones[{src}].length", MIN_LENGTH, MAX_COORDINATE)
            frames[0][i], frames[1][i] = rigid_frame(rest[src], f"bones[{src}].rest")
        except SceneError as error:
            raise SceneError(error.field, f"{error.reason} (bone '{bone}')") from None
    return frames


def _length_unit(skeleton: Skeleton) -> float:
    """The rig's size: the farthest rest head or tail from the head of its root bone.

    About 1 for a standing human in metres (hips to toes or head), and scaled with the rig
    in any other unit; 1 for an empty skeleton.
    """
    n = len(skeleton.names)
    if n == 0:
        return 1.0
    root = skeleton.root_of
    tails = skeleton.rest_head + skeleton.rest[:, :3, 1] * skeleton.lengths[:, None]
    base = skeleton.rest_head[root]
    reach = max(
        np.linalg.norm(skeleton.rest_head - base, axis=-1).max(), np.linalg.norm(tails - base, axis=-1).max()
    )
    return float(reach) if reach > 0.0 else 1.0


def _parents_first(
    names: Sequence[str], parent_of: Mapping[str, str | None], given: Mapping[str, int]
) -> list[str]:
    order: list[str] = []
    state: dict[str, str] = {}
    for start in names:
        path = []
        node: str | None = start
        while node is not None and state.get(node) is None:
            state[node] = "visiting"
            path.append(node)
            node = parent_of[node]
        if node is not None and state[node] == "visiting":
            raise SceneError(
                f"bones[{given[node]}].parent", f"the parent chain of bone '{node}' forms a cycle"
            )
        for b in reversed(path):
            state[b] = "done"
            order.append(b)
    return order
