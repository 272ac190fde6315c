"""The solver objects an armature turns into, cached per armature between solves.

The rig-derived solver objects (Skeleton, joint limits, stiffness, the list of pins) are rebuilt
only when a cheap signature of the armature (bone names, rest matrices, lengths, per-bone
settings) changes. The live handler skips even that signature when only pin targets moved.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import bpy
import numpy as np

from ...solver import EwbikError, Skeleton
from ...solver.balance import Body
from ...solver.kusudama import JointLimits, Kusudama, cone_direction
from ..com.armature_checks import MIN_BONE_LENGTH, RigError, check_armature
from ..com.limit_settings import has_limits, limits_dict, limits_key
from ..com.messages import deleted_targets
from ..com.stored_settings import (
    bone_setting_default,
    stored_bone_limits,
    stored_bone_settings,
    stored_object,
)
from ..rigs import production_rigs
from ..rigs.production_checks import placed_controls, posed_bones, with_mechanism
from .pose_io import Locks, PoseBuffers, read_locks
from .pose_underneath import forget as forget_pose

if TYPE_CHECKING:
    from ...solver import Pin, SolverSettings
    from ..com.pin_kinds import PinKind


@dataclasses.dataclass
class CheckedPins:
    """The pins as last validated against the rig and the scene (bone exists, target alive and in
    the armature's scene, weights valid); until the next scan of the bone settings an update
    only reads the targets and moves the pins whose target moved."""

    bones: tuple[str, ...]
    targets: tuple[bpy.types.Object, ...]
    target_bones: tuple[str | None, ...]  # per pin: the followed bone of an armature target, else None
    pins: list[Pin]
    frames: np.ndarray  # (P, 7): each pin's target as armature-space quaternion and position
    # per pin: (bone, its settings) it was made with
    keys: list[tuple] = dataclasses.field(default_factory=list)
    kinds: list[PinKind] = dataclasses.field(default_factory=list)  # per pin: what it holds
    poles: tuple[bpy.types.Object | None, ...] = ()  # per pin: its pole object or None
    # (P, 3) armature space as the pins hold them, NaN: none; None: no pin has a pole (nothing to read)
    pole_positions: np.ndarray | None = None


@dataclasses.dataclass
class PinnedChains:
    """The pinned bones and every bone above them, on their own: the only bones a solve can turn
    (the pinned bones' poses depend on nothing else), so a solve packs, solves and writes these
    and no other bone of the rig, however many it has."""

    pinned: tuple[str, ...]  # the pinned bones' names these chains were made for
    rows: np.ndarray  # pose.bones index of each chain bone, in `skeleton` order
    skeleton: Skeleton  # measured in the whole rig's unit, so it takes the whole rig's steps
    stretch: np.ndarray | None = None  # `skeleton` order, each bone's maximum stretch
    limits: JointLimits | None = None
    limits_of: JointLimits | None = None  # the whole rig's limits `limits` were taken from

    @functools.cached_property
    def stretchable(self) -> np.ndarray:
        """`skeleton` indices of the bones that may stretch (stretch > 1), worked out once: every
        solve and every write asks."""
        return np.flatnonzero(self.stretch > 1.0)


@dataclasses.dataclass
class Rig:
    """What one armature turns into on the solver side, reused between solves."""

    structure_key: tuple
    names: tuple[str, ...]
    index: dict[str, int]  # bone name -> pose.bones index
    skeleton: Skeleton
    to_solver: np.ndarray  # pose.bones index -> skeleton index
    rest: np.ndarray  # (N, 4, 4) armature-space rest matrices, pose.bones order
    parents: tuple[str | None, ...]  # parent name or None, pose.bones order
    buffers: PoseBuffers
    settings_key: tuple | None = None
    stiffness: np.ndarray | None = None  # skeleton order, from PoseBone.ewbik.stiffness
    stretch: np.ndarray | None = None  # skeleton order, from PoseBone.ewbik.stretch
    limits: JointLimits | None = None
    limit_dicts: dict[str, dict[str, Any]] | None = None  # bone name -> scene-document "limits" field
    # (bone, limits_key, comfort) of every limited bone `limits` was built for
    limit_keys: tuple | None = None
    pins: tuple[tuple[str, bpy.types.Object], ...] = ()  # (bone name, target object), pose.bones order
    poles: tuple[bpy.types.Object | None, ...] = ()  # per pin: its pole object or None
    checked_pins: CheckedPins | None = None  # validated at the last scan; None: check again
    # (bone, its pin settings) -> a Pin with them
    validated_pins: dict[tuple, Pin] = dataclasses.field(default_factory=dict)
    settings_error: EwbikError | None = None  # why the bone settings cannot be used, until they change
    driven: np.ndarray | None = None  # pose.bones order: the solve may change this bone's pose
    fixed: dict[str, str] = dataclasses.field(default_factory=dict)  # bone -> why the solver may not move it
    fixed_mask: np.ndarray | None = None  # pose.bones order: bones in `fixed`
    posed_mask: np.ndarray | None = None  # pose.bones order: fixed bones that constraints or drivers pose
    # pose.bones order: fixed bones and those above a posed one on a pinned chain
    held: np.ndarray | None = None
    # (pinned control, deform bone it moves)
    counterparts: list[tuple[str, str]] = dataclasses.field(default_factory=list)
    # pins, fixed bones and role mapping the counterparts were found for
    counterparts_key: tuple | None = None
    # pose.bones order: pinned IK controls, put on their targets, not solved
    placed: np.ndarray | None = None
    # (rotations, locations) pose.bones order: where solves start (pose_underneath)
    underneath: tuple[np.ndarray, np.ndarray] | None = None
    # (rotations, locations) as the last solve wrote them
    written: tuple[np.ndarray, np.ndarray] | None = None
    # (full, SolverSettings) of the last solve_armature
    last_settings: tuple[bool, SolverSettings] | None = None
    chains: PinnedChains | None = None  # what a solve_armature hands to the solver
    body: Body | None = None  # segment masses and feet for balance (`balance_body.rig_body`)
    # (what it was made from, the Body of `chains`) (`balance_body.chains_body`)
    chains_body: tuple | None = None

    def solve_stiffness(
        self, locks: Locks, rows: slice | Sequence[int] | np.ndarray = slice(None)
    ) -> np.ndarray:
        """Each bone's stiffness as a solve hands it to the solver (pose.bones order, or those
        `rows` of it): 1 where no solve may turn the bone, fully stiff, fully rotation-locked
        (`read_locks`) or held (`held`). The one rule for what the solver may move: the solves,
        the driven bones, Target Follow's root and the scene document read it here."""
        stiffness = self.stiffness[self.to_solver[rows]]
        stiffness[(locks.fully_locked | self.held)[rows]] = 1.0
        return stiffness


_rigs: dict[int, Rig] = {}  # object session uid -> Rig
# the live armatures' combined rig (crowd_solve), forgotten with the rigs it was built from
crowds: dict[tuple, Any] = {}
# (bone, limits_key, comfort) -> (limits dict, Kusudama); the key fixes both
_bone_limits_made: dict[tuple, tuple[dict[str, Any], Kusudama]] = {}
_BONE_LIMITS_KEPT = 4096


def clear_cache() -> None:
    """Forget every cached rig (file load, add-on unregister)."""
    _rigs.clear()
    crowds.clear()


def cached_rig(obj: bpy.types.Object) -> Rig | None:
    """The rig of obj as last built, or None; never rebuilds."""
    return _rigs.get(obj.session_uid)


def forget_armature_state(obj: bpy.types.Object) -> None:
    """Something but the solver may have changed obj (the user, the animation): forget what a solve
    reuses while only targets move, the pose channels the rig's buffers mirror
    (`pose_io.read_pose`) and the last solve's settings. Held buffers keep standing for the
    channels: a bake keeps its solved pose there, ahead of what Blender shows."""
    rig = _rigs.get(obj.session_uid)
    if rig is not None:
        rig.buffers.mirrors_channels = rig.buffers.held and rig.buffers.mirrors_channels
        rig.last_settings = None
        rig.checked_pins = None


def forget_pin_settings(obj: bpy.types.Object) -> None:
    """A frame change may have changed animated pin settings (kind, weight, priority): check the
    pins again at the next solve (unchanged ones are reused, `pin_reading`)."""
    rig = _rigs.get(obj.session_uid)
    if rig is not None:
        rig.checked_pins = None


def forget_recorded_poses() -> None:
    """The channels of every armature may have been put back (undo): read them and the record of
    the pose underneath from Blender again."""
    for rig in _rigs.values():
        forget_pose(rig)
        rig.buffers.mirrors_channels = rig.buffers.held and rig.buffers.mirrors_channels


def forget_deleted_rigs() -> set[int]:
    """Forget the cached rigs of armatures no longer in the file; returns the session uids of
    the objects that are."""
    alive = {obj.session_uid for obj in bpy.data.objects}
    for uid in set(_rigs) - alive:
        del _rigs[uid]
    return alive


def rig_for(obj: bpy.types.Object, rescan: bool) -> Rig:
    """The cached rig of obj, rebuilt if the armature's structure or bone settings changed."""
    check_armature(obj)
    rig = _rigs.get(obj.session_uid)
    if rig is not None and not rescan:
        if rig.settings_error is not None:
            raise rig.settings_error.with_traceback(None)
        return rig
    key, rest, lengths = _structure_key(obj)
    if rig is None or rig.structure_key != key:
        _rigs.pop(obj.session_uid, None)  # a failed rebuild must not leave the old rig to solve
        if rig is None:
            forget_deleted_rigs()
        rig = _build_rig(obj, key, rest, lengths)
        _rigs[obj.session_uid] = rig
    deleted = _scan_bone_settings(obj, rig)
    if deleted:
        raise targets_deleted(deleted)
    return rig


def targets_deleted(bones: list[str]) -> RigError:
    """The refusal of pins whose target was deleted (they are no longer pinned)."""
    return RigError("target", "was deleted", deleted_targets(bones))


def _structure_key(obj: bpy.types.Object) -> tuple[tuple, np.ndarray, np.ndarray]:
    bones = obj.data.bones
    n = len(bones)
    rest = np.empty(n * 16, np.float32)
    lengths = np.empty(n, np.float32)
    bones.foreach_get("matrix_local", rest)
    bones.foreach_get("length", lengths)
    key = (
        obj.data.session_uid,
        tuple(obj.pose.bones.keys()),
        tuple(bones.keys()),
        bones[0].as_pointer(),
        rest.tobytes(),
        lengths.tobytes(),
    )
    return key, rest.reshape(n, 4, 4).transpose(0, 2, 1).astype(float), lengths.astype(float)


def _build_rig(obj: bpy.types.Object, key: tuple, rest: np.ndarray, lengths: np.ndarray) -> Rig:
    bones = obj.data.bones
    pose_names = key[1]
    data_index = {name: i for i, name in enumerate(key[2])}
    from_data = np.array([data_index[name] for name in pose_names])
    rest = rest[from_data]
    lengths = lengths[from_data]
    if not np.all(np.isfinite(rest)):
        bad = pose_names[int(np.flatnonzero(~np.isfinite(rest).reshape(len(rest), -1).all(-1))[0])]
        raise RigError(f"bone '{bad}'", "rest matrix contains NaN or infinity")
    short = np.flatnonzero(~(lengths > MIN_BONE_LENGTH))
    if len(short):
        field = f"bone '{pose_names[int(short[0])]}'"
        reason = "has zero length: give it a length in Edit Mode"
        raise RigError(field, reason, f"{field} {reason}")
    parents = tuple(None if bones[name].parent is None else bones[name].parent.name for name in pose_names)
    skeleton = Skeleton(pose_names, parents, rest, lengths)
    to_solver = np.array([skeleton.index[name] for name in pose_names])
    return Rig(
        structure_key=key,
        names=pose_names,
        index={name: i for i, name in enumerate(pose_names)},
        skeleton=skeleton,
        to_solver=to_solver,
        rest=rest,
        parents=parents,
        buffers=PoseBuffers.empty(len(pose_names)),
    )


def _scan_bone_settings(obj: bpy.types.Object, rig: Rig) -> list[str]:
    """Read pins, stiffness and limits of every bone; rebuild stiffness/limits if they changed.

    Returns the bones whose target was deleted since the last scan (they are unpinned now).
    Bad settings raise RigError (the solver's SceneError for limits it refuses) and stay reported
    until they change.
    """
    pins, poles, stiffness, stretch, limit_keys = _read_bone_settings(obj)
    pinned = {bone for bone, _ in pins}
    deleted = [bone for bone, target in rig.pins if bone not in pinned and not _alive(target)]
    rig.pins, rig.poles = tuple(pins), tuple(poles)
    rig.checked_pins = None
    posed = posed_bones(obj)
    rig.fixed = with_mechanism(obj, posed)
    rig.fixed_mask = np.array([name in rig.fixed for name in rig.names], bool)
    rig.posed_mask = np.array([name in posed for name in rig.names], bool)
    rig.placed = placed_controls(obj, pinned)
    locks = read_locks(obj.pose.bones, rig.buffers)
    settings_key = (
        tuple(bone for bone, _ in pins),
        tuple(stiffness),
        tuple(stretch),
        limit_keys,
        locks.fully_locked.tobytes(),
        (rig.fixed_mask | rig.placed).tobytes(),
    )
    counterparts_key = (settings_key[0], settings_key[-1], tuple(production_rigs.role_overrides(obj).items()))
    if counterparts_key != rig.counterparts_key:
        rig.counterparts = production_rigs.deform_counterparts(obj, list(settings_key[0]), rig.fixed)
        rig.counterparts_key = counterparts_key
    if settings_key != rig.settings_key:
        rig.settings_key = None
        try:
            _apply_bone_settings(obj, rig, np.array(stiffness, dtype=float), stretch, limit_keys, locks)
        except EwbikError as error:
            rig.settings_error = error
            raise
        rig.settings_error = None
        rig.settings_key = settings_key
    return deleted


def _read_bone_settings(obj: bpy.types.Object) -> tuple[list, list, list[float], list[float], tuple]:
    """(pins as (bone, target), each pin's pole object or None, stiffness and stretch per bone,
    (bone, limits_key, comfort) per limited bone).

    Blender's foreach_get cannot reach into the `ewbik` property groups, so each pose bone and
    bone is read through its properties once (`stored_bone_settings`, `stored_bone_limits`:
    bones that store none hold the defaults), and limits only as a key: their dicts are made
    from it.
    """
    pins, poles, stiffness, stretch, limit_keys = [], [], [], [], []
    default_stiffness, default_stretch = bone_setting_default("stiffness"), bone_setting_default("stretch")
    for pose_bone in obj.pose.bones:
        limits = stored_bone_limits(pose_bone.bone)
        if has_limits(limits):
            limit_keys.append((pose_bone.name, limits_key(limits), limits.comfort))
        props = stored_bone_settings(pose_bone)
        if props is None:
            stiffness.append(default_stiffness)
            stretch.append(default_stretch)
            continue
        target = stored_object(props, "target")
        if target is not None:
            pins.append((pose_bone.name, target))
            poles.append(stored_object(props, "pole"))
        stiffness.append(props.stiffness)
        stretch.append(props.stretch)
    return pins, poles, stiffness, stretch, tuple(limit_keys)


def _apply_bone_settings(
    obj: bpy.types.Object,
    rig: Rig,
    stiffness: np.ndarray,
    stretch: list[float],
    limit_keys: tuple,
    locks: Locks,
) -> None:
    if not np.all(np.isfinite(stiffness)):
        raise RigError(
            f"bone '{rig.names[int(np.flatnonzero(~np.isfinite(stiffness))[0])]}'", "stiffness is NaN"
        )
    rig.stiffness = np.empty_like(stiffness)
    rig.stiffness[rig.to_solver] = stiffness
    rig.stretch = np.empty_like(stiffness)
    rig.stretch[rig.to_solver] = stretch
    if limit_keys != rig.limit_keys:
        rig.limit_keys = None
        _set_joint_limits(obj, rig, limit_keys)
        rig.limit_keys = limit_keys
    rig.held = _held_bones(rig) | rig.placed
    rig.driven = _driven_bones(rig, rig.solve_stiffness(locks) >= 1.0)
    rig.chains = _chains_with_settings(rig)


def _alive(target: bpy.types.Object) -> bool:
    try:
        return target.name is not None
    except ReferenceError:
        return False


def _set_joint_limits(obj: bpy.types.Object, rig: Rig, limit_keys: tuple) -> None:
    """The rig's limit dicts and JointLimits from its limited bones (`_read_bone_settings`).

    A bone's dict and Kusudama are kept per limits key across rigs, so an edit rebuilds only the
    edited bone's and a rebuilt rig (an armature edit) none; the key determines both, so a kept
    pair is never stale.
    """
    if len(_bone_limits_made) > _BONE_LIMITS_KEPT:
        _bone_limits_made.clear()
    made = []
    for entry in limit_keys:
        found = _bone_limits_made.get(entry)
        if found is None:
            bone = entry[0]
            found = _bone_limits_made[entry] = _bone_limits(bone, limits_dict(obj.data.bones[bone].ewbik))
        made.append(found)
    rig.limit_dicts = {entry[0]: limit for entry, (limit, _) in zip(limit_keys, made)}
    kusudamas = {rig.skeleton.index[entry[0]]: kusudama for entry, (_, kusudama) in zip(limit_keys, made)}
    rig.limits = JointLimits(kusudamas, len(rig.names)) if kusudamas else None


def _bone_limits(bone: str, limit: dict[str, Any]) -> tuple[dict[str, Any], Kusudama]:
    """(limits dict with unit cone directions, its Kusudama): the property panel lets directions be
    any length. Bad limits raise RigError, or the solver's SceneError, naming the bone."""
    cones = []
    for i, cone in enumerate(limit["cones"]):
        direction = cone_direction(cone["direction"])
        if direction is None:
            raise RigError(f"bone '{bone}'", f"limit cone {i + 1} has no direction")
        cones.append({"direction": direction.tolist(), "radius": float(cone["radius"])})
    limit = {**limit, "cones": cones}
    return limit, Kusudama.from_dict(limit, bone=bone)


def _chains_with_settings(rig: Rig) -> PinnedChains | None:
    """The rig's PinnedChains with its current stretch and limits (None without pins); the
    chains' skeleton is made again only when the pinned bones changed."""
    pinned = tuple(bone for bone, _ in rig.pins)
    if not pinned:
        return None
    chains = rig.chains
    if chains is None or chains.pinned != pinned:
        chains = _chains_of(rig, pinned)
    in_rig = rig.to_solver[chains.rows]
    limits = chains.limits if chains.limits_of is rig.limits else None
    if rig.limits is not None and limits is None:
        every = rig.limits.kusudamas
        kusudamas = {k: every[i] for k, i in enumerate(in_rig.tolist()) if i in every}
        limits = JointLimits(kusudamas, len(in_rig)) if kusudamas else None
    return dataclasses.replace(
        chains,
        stretch=rig.stretch[in_rig],
        limits=limits,
        limits_of=rig.limits,
    )


def _chains_of(rig: Rig, pinned: tuple[str, ...]) -> PinnedChains:
    """PinnedChains of these pinned bones: the whole rig's skeleton restricted to them and the
    bones above them, in the same order and unit (the solver then steps exactly as on the whole
    rig, where the other bones see no pin)."""
    on_chain = pinned_chains(rig.index, rig.parents, pinned)
    in_rig = np.sort(rig.to_solver[on_chain])
    names = [rig.skeleton.names[i] for i in in_rig.tolist()]
    rows = np.array([rig.index[name] for name in names], dtype=int)
    parents = [rig.parents[row] for row in rows.tolist()]
    skeleton = Skeleton(names, parents, rig.rest[rows], rig.skeleton.lengths[in_rig])
    skeleton.unit = rig.skeleton.unit  # before anything measures it (`Skeleton.normalized`)
    return PinnedChains(pinned=pinned, rows=rows, skeleton=skeleton)


def pinned_chains(index: dict[str, int], parents: Sequence[str | None], pinned: Iterable[str]) -> np.ndarray:
    """Mask (in `index` order) of the pinned bones and every bone above them: the bones a solve turns.

    index: bone name -> position; parents: parent name or None per position; pinned: bone names.
    """
    on_chain = np.zeros(len(parents), bool)
    for bone in pinned:
        node = bone
        while node is not None:
            on_chain[index[node]] = True
            node = parents[index[node]]
    return on_chain


def _held_bones(rig: Rig) -> np.ndarray:
    """Fixed bones, and the bones above a posed bone on a pinned bone's chain.

    A bone that constraints or drivers pose ignores (Copy Transforms) or replaces (Child Of,
    Armature) what its parent does, so turning the bones above it would move the pin in a way
    the solver cannot foresee: a pinned chain is solved from the pinned bone up to the first
    posed bone only. A mechanism bone that nothing poses passes its parent's turn on: it is
    held, the bones above it are not.
    """
    index = rig.index
    held = rig.fixed_mask.copy()
    for bone, _ in rig.pins:
        node, above_posed = bone, False
        while node is not None:
            above_posed = above_posed or rig.posed_mask[index[node]]
            held[index[node]] |= above_posed
            node = rig.parents[index[node]]
    return held


def _driven_bones(rig: Rig, frozen: np.ndarray) -> np.ndarray:
    """Bones whose pose a solve can change: below an unfrozen ancestor of a pinned bone."""
    index = rig.index
    solvable = pinned_chains(index, rig.parents, [bone for bone, _ in rig.pins]) & ~frozen
    driven = solvable.copy()
    for i in np.argsort(rig.skeleton.depth[rig.to_solver], kind="stable"):
        parent = rig.parents[i]
        if parent is not None and driven[index[parent]]:
            driven[i] = True
    return driven
