"""Armature <-> solver arrays: read the pose and pins, solve, write the pose back.

Everything per bone is read and written with `foreach_get` / `foreach_set` on
float32 buffers (per-bone RNA access costs microseconds per bone, which a live
update on a 159-bone rig cannot afford). Rotation modes are honoured: quaternion
bones stay vectorized; Euler and axis-angle bones are converted with mathutils
one by one, and only those. Blender's rotation locks keep the locked channels'
values, as the transform tools do; fully locked bones are handed to the solver
as stiffness 1 so they never absorb motion that would be thrown away.

Production rigs pose many bones through constraints and drivers (a Rigify deform bone copies
its mechanism bone, which copies the FK or IK control). The solver cannot move those bones:
their channels are overwritten on evaluation. They are found before each solve (`fixed_bones`),
held still with everything above them on a pinned chain, handed to the solver in the pose
Blender evaluated for them, and a pin on one of them is an error that names the control to pin
instead.

The rig-derived solver objects (Skeleton, joint limits, stiffness, the list of
pins) are cached per armature and rebuilt only when a cheap signature of the
armature (bone names, rest matrices, lengths, per-bone settings) changes. The
live handler skips even that signature when only pin targets moved.

Arrays in the returned SolveResult follow `obj.pose.bones` order.
"""

import dataclasses
import math
import re
import time

import bpy
import mathutils
import numpy as np

from ..solver import Pin, Skeleton, SolverSettings, quat, solve
from ..solver.kusudama import JointLimits, Kusudama
from ..solver.scene import SETTINGS_FIELDS
from ..solver.validation import MAX_COORDINATE
from . import production_rigs
from .messages import distance
from .rotation_channels import channels_to_quaternions


class RigError(Exception):
    """A problem with the user's rig or pins; the message is shown to the user as is."""


_ROTATION_MODE = {
    item.identifier: item.value for item in bpy.types.PoseBone.bl_rna.properties["rotation_mode"].enum_items
}
_MODE_NAME = {value: name for name, value in _ROTATION_MODE.items()}
_QUATERNION = _ROTATION_MODE["QUATERNION"]
_AXIS_ANGLE = _ROTATION_MODE["AXIS_ANGLE"]
_MIN_BONE_LENGTH = 1e-5  # Blender keeps "zero-length" bones at about 2e-6
# The narrowest refresh after which Blender re-evaluates a pose written from inside a depsgraph
# handler: the transform tag from 4.5 on (half the cost of a full tag on 5.2); 4.2 ignores it
# there and needs the data tag (as costly as a full one).
_POSE_REFRESH = {"OBJECT"} if bpy.app.version >= (4, 5, 0) else {"DATA"}
PLANTED_WEIGHT = 1000.0  # a planted pin's weight is multiplied by this, so ordinary pins give way to it
_POSITION_ONLY_AXES = (0.0, 0.0, 0.0)


@dataclasses.dataclass
class _PoseBuffers:
    """float32 mirrors of the pose-bone channels, in pose.bones order."""

    modes: np.ndarray
    quaternion: np.ndarray
    euler: np.ndarray
    axis_angle: np.ndarray
    location: np.ndarray
    lock_rotation: np.ndarray
    lock_w: np.ndarray
    lock_4d: np.ndarray
    lock_location: np.ndarray

    @classmethod
    def empty(cls, n):
        return cls(
            modes=np.empty(n, np.int32),
            quaternion=np.empty((n, 4), np.float32),
            euler=np.empty((n, 3), np.float32),
            axis_angle=np.empty((n, 4), np.float32),
            location=np.empty((n, 3), np.float32),
            lock_rotation=np.empty((n, 3), bool),
            lock_w=np.empty(n, bool),
            lock_4d=np.empty(n, bool),
            lock_location=np.empty((n, 3), bool),
        )


@dataclasses.dataclass
class _Rig:
    """What one armature turns into on the solver side, reused between solves."""

    structure_key: tuple
    names: tuple
    index: dict  # bone name -> pose.bones index
    skeleton: Skeleton
    to_solver: np.ndarray  # pose.bones index -> skeleton index
    rest: np.ndarray  # (N, 4, 4) armature-space rest matrices, pose.bones order
    lengths: np.ndarray
    parents: tuple  # parent name or None, pose.bones order
    buffers: _PoseBuffers
    settings_key: tuple = None
    stiffness: np.ndarray = None  # skeleton order, from PoseBone.ewbik.stiffness
    limits: JointLimits = None
    limit_dicts: dict = None  # bone name -> scene-document "limits" field
    pins: tuple = ()  # (bone name, target object), pose.bones order
    checked_pins: "_CheckedPins" = None  # validated at the last scan; None: check again
    validated_pins: dict = dataclasses.field(default_factory=dict)  # (bone, its pin settings) -> a Pin with them
    settings_error: str = None  # why the bone settings cannot be used, until they change
    driven: np.ndarray = None  # pose.bones order: the solve may change this bone's pose
    fixed: dict = dataclasses.field(default_factory=dict)  # bone -> why the solver may not move it
    fixed_mask: np.ndarray = None  # pose.bones order: bones in `fixed`
    posed_mask: np.ndarray = None  # pose.bones order: fixed bones that constraints or drivers pose
    held: np.ndarray = None  # pose.bones order: fixed bones and those above a posed one on a pinned chain
    counterparts: list = dataclasses.field(default_factory=list)  # (pinned control, deform bone it moves)
    counterparts_key: tuple = None  # pins, fixed bones and role mapping the counterparts were found for
    placed: np.ndarray = None  # pose.bones order: pinned IK controls, put on their targets, not solved
    underneath: tuple = None  # (rotations, locations) pose.bones order: the pose the solver blends over
    written: tuple = None  # (rotations, locations) as the last solve wrote them
    solved: tuple = None  # (rotations, locations) as the last solve found them, before the blend
    holding: np.ndarray = None  # bones whose channels still hold what the last solve wrote


_rigs = {}


def clear_cache():
    """Forget every cached rig (file load, add-on unregister)."""
    _rigs.clear()
    _crowds.clear()


def forget_deleted_rigs():
    """Forget the cached rigs of armatures no longer in the file; returns the session uids of
    the objects that are."""
    alive = {obj.session_uid for obj in bpy.data.objects}
    for uid in set(_rigs) - alive:
        del _rigs[uid]
    return alive


def solve_armature(obj, *, full=False, rescan=True):
    """Read the armature's pose and pins, solve, write the moved bones back.

    full: ignore the time budget (the Solve operator, baking).
    rescan: re-read per-bone settings (pins, stiffness, limits). The live handler
    passes False when only pin targets moved since the last solve.
    Raises RigError for anything the user must fix; the pose is then unchanged (unless the
    second solve for partly locked bones fails: the first solve's pose stays).
    """
    started = time.perf_counter()
    _check_writable(obj)
    rig = _rig_for(obj, rescan)
    if not rig.pins:
        raise RigError(f"'{obj.name}' has no pinned bones: select bones in Pose Mode and use Pin")
    _check_pins_movable(obj, rig)
    _place_ik_controls(obj, rig)
    rotations, locations, locks = _read_pose(obj, rig)
    _track_underneath(rig, rotations, locations)
    settings = _settings(obj, full)  # before the pins: a zero scale would make their targets infinitely far
    pins = _pins(obj, rig)
    stiffness = rig.stiffness.copy()
    stiffness[rig.to_solver[locks.fully_locked | rig.held]] = 1.0
    pins, settings = _place_rotation_only(obj, rig, pins, settings, stiffness, rotations, locations)
    result, solved = _solve_and_write(obj, rig, pins, settings, stiffness, rotations, locations, locks)
    # The solver cannot see partial locks, so where keeping the locked channels changed a bone,
    # the written pose misses the targets by what those channels contributed. A second solve
    # from that pose, with those bones held, lets the other bones make up for it.
    turned = np.abs(np.einsum("ij,ij->i", result.rotations, solved)) < 1.0 - 1e-12
    held = result.moved & locks.any_rotation & ~locks.fully_locked & turned
    if not np.any(held):
        return result
    if settings.time_budget_ms is not None:
        left = settings.time_budget_ms - (time.perf_counter() - started) * 1e3
        if left <= 0.0:
            return result
        settings = dataclasses.replace(settings, time_budget_ms=left)
    rotations, locations, locks = _read_pose(obj, rig)
    stiffness[rig.to_solver[held]] = 1.0
    second, _ = _solve_and_write(obj, rig, pins, settings, stiffness, rotations, locations, locks)
    return dataclasses.replace(
        second,
        iterations=result.iterations + second.iterations,
        ms=result.ms + second.ms,
        moved=result.moved | second.moved,
    )


@dataclasses.dataclass
class _Crowd:
    """Several rigs as one skeleton with a root per armature, cached while the rigs stay the same."""

    key: tuple
    skeleton: Skeleton
    pose_index: list  # per rig: pose.bones index -> combined skeleton index
    limits: JointLimits
    stiffness: np.ndarray


_crowds = {}


def solve_crowd(objects):
    """Solve several live armatures in one solver call (their bone settings as last scanned).

    Armatures with the same settings (and rig size) become one problem whose skeleton holds each
    of them as its own tree, with the sum of their time budgets; the others, and armatures with
    partly locked bones (which need a second solve), are solved one by one. Returns
    {object: SolveResult or RigError}, the poses written like `solve_armature`.
    """
    outcomes, groups, alone = {}, {}, []
    for obj in objects:
        try:
            _check_writable(obj)
            rig = _rig_for(obj, False)
            if not rig.pins:
                raise RigError(f"'{obj.name}' has no pinned bones: select bones in Pose Mode and use Pin")
            _check_pins_movable(obj, rig)
            settings = _settings(obj, False)
            rotations, locations, locks = _read_pose(obj, rig)
            if _needs_own_solve(obj, rig, locks):
                alone.append(obj)
                continue
            _track_underneath(rig, rotations, locations)
            entry = (obj, rig, _pins(obj, rig), rotations, locations, locks)
        except RigError as error:
            outcomes[obj] = error
            continue
        groups.setdefault((repr(settings), rig.skeleton.unit), (settings, []))[1].append(entry)
    for settings, entries in groups.values():
        if len(entries) == 1:
            alone.append(entries[0][0])
        else:
            outcomes.update(_solve_together(settings, entries))
    for obj in alone:
        outcomes[obj] = _solve_alone(obj)
    return outcomes


def _needs_own_solve(obj, rig, locks):
    """Partly locked bones (a second solve holds them), rotation-only pins (placed by a solve of
    their own), an influence below 1 (a start and a blend of their own) and bones the rig itself
    poses or places (constraints, drivers, IK controls) are solved alone."""
    if obj.ewbik.influence < 1.0 or np.any(rig.driven & locks.any_rotation & ~locks.fully_locked):
        return True
    if np.any(rig.held) or np.any(rig.placed) or np.any(rig.fixed_mask):
        return True
    return any(obj.pose.bones[bone].ewbik.pin_kind == "ROTATION" for bone, _ in rig.pins)


def _solve_alone(obj):
    try:
        return solve_armature(obj, rescan=False)
    except RigError as error:
        return error


def _solve_together(settings, entries):
    """One solve for the entries (obj, rig, pins, rotations, locations, locks); each pose written."""
    crowd = _crowd_for([entry[1] for entry in entries])
    n = len(crowd.skeleton.names)
    all_rotations, all_locations, stiffness = np.empty((n, 4)), np.empty((n, 3)), crowd.stiffness.copy()
    pins = []
    for k, (obj, rig, rig_pins, rig_rotations, rig_locations, locks) in enumerate(entries):
        index = crowd.pose_index[k]
        all_rotations[index], all_locations[index] = rig_rotations, rig_locations
        stiffness[index[locks.fully_locked]] = 1.0
        pins += [pin.renamed(f"{k}/{pin.bone}") for pin in rig_pins]
    if settings.time_budget_ms is not None:
        settings = dataclasses.replace(settings, time_budget_ms=settings.time_budget_ms * len(entries))
    try:
        result = solve(crowd.skeleton, pins, all_rotations, all_locations, settings, crowd.limits, stiffness)
    except ValueError as error:
        return {entry[0]: RigError(str(error)) for entry in entries}
    outcomes, first_pin = {}, 0
    for k, (obj, rig, rig_pins, rotations, locations, locks) in enumerate(entries):
        index, pin_slice = crowd.pose_index[k], slice(first_pin, first_pin + len(rig_pins))
        first_pin = pin_slice.stop
        one = dataclasses.replace(
            result, position_errors=result.position_errors[pin_slice], ms=result.ms / len(entries),
            orientation_errors_deg=result.orientation_errors_deg[pin_slice],
        )
        try:
            outcomes[obj] = _write_solved(obj, rig, one, result.rotations[index], result.locations[index],
                                          result.moved[index], (rotations, locations, locks), settings)[0]
        except RigError as error:
            outcomes[obj] = error
    return outcomes


def _crowd_for(rigs):
    """The cached combined skeleton, limits and stiffness of these rigs (bone names prefixed by
    the rig's place, `k/name`)."""
    key = tuple((rig.structure_key, rig.settings_key) for rig in rigs)
    crowd = _crowds.get(key)
    if crowd is not None:
        return crowd
    names, parents, rest, lengths, kusudamas = [], [], [], [], {}
    for k, rig in enumerate(rigs):
        skeleton = rig.skeleton
        names += [f"{k}/{name}" for name in skeleton.names]
        parents += [None if p < 0 else f"{k}/{skeleton.names[p]}" for p in skeleton.parents]
        rest.append(skeleton.rest)
        lengths.append(skeleton.lengths)
    skeleton = Skeleton(names, parents, np.concatenate(rest), np.concatenate(lengths))
    pose_index, stiffness = [], np.zeros(len(names))
    for k, rig in enumerate(rigs):
        in_skeleton = np.array([skeleton.index[f"{k}/{name}"] for name in rig.skeleton.names])
        pose_index.append(in_skeleton[rig.to_solver])
        stiffness[in_skeleton] = rig.stiffness
        for bone, limit in (rig.limit_dicts or {}).items():
            kusudamas[skeleton.index[f"{k}/{bone}"]] = Kusudama.from_dict(limit, bone=bone)
    limits = JointLimits(kusudamas, len(names)) if kusudamas else None
    _crowds.clear()  # one crowd at a time: the scene's live armatures
    crowd = _crowds[key] = _Crowd(key, skeleton, pose_index, limits, stiffness)
    return crowd


def _solve_and_write(obj, rig, pins, settings, stiffness, rotations, locations, locks):
    """Solve from a pose (pose.bones order) and write the moved bones.

    Returns (the result with the rotations as written, the rotations meant to be written: the solver's
    own, blended by the influence), both in pose.bones order.
    """
    to_solver = rig.to_solver
    start_rotations, start_locations = _solver_start(obj, rig, rotations, locations)
    solver_rotations = np.empty_like(rotations)
    solver_rotations[to_solver] = start_rotations
    solver_locations = np.empty_like(locations)
    solver_locations[to_solver] = start_locations
    try:
        result = solve(rig.skeleton, pins, solver_rotations, solver_locations, settings, rig.limits, stiffness)
    except ValueError as error:
        raise RigError(str(error)) from None
    return _write_solved(obj, rig, result, result.rotations[to_solver], result.locations[to_solver],
                         result.moved[to_solver], (rotations, locations, locks), settings)


def _write_solved(obj, rig, result, solved_rotations, solved_locations, moved, before, settings):
    """Blend a solved pose (pose.bones order) over the pose underneath, write it and remember it;
    `before` is the (rotations, locations, locks) read before the solve. Returns what
    `_solve_and_write` returns."""
    rotations, locations, locks = before
    if not (np.all(np.isfinite(solved_rotations)) and np.all(np.isfinite(solved_locations))):
        raise RigError(f"'{obj.name}': the solver produced an invalid pose; the pose was left unchanged")
    moved = moved | rig.placed
    rig.solved = (solved_rotations, solved_locations)
    shown_rotations, shown_locations, changes = _blend_over_underneath(
        obj, rig, solved_rotations, solved_locations, rotations, locations, moved
    )
    written_rotations = _write_pose(obj, rig, locks, changes, shown_rotations, shown_locations, settings.translate_root)
    rig.written = (np.where(changes[:, None], written_rotations, rotations),
                   np.where(changes[:, None], shown_locations, locations) if settings.translate_root else locations)
    written = dataclasses.replace(result, rotations=written_rotations, locations=shown_locations, moved=moved)
    return written, shown_rotations


def _track_underneath(rig, rotations, locations):
    """Keep the pose the solver blends over: the channels as last set by anyone but the solver.

    A channel that differs from what the last solve wrote was set by the animation (frame change)
    or by the user, and becomes the pose underneath; one that still holds the solver's value keeps
    the earlier pose underneath, so repeated live solves at a partial influence do not compound.
    """
    if rig.underneath is None or rig.written is None or len(rig.underneath[0]) != len(rotations):
        rig.underneath = (rotations.copy(), locations.copy())
        rig.holding = np.zeros(len(rotations), bool)
        return
    written_rotations, written_locations = rig.written
    changed = (1.0 - np.abs(np.einsum("ij,ij->i", rotations, written_rotations)) > 1e-10) | np.any(
        np.abs(locations - written_locations) > 1e-5, axis=1
    )
    rig.underneath[0][changed] = rotations[changed]
    rig.underneath[1][changed] = locations[changed]
    rig.holding = ~changed


def _solver_start(obj, rig, rotations, locations):
    """The pose a solve starts from: below full influence, bones that still show the blend continue from
    the solver's own last pose, so a redundant chain does not wander to another solution each update."""
    if obj.ewbik.influence >= 1.0 or rig.solved is None or rig.holding is None or len(rig.holding) != len(rotations):
        return rotations, locations
    holding = rig.holding[:, None]
    return np.where(holding, rig.solved[0], rotations), np.where(holding, rig.solved[1], locations)


def _blend_over_underneath(obj, rig, solved_rotations, solved_locations, rotations, locations, moved):
    """The solved pose blended over the pose underneath by the armature's Influence (pose.bones order).

    Like a constraint's Influence: 1 shows the solve, 0 the animation (or hand pose) underneath. Bones
    whose blended pose equals what they hold already are not written, so at 0 keyed channels are left
    exactly as the animation set them. Returns (rotations, locations, bones to write).
    """
    influence = float(obj.ewbik.influence)
    if influence >= 1.0:
        return solved_rotations, solved_locations, moved
    base_rotations, base_locations = rig.underneath
    dots = np.einsum("ij,ij->i", base_rotations, solved_rotations)
    solved_near = np.where(dots[:, None] < 0.0, -solved_rotations, solved_rotations)
    angle = np.arccos(np.clip(np.abs(dots), 0.0, 1.0))
    sine = np.sin(angle)
    small = sine < 1e-9
    safe = np.where(small, 1.0, sine)
    w_base = np.where(small, 1.0 - influence, np.sin((1.0 - influence) * angle) / safe)
    w_solved = np.where(small, influence, np.sin(influence * angle) / safe)
    blended = w_base[:, None] * base_rotations + w_solved[:, None] * solved_near
    blended /= np.linalg.norm(blended, axis=1, keepdims=True)
    blended_locations = base_locations + influence * (solved_locations - base_locations)
    unchanged = (1.0 - np.abs(np.einsum("ij,ij->i", blended, rotations)) <= 1e-12) & np.all(
        np.abs(blended_locations - locations) <= 1e-7, axis=1
    )
    return blended, blended_locations, moved & ~unchanged


def pin_errors(obj, result):
    """{pinned bone: (position error in armature units, orientation error in degrees)} of a solve."""
    rig = _rigs.get(obj.session_uid)
    bones = [bone for bone, _ in rig.pins] if rig is not None else []
    return {
        bone: (float(position), float(orientation))
        for bone, position, orientation in zip(bones, result.position_errors, result.orientation_errors_deg)
    }


def pinned_targets(obj, *, rescan=True):
    """The target objects of the armature's pins (cached; rescan re-reads the bones' settings)."""
    return [target for _, target in _rig_for(obj, rescan).pins]


def scene_document(obj):
    """The armature as a scene document, version 1 (export, bug reports).

    Every solver setting is written (`SETTINGS_FIELDS`), and each bone's `blender` field carries
    what the solver ignores but Blender needs to rebuild and pose the rig the same way: rotation
    mode, rotation and location locks (partly locked bones are held after the solve), the connect
    flag and the bone collections.
    """
    _check_armature(obj)
    rig = _rig_for(obj, True)
    rotations, locations, locks = _read_pose(obj, rig)
    stiffness = rig.stiffness[rig.to_solver].copy()
    stiffness[locks.fully_locked] = 1.0
    bones = []
    for index, name in enumerate(rig.names):
        bone = {
            "name": name,
            "parent": rig.parents[index],
            "rest": rig.rest[index].tolist(),
            "length": float(rig.lengths[index]),
            "rotation": rotations[index].tolist(),
            "location": locations[index].tolist(),
            "stiffness": float(stiffness[index]),
            "blender": _blender_fields(obj.pose.bones[name]),
        }
        if name in rig.limit_dicts:
            bone["limits"] = rig.limit_dicts[name]
        bones.append(bone)
    pins = [
        {
            "bone": pin.bone,
            "target": pin.target.tolist(),
            "weight": pin.weight,
            "orientation_weights": list(pin.orientation_weights),
            "falloff": pin.falloff,
        }
        for pin in _pins(obj, rig)
    ]
    settings = _settings(obj, full=False)
    return {
        "format": "ewbik-scene",
        "version": 1,
        "bones": bones,
        "pins": pins,
        "settings": {field: getattr(settings, field) for field in SETTINGS_FIELDS},
    }


def _blender_fields(pose_bone):
    """A bone's `blender` field of the scene document."""
    bone = pose_bone.bone
    return {
        "rotation_mode": pose_bone.rotation_mode,
        "lock_rotation": list(pose_bone.lock_rotation),
        "lock_rotation_w": pose_bone.lock_rotation_w,
        "lock_rotations_4d": pose_bone.lock_rotations_4d,
        "lock_location": list(pose_bone.lock_location),
        "connected": bone.use_connect,
        "collections": [collection.name for collection in bone.collections],
    }


def _check_armature(obj):
    if obj is None:
        raise RigError("no armature: select an armature object")
    try:
        kind = obj.type
    except ReferenceError:
        raise RigError("the armature was deleted") from None
    if kind != "ARMATURE":
        raise RigError(f"'{obj.name}' is a {kind.lower()} object, not an armature")
    if obj.pose is None or len(obj.pose.bones) == 0:
        raise RigError(f"'{obj.name}' has no bones")


def _check_writable(obj):
    _check_armature(obj)
    if obj.library is not None:
        raise RigError(
            f"'{obj.name}' is linked from '{obj.library.filepath}' and cannot be posed: make a library override"
        )
    override = obj.override_library
    if (override is not None and override.is_system_override) or not obj.is_editable:
        raise RigError(f"'{obj.name}' is a read-only library override: make it editable to pose it")
    if obj.mode == "EDIT":
        raise RigError(f"'{obj.name}' is in Edit Mode: leave it to solve")


def _rig_for(obj, rescan):
    """The cached rig of obj, rebuilt if the armature's structure or bone settings changed."""
    _check_armature(obj)
    rig = _rigs.get(obj.session_uid)
    if rig is not None and not rescan:
        if rig.settings_error:
            raise RigError(rig.settings_error)
        return rig
    key, rest, lengths = _structure_key(obj)
    if rig is None or rig.structure_key != key:
        rig = _build_rig(obj, key, rest, lengths)
        _rigs[obj.session_uid] = rig
    deleted = _scan_bone_settings(obj, rig)
    if deleted:
        raise RigError(f"pin '{deleted[0]}': its target was deleted, so the bone is no longer pinned")
    return rig


def _structure_key(obj):
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


def _build_rig(obj, key, rest, lengths):
    bones = obj.data.bones
    pose_names = key[1]
    data_index = {name: i for i, name in enumerate(key[2])}
    from_data = np.array([data_index[name] for name in pose_names])
    rest = rest[from_data]
    lengths = lengths[from_data]
    if not np.all(np.isfinite(rest)):
        bad = pose_names[int(np.flatnonzero(~np.isfinite(rest).reshape(len(rest), -1).all(-1))[0])]
        raise RigError(f"bone '{bad}': rest matrix contains NaN or infinity")
    short = np.flatnonzero(~(lengths > _MIN_BONE_LENGTH))
    if len(short):
        raise RigError(f"bone '{pose_names[int(short[0])]}' has zero length: give it a length in Edit Mode")
    parents = tuple(
        None if bones[name].parent is None else bones[name].parent.name for name in pose_names
    )
    try:
        skeleton = Skeleton(pose_names, parents, rest, lengths)
    except ValueError as error:
        raise RigError(str(error)) from None
    to_solver = np.array([skeleton.index[name] for name in pose_names])
    return _Rig(
        structure_key=key,
        names=pose_names,
        index={name: i for i, name in enumerate(pose_names)},
        skeleton=skeleton,
        to_solver=to_solver,
        rest=rest,
        lengths=lengths,
        parents=parents,
        buffers=_PoseBuffers.empty(len(pose_names)),
    )


def _scan_bone_settings(obj, rig):
    """Read pins, stiffness and limits of every bone; rebuild stiffness/limits if they changed.

    Returns the bones whose target was deleted since the last scan (they are unpinned now).
    Bad settings raise RigError and stay reported until they change.
    """
    pins = []
    stiffness = []
    limits = {}
    for pose_bone in obj.pose.bones:
        props = pose_bone.ewbik
        if props.target is not None:
            pins.append((pose_bone.name, props.target))
        stiffness.append(props.stiffness)
        if len(props.cones) or props.use_twist_limit:
            limit = {"cones": [{"direction": tuple(c.direction), "radius": c.radius} for c in props.cones]}
            if props.use_twist_limit:
                limit["twist"] = {"min": props.twist_min, "max": props.twist_max}
            if props.comfort:
                limit["comfort"] = props.comfort
            limits[pose_bone.name] = limit
    pinned = {bone for bone, _ in pins}
    deleted = [bone for bone, target in rig.pins if bone not in pinned and not _alive(target)]
    rig.pins = tuple(pins)
    rig.checked_pins = None
    posed = _posed_bones(obj)
    rig.fixed = _with_mechanism(obj, posed)
    rig.fixed_mask = np.array([name in rig.fixed for name in rig.names], bool)
    rig.posed_mask = np.array([name in posed for name in rig.names], bool)
    rig.placed = placed_controls(obj)
    locks = _read_locks(obj, rig)
    settings_key = (tuple(bone for bone, _ in pins), tuple(stiffness), repr(limits), locks.fully_locked.tobytes(),
                    (rig.fixed_mask | rig.placed).tobytes())
    counterparts_key = (settings_key[0], settings_key[-1], tuple(production_rigs.role_overrides(obj).items()))
    if counterparts_key != rig.counterparts_key:
        rig.counterparts = production_rigs.deform_counterparts(obj, list(settings_key[0]), rig.fixed)
        rig.counterparts_key = counterparts_key
    if settings_key != rig.settings_key:
        rig.settings_key = None
        try:
            _apply_bone_settings(rig, np.array(stiffness, dtype=float), limits, locks)
        except RigError as error:
            rig.settings_error = str(error)
            raise
        rig.settings_error = None
        rig.settings_key = settings_key
    return deleted


def _apply_bone_settings(rig, stiffness, limits, locks):
    if not np.all(np.isfinite(stiffness)):
        raise RigError(f"bone '{rig.names[int(np.flatnonzero(~np.isfinite(stiffness))[0])]}': stiffness is NaN")
    rig.stiffness = np.empty_like(stiffness)
    rig.stiffness[rig.to_solver] = stiffness
    rig.limit_dicts = {bone: _normalized_limit(bone, limit) for bone, limit in limits.items()}
    rig.limits = _joint_limits(rig)
    rig.held = _held_bones(rig) | rig.placed
    rig.driven = _driven_bones(rig, (stiffness >= 1.0) | locks.fully_locked | rig.held)


def _alive(target):
    try:
        return target.name is not None
    except ReferenceError:
        return False


def _normalized_limit(bone, limit):
    """Cone directions as unit vectors (the property panel lets them be any length)."""
    cones = []
    for i, cone in enumerate(limit["cones"]):
        direction = np.array(cone["direction"], dtype=float)
        length = np.linalg.norm(direction)
        if not np.isfinite(length) or length < 1e-9:
            raise RigError(f"bone '{bone}': limit cone {i + 1} has no direction")
        cones.append({"direction": (direction / length).tolist(), "radius": float(cone["radius"])})
    return {**limit, "cones": cones}


def _joint_limits(rig):
    if not rig.limit_dicts:
        return None
    try:
        kusudamas = {
            rig.skeleton.index[bone]: Kusudama.from_dict(limit, bone=bone) for bone, limit in rig.limit_dicts.items()
        }
        return JointLimits(kusudamas, len(rig.names))
    except ValueError as error:
        raise RigError(str(error)) from None


def _held_bones(rig):
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


def _driven_bones(rig, frozen):
    """Bones whose pose a solve can change: below an unfrozen ancestor of a pinned bone."""
    index = rig.index
    solvable = np.zeros(len(rig.names), bool)
    for bone, _ in rig.pins:
        node = bone
        while node is not None:
            solvable[index[node]] = True
            node = rig.parents[index[node]]
    solvable &= ~frozen
    driven = solvable.copy()
    for i in np.argsort(rig.skeleton.depth[rig.to_solver], kind="stable"):
        parent = rig.parents[i]
        if parent is not None and driven[index[parent]]:
            driven[i] = True
    return driven


@dataclasses.dataclass
class _Locks:
    rotation: np.ndarray  # (N, 3)
    w: np.ndarray
    four_d: np.ndarray
    location: np.ndarray  # (N, 3)
    any_rotation: np.ndarray
    fully_locked: np.ndarray


def _read_locks(obj, rig):
    pose_bones = obj.pose.bones
    buffers = rig.buffers
    pose_bones.foreach_get("rotation_mode", buffers.modes)
    pose_bones.foreach_get("lock_rotation", buffers.lock_rotation.reshape(-1))
    pose_bones.foreach_get("lock_rotation_w", buffers.lock_w)
    pose_bones.foreach_get("lock_rotations_4d", buffers.lock_4d)
    pose_bones.foreach_get("lock_location", buffers.lock_location.reshape(-1))
    euler = (buffers.modes != _QUATERNION) & (buffers.modes != _AXIS_ANGLE)
    four_d = buffers.lock_4d & ~euler
    return _Locks(
        rotation=buffers.lock_rotation,
        w=buffers.lock_w,
        four_d=four_d,
        location=buffers.lock_location,
        any_rotation=buffers.lock_rotation.any(axis=1) | (four_d & buffers.lock_w),
        fully_locked=buffers.lock_rotation.all(axis=1),  # locking X, Y and Z freezes the bone, whatever W (4D) says
    )


def _read_pose(obj, rig):
    """Local rotations as unit quaternions (N, 4) float64, locations (N, 3), locks; pose.bones order."""
    pose_bones = obj.pose.bones
    buffers = rig.buffers
    locks = _read_locks(obj, rig)
    pose_bones.foreach_get("rotation_quaternion", buffers.quaternion.reshape(-1))
    pose_bones.foreach_get("location", buffers.location.reshape(-1))
    rotations = buffers.quaternion.astype(float)
    axis_angle = buffers.modes == _AXIS_ANGLE
    if np.any(axis_angle):
        pose_bones.foreach_get("rotation_axis_angle", buffers.axis_angle.reshape(-1))
    if np.count_nonzero(buffers.modes != _QUATERNION) > np.count_nonzero(axis_angle):
        pose_bones.foreach_get("rotation_euler", buffers.euler.reshape(-1))
    other = np.flatnonzero(buffers.modes != _QUATERNION)
    if len(other):
        names = [_MODE_NAME[mode] for mode in buffers.modes[other].tolist()]
        rotations[other] = channels_to_quaternions(
            names, rotations[other], buffers.euler[other], buffers.axis_angle[other]
        )
    locations = buffers.location.astype(float)
    bad = ~(np.isfinite(rotations).all(axis=1) & np.isfinite(locations).all(axis=1))
    if np.any(bad):
        raise RigError(f"bone '{rig.names[int(np.flatnonzero(bad)[0])]}': rotation or location is NaN or infinite")
    norms = np.linalg.norm(rotations, axis=1, keepdims=True)
    rotations = np.where(norms > 1e-9, rotations / np.where(norms > 1e-9, norms, 1.0), (1.0, 0.0, 0.0, 0.0))
    if rig.fixed_mask is not None and rig.fixed_mask.any():
        rotations[rig.fixed_mask], locations[rig.fixed_mask] = _evaluated_locals(obj, rig, rig.fixed_mask)
    return rotations, locations, locks


@dataclasses.dataclass
class _CheckedPins:
    """The pins as last validated against the rig and the scene (bone exists, target alive and in
    the armature's scene, weights valid); until the next scan of the bone settings an update
    only reads the targets and moves the pins whose target moved."""

    bones: tuple
    targets: tuple
    target_bones: tuple  # per pin: the followed bone of an armature target, else None
    pins: list
    frames: np.ndarray  # (P, 7): each pin's target as armature-space quaternion and position
    keys: list = dataclasses.field(default_factory=list)  # per pin: (bone, its settings) it was made with


# Constraint types that set a bone's rotation or location (limits and Copy Scale only clamp or scale).
_POSING_CONSTRAINTS = frozenset({
    "COPY_TRANSFORMS", "COPY_ROTATION", "COPY_LOCATION", "CHILD_OF", "ARMATURE", "IK", "SPLINE_IK",
    "DAMPED_TRACK", "TRACK_TO", "LOCKED_TRACK", "STRETCH_TO", "ACTION", "TRANSFORM", "FOLLOW_PATH",
    "CLAMP_TO", "PIVOT", "SHRINKWRAP",
})
_DRIVEN_CHANNEL = re.compile(r'^pose\.bones\["((?:[^"\\]|\\.)*)"\]\.(rotation_\w+|location)$')


def fixed_bones(obj):
    """{bone name: why}: the bones the solver may not move.

    Bones whose evaluated pose constraints or drivers set (their channels are overwritten when
    Blender evaluates the rig), and a generated rig's mechanism bones (Rigify's ORG, MCH and DEF
    bones: the rig moves them, animators move the controls).
    """
    return _with_mechanism(obj, _posed_bones(obj))


def _with_mechanism(obj, posed):
    fixed = dict(posed)
    for name in production_rigs.mechanism_bones(obj):
        fixed.setdefault(name, "it is a mechanism bone of the generated rig")
    return fixed


def _posed_bones(obj):
    """{bone name: why} of the bones whose evaluated pose constraints or drivers set.

    Muted constraints, constraints at zero influence (an IK/FK switch turned away) and invalid
    ones do not count; an IK constraint poses its whole chain.
    """
    fixed = {}
    for pose_bone in obj.pose.bones:
        for constraint in pose_bone.constraints:
            if (constraint.type in _POSING_CONSTRAINTS and constraint.enabled and constraint.is_valid
                    and constraint.influence > 0.0):
                fixed.setdefault(pose_bone.name, f"its constraint '{constraint.name}' poses it")
                if constraint.type == "IK":
                    _fix_ik_chain(pose_bone, constraint, fixed)
    animation = obj.animation_data
    for fcurve in animation.drivers if animation is not None else ():
        match = _DRIVEN_CHANNEL.match(fcurve.data_path)
        if match and not fcurve.mute:
            fixed.setdefault(bpy.utils.unescape_identifier(match.group(1)), f"a driver sets its {match.group(2)}")
    return fixed


def _fix_ik_chain(pose_bone, constraint, fixed):
    chain = pose_bone.parent_recursive
    if constraint.chain_count > 0:
        chain = chain[: constraint.chain_count - 1]
    for parent in chain:
        fixed.setdefault(parent.name, f"the IK constraint of '{pose_bone.name}' poses it")


def _place_ik_controls(obj, rig):
    """Put each pinned IK control (Rigify's foot_ik, hand_ik) on its target, as a user would drag it.

    Such a control hangs under a mechanism bone the rig places, so no turn of the solver can bring
    it to its target; its location can, and the rig's own IK then bends the limb. The solver holds
    it; the solve reports and writes it with the bones it moved. Deleted targets are left to the
    pin checks that follow.
    """
    to_armature = obj.matrix_world.inverted_safe()
    for i in np.flatnonzero(rig.placed):
        pose_bone = obj.pose.bones[rig.names[i]]
        try:
            location, rotation, _ = (to_armature @ _evaluated_target(pose_bone.ewbik)).decompose()
        except (ReferenceError, AttributeError):
            continue
        pose_bone.matrix = mathutils.Matrix.LocRotScale(location, rotation, pose_bone.matrix.to_scale())


def placed_controls(obj):
    """pose.bones-order mask of the pinned IK controls the solve places (their location is keyed)."""
    return np.array([pose_bone.ewbik.target is not None and production_rigs.is_ik_control(obj, pose_bone.name)
                     for pose_bone in obj.pose.bones], bool)


def _evaluated_locals(obj, rig, mask):
    """(rotations (k, 4), locations (k, 3)) of the masked bones as Blender last evaluated them.

    Each is the local transform that, under the parent's evaluated pose, gives the bone's
    evaluated matrix (scale removed), so the solver sees a fixed bone where the viewer does.
    """
    n = len(rig.names)
    flat = np.empty(n * 16, np.float32)
    obj.pose.bones.foreach_get("matrix", flat)
    posed = flat.reshape(n, 4, 4).transpose(0, 2, 1).astype(float)
    posed[:, :3, :3] /= np.maximum(np.linalg.norm(posed[:, :3, :3], axis=1, keepdims=True), 1e-12)
    bones = np.flatnonzero(mask)
    parents = np.array([-1 if rig.parents[i] is None else rig.index[rig.parents[i]] for i in bones])
    frames = rig.rest[bones].copy()
    has_parent = parents >= 0
    parent_rows = parents[has_parent]
    frames[has_parent] = posed[parent_rows] @ np.linalg.inv(rig.rest[parent_rows]) @ rig.rest[bones[has_parent]]
    local = np.linalg.inv(frames) @ posed[bones]
    return quat.from_matrix(local[:, :3, :3]), local[:, :3, 3]


def _check_pins_movable(obj, rig):
    """RigError for a pin the solver cannot honour on this rig, naming what to pin instead.

    A pinned bone that constraints or drivers pose cannot be moved. A pinned control whose deform
    bone (same body role, same rest place) is posed elsewhere does not move the mesh: Rigify's
    IK/FK switch set to IK, for instance. Both are judged on the pose Blender last evaluated.
    """
    for bone, _ in rig.pins:
        why = rig.fixed.get(bone)
        if why is not None:
            raise RigError(f"pin '{bone}': {why}, so the solver cannot move it; "
                           f"{production_rigs.pin_instead_hint(obj, bone, rig.fixed)}")
        why = production_rigs.limb_switched_away(obj, bone)
        if why is not None:
            raise RigError(f"pin '{bone}': {why}")
    pose_bones = obj.pose.bones
    for bone, deform in rig.counterparts:
        apart = (pose_bones[bone].head - pose_bones[deform].head).length
        if apart > _FOLLOW_TOLERANCE * max(pose_bones[bone].bone.length, _MIN_BONE_LENGTH):
            raise RigError(
                f"pin '{bone}': the deform bone '{deform}' does not follow it "
                f"({distance(_scene_of(obj), apart * armature_scale(obj))} apart); pin the control that moves it")


_FOLLOW_TOLERANCE = 0.01  # share of the control's length by which its deform bone may lag


def evaluated_pin_errors(obj):
    """{pinned bone: (distance in scene units, angle in degrees)} on the pose Blender evaluated.

    Measured on the pinned bone and on the deform bones that follow it, the worst of them, so a
    pin is only reported reached when what the viewer sees is at the target. Call after
    `view_layer.update()`.
    """
    pose_bones = obj.pose.bones
    pinned = [pose_bone.name for pose_bone in pose_bones if pose_bone.ewbik.target is not None]
    fixed = fixed_bones(obj)
    followers = {bone: [bone] for bone in pinned}
    for bone, deform in production_rigs.deform_counterparts(obj, pinned, fixed):
        followers[bone].append(deform)
    errors = {}
    for bone in pinned:
        props = pose_bones[bone].ewbik
        target_location, target_rotation, _ = _evaluated_target(props).decompose()
        worst = (0.0, 0.0)
        for name in followers[bone]:
            location, rotation, _ = (obj.matrix_world @ pose_bones[name].matrix).decompose()
            distance = 0.0 if props.pin_kind == "ROTATION" else (location - target_location).length
            angle = 0.0 if props.pin_kind == "POSITION" else math.degrees(
                rotation.rotation_difference(target_rotation).angle)
            worst = max(worst, (distance, angle))
        errors[bone] = worst
    return errors


def _evaluated_target(props):
    """World matrix of a pin's target: the object, or its Target Bone when it is an armature."""
    target = props.target
    bone = target.pose.bones.get(props.target_bone) if target.type == "ARMATURE" else None
    return target.matrix_world @ bone.matrix if bone is not None else target.matrix_world


def pins_elsewhere(obj, result):
    """{pinned bone: evaluated distance (scene units)} for the pins whose bone, as Blender evaluated
    it, is farther from the target than the solve left it (something else poses it); call after
    `view_layer.update()`."""
    scale = armature_scale(obj)
    solved = pin_errors(obj, result)
    return {
        bone: distance
        for bone, (distance, _) in evaluated_pin_errors(obj).items()
        if distance - solved.get(bone, (0.0, 0.0))[0] * scale
        > _FOLLOW_TOLERANCE * obj.data.bones[bone].length * scale
    }


def _scene_of(obj):
    return obj.users_scene[0] if obj.users_scene else bpy.context.scene


def _pins(obj, rig):
    """Pins with armature-space target matrices (scale removed); raises RigError for bad targets."""
    checked = rig.checked_pins
    if checked is None:
        checked = rig.checked_pins = _check_pins(obj, rig)
    _check_feedback(obj, rig, checked)
    frames = _target_frames(obj, rig, checked)
    for i in np.flatnonzero((frames != checked.frames).any(axis=1)):
        rotation, position = frames[i, :4].copy(), frames[i, 4:].copy()
        matrix = np.array(mathutils.Matrix.LocRotScale(position, mathutils.Quaternion(rotation), None))
        checked.pins[i] = checked.pins[i].moved_to(matrix, rotation, position)
    checked.frames = frames
    return list(checked.pins)


def _check_pins(obj, rig):
    """Validate every pin of the last scan and build its Pin at the target's current frame; a pin
    whose settings are unchanged since the last check is moved, not validated again."""
    bones = tuple(bone for bone, _ in rig.pins)
    targets = tuple(target for _, target in rig.pins)
    target_bones = tuple(_pin_target_bone(obj, bone, target) for bone, target in rig.pins)
    checked = _CheckedPins(bones, targets, target_bones, [], np.full((len(bones), 7), np.nan))
    frames = _target_frames(obj, rig, checked)
    for (bone, target), frame in zip(rig.pins, frames):
        if not any(scene.objects.get(target.name) == target for scene in obj.users_scene):
            raise RigError(f"pin '{bone}': target '{target.name}' is not in the armature's scene")
        props = obj.pose.bones[bone].ewbik
        key = (bone, props.weight, tuple(props.orientation_weights), props.falloff, props.pin_kind, props.planted)
        known = rig.validated_pins.get(key)
        if known is None:
            pin = _make_pin(bone, mathutils.Vector(frame[4:]), mathutils.Quaternion(frame[:4]), props)
        else:
            matrix = np.array(mathutils.Matrix.LocRotScale(frame[4:], mathutils.Quaternion(frame[:4]), None))
            pin = known.moved_to(matrix, frame[:4].copy(), frame[4:].copy())
        checked.pins.append(pin)
        checked.keys.append(key)
    checked.frames = frames
    rig.validated_pins = dict(zip(checked.keys, checked.pins))
    return checked


def _pin_target_bone(obj, bone, target):
    """The bone an armature target's pin follows (None for other targets); checks the pin's bone."""
    pose_bone = obj.pose.bones.get(bone)
    try:
        kind = target.type
    except ReferenceError:
        raise RigError(f"pin '{bone}': its target was deleted; pin the bone again or unpin it") from None
    if pose_bone is None:
        raise RigError(f"pin '{bone}': the bone no longer exists; unpin it")
    return pose_bone.ewbik.target_bone if kind == "ARMATURE" else None


def _target_frames(obj, rig, checked):
    """(P, 7) armature-space frames (unit quaternion with w >= 0, position) of the pins' targets
    (an armature target: its bone), read in one pass; a deleted or non-finite target raises
    RigError naming its pin."""
    to_armature = obj.matrix_world.inverted_safe()
    frames = np.empty((len(checked.targets), 7))
    for i, (bone, target, target_bone) in enumerate(zip(checked.bones, checked.targets, checked.target_bones)):
        try:
            if target_bone is None:
                matrix = target.matrix_world
            else:
                matrix = _target_bone_matrix(obj, rig, bone, target, target_bone)
        except ReferenceError:
            raise RigError(f"pin '{bone}': its target was deleted; pin the bone again or unpin it") from None
        location, rotation, _ = (to_armature @ matrix).decompose()
        frames[i, :4] = rotation
        frames[i, 4:] = location
    frames[frames[:, 0] < 0.0, :4] *= -1.0
    bad = ~(np.isfinite(frames).all(axis=1) & (np.abs(frames[:, 4:]) <= MAX_COORDINATE).all(axis=1))
    if np.any(bad):
        raise RigError(f"pin '{checked.bones[int(np.flatnonzero(bad)[0])]}': target contains NaN or infinity, "
                       f"or lies farther than {MAX_COORDINATE:g} armature units")
    return frames


def _check_feedback(obj, rig, checked):
    """Refuse a target that follows a bone the solver moves (it would chase itself)."""
    for bone, target in zip(checked.bones, checked.targets):
        try:
            loop_bone = _feedback_bone(obj, target)
        except ReferenceError:
            raise RigError(f"pin '{bone}': its target was deleted; pin the bone again or unpin it") from None
        if loop_bone is not None and rig.driven[rig.index[loop_bone]]:
            raise RigError(
                f"pin '{bone}': target '{target.name}' follows bone '{loop_bone}', which the solver moves "
                "(feedback loop): parent the target elsewhere"
            )


def _make_pin(bone, location, rotation, props):
    """The solver's pin for one bone: its kind picks the weighed axes, planted multiplies the weight."""
    matrix = np.array(mathutils.Matrix.LocRotScale(location, rotation, None))
    axes = _POSITION_ONLY_AXES if props.pin_kind == "POSITION" else tuple(props.orientation_weights)
    weight = props.weight * (PLANTED_WEIGHT if props.planted else 1.0)
    try:
        return Pin(bone, matrix, weight, axes, props.falloff)
    except ValueError as error:
        raise RigError(str(error)) from None


def _target_bone_matrix(obj, rig, bone, target, target_bone):
    """World matrix of the bone a pin follows (a bone of another armature, or a control bone of obj).

    A bone of obj that the pinned bone's own pose moves (itself or a descendant), or that the solver
    moves, would make the pin chase itself: refused with a message.
    """
    other = target.pose.bones.get(target_bone) if target.pose is not None else None
    if other is None:
        what = "choose its Target Bone" if not target_bone else f"it has no bone '{target_bone}'"
        raise RigError(f"pin '{bone}': target '{target.name}' is an armature: {what}")
    if target == obj:
        follower = follows_pinned_bone(obj, target_bone, bone)
        if follower:
            raise RigError(f"pin '{bone}': target bone '{target_bone}' {follower}, so it cannot be its target")
        if rig.driven[rig.index[target_bone]]:
            raise RigError(
                f"pin '{bone}': target bone '{target_bone}' is moved by the solver (feedback loop): "
                "use a control bone outside the pinned chains"
            )
    return target.matrix_world @ other.matrix


def follows_pinned_bone(obj, target_bone, pinned):
    """Why bone `target_bone` of obj moves with bone `pinned` ("is the pinned bone itself" or "follows
    the pinned bone"), else "": such a bone cannot be that pin's target."""
    if target_bone == pinned:
        return "is the pinned bone itself"
    bone = obj.data.bones[target_bone].parent
    while bone is not None:
        if bone.name == pinned:
            return "follows the pinned bone"
        bone = bone.parent
    return ""


def _place_rotation_only(obj, rig, pins, settings, stiffness, rotations, locations):
    """(pins, settings): each rotation-only pin's position set where the rest of the body puts its bone.

    The solver's pins always hold a position, so a rotation-only pin gets, as its position, the
    bone's head in a solve of the other pins (or in the current pose when there are none): the
    body goes where the other pins take it, and the pin only turns its bone. That costs a second
    solve, only while some pin is rotation-only; the two share the live time budget, so the returned
    settings give the main solve its half.
    """
    kinds = [obj.pose.bones[pin.bone].ewbik.pin_kind for pin in pins]
    if "ROTATION" not in kinds:
        return pins, settings
    solver_rotations = np.empty_like(rotations)
    solver_rotations[rig.to_solver] = rotations
    solver_locations = np.empty_like(locations)
    solver_locations[rig.to_solver] = locations
    others = [pin for pin, kind in zip(pins, kinds) if kind != "ROTATION"]
    if others and settings.time_budget_ms is not None:
        settings = dataclasses.replace(settings, time_budget_ms=settings.time_budget_ms / 2.0)
    if others:
        try:
            placed = solve(rig.skeleton, others, solver_rotations, solver_locations, settings, rig.limits, stiffness)
        except ValueError as error:
            raise RigError(str(error)) from None
        solver_rotations, solver_locations = placed.rotations, placed.locations
    _, heads = rig.skeleton.forward(solver_rotations, solver_locations)
    placed_pins = []
    for pin, kind in zip(pins, kinds):
        if kind == "ROTATION":
            matrix = pin.target.copy()
            matrix[:3, 3] = heads[rig.skeleton.index[pin.bone]]
            pin = Pin(pin.bone, matrix, pin.weight, pin.orientation_weights, pin.falloff)
        placed_pins.append(pin)
    return placed_pins, settings


def _feedback_bone(obj, target):
    """The bone of obj that target follows through parenting, a constraint or a driver, if any."""
    node = target
    seen = set()
    while node is not None and node.name not in seen:
        seen.add(node.name)
        if node.parent == obj and node.parent_type == "BONE" and node.parent_bone in obj.pose.bones:
            return node.parent_bone
        for constraint in node.constraints:
            subtarget = getattr(constraint, "subtarget", "")
            if (constraint.enabled and getattr(constraint, "target", None) == obj
                    and subtarget in obj.pose.bones):
                return subtarget
        driven_by = _driver_bone(obj, node)
        if driven_by is not None:
            return driven_by
        node = node.parent
    return None


def _driver_bone(obj, node):
    """A bone of obj that one of node's drivers reads (a bone transform, or a pose.bones path)."""
    animation = node.animation_data
    if animation is None:
        return None
    for fcurve in animation.drivers:
        if fcurve.mute:
            continue
        for variable in fcurve.driver.variables:
            for driver_target in variable.targets:
                if driver_target.id != obj:
                    continue
                path = driver_target.data_path
                bone = driver_target.bone_target if variable.type != "SINGLE_PROP" else (
                    path.split('"')[1] if path.startswith('pose.bones["') and path.count('"') >= 2 else "")
                if bone in obj.pose.bones:
                    return bone
    return None


def armature_scale(obj):
    """Scene lengths per armature unit: the object's mean scale (a centimetre rig at 0.01)."""
    return sum(abs(s) for s in obj.matrix_world.to_scale()) / 3.0


def _settings(obj, full):
    """The solver's settings; the tolerance is a scene distance, turned into armature units."""
    props = obj.ewbik
    budget = props.time_budget_ms
    scale = armature_scale(obj)
    axes = [abs(s) for s in obj.matrix_world.to_scale()]
    if not min(axes) > 1e-6 * max(max(axes), 1e-300):
        raise RigError(f"'{obj.name}' has zero scale on an axis (scale {', '.join(f'{s:g}' for s in axes)}): "
                       "give it a scale in every axis to solve")
    try:
        return SolverSettings(
            iterations=props.iterations,
            time_budget_ms=None if full or budget <= 0.0 else budget,
            tolerance=props.tolerance / scale,
            dampening=props.dampening,
            stabilization_passes=props.stabilization_passes,
            translate_root=props.translate_root,
        )
    except ValueError as error:
        raise RigError(f"'{obj.name}' {error}") from None


def _write_pose(obj, rig, locks, moved, rotations, locations, translate_root):
    """Write the moved bones in each bone's rotation mode, keeping locked channels; tag the armature.

    Returns the rotations actually written, as unit quaternions in pose.bones order.
    """
    buffers = rig.buffers
    modes = buffers.modes
    old_quaternion = buffers.quaternion.astype(float)
    written = rotations.copy()
    quaternion_bones = moved & (modes == _QUATERNION)
    same_side = np.einsum("ij,ij->i", rotations, old_quaternion) >= 0.0
    new_quaternion = np.where(same_side[:, None], rotations, -rotations)
    fast = quaternion_bones & ~locks.any_rotation
    quaternion = np.where(fast[:, None], new_quaternion, old_quaternion)
    euler = buffers.euler.copy()
    axis_angle = buffers.axis_angle.copy()
    for i in np.flatnonzero(moved & ((modes != _QUATERNION) | locks.any_rotation)):
        written[i] = _write_one(i, rotations[i], old_quaternion, euler, axis_angle, quaternion, buffers, locks)
    pose_bones = obj.pose.bones
    pose_bones.foreach_set("rotation_quaternion", quaternion.astype(np.float32).reshape(-1))
    if np.any(moved & (modes == _AXIS_ANGLE)):
        pose_bones.foreach_set("rotation_axis_angle", axis_angle.reshape(-1))
    if np.any(moved & (modes != _QUATERNION) & (modes != _AXIS_ANGLE)):
        pose_bones.foreach_set("rotation_euler", euler.reshape(-1))
    if translate_root:
        move = moved[:, None] & ~locks.location
        pose_bones.foreach_set("location", np.where(move, locations, buffers.location).astype(np.float32).reshape(-1))
    obj.update_tag(refresh=_POSE_REFRESH)
    return written


def _write_one(i, rotation, old_quaternion, euler, axis_angle, quaternion, buffers, locks):
    """One bone in Euler or axis-angle mode, or with locks; mirrors Blender's transform-lock rules."""
    mode = int(buffers.modes[i])
    new = mathutils.Quaternion(rotation.tolist())
    locked = locks.rotation[i]
    if mode not in (_QUATERNION, _AXIS_ANGLE):
        old = mathutils.Euler(buffers.euler[i].tolist(), _MODE_NAME[mode])
        angles = new.to_euler(old.order, old)
        euler[i] = [old[k] if locked[k] else angles[k] for k in range(3)]
        return tuple(mathutils.Euler(euler[i].tolist(), old.order).to_quaternion())
    if mode == _QUATERNION:
        old_components = list(old_quaternion[i])
        if new.dot(mathutils.Quaternion(old_components)) < 0.0:
            new.negate()
        new_components = list(new)
    else:
        old_angle, *old_axis = buffers.axis_angle[i].tolist()
        axis, angle = new.to_axis_angle()
        if mathutils.Vector(old_axis).dot(axis) < 0.0:
            axis, angle = -axis, -angle
        old_components = [old_angle, *old_axis]
        new_components = [angle, *axis]
    if locks.four_d[i]:
        flags = (locks.w[i], *locked)
        components = [old if flag else value for flag, old, value in zip(flags, old_components, new_components)]
    elif locked.any():
        components = _euler_locked(mode, old_components, new_components, locked)
    else:
        components = new_components
    if mode == _QUATERNION:
        quaternion[i] = components
        result = mathutils.Quaternion(components)
    else:
        axis_angle[i] = components
        result = mathutils.Quaternion(components[1:], components[0])
    if result.magnitude < 1e-9:
        return (1.0, 0.0, 0.0, 0.0)
    return tuple(result.normalized())


def _euler_locked(mode, old_components, new_components, locked):
    """Blender's non-4D lock rule: compare as XYZ Euler angles, keep the locked ones."""
    if mode == _QUATERNION:
        old = mathutils.Quaternion(old_components).normalized()
        new = mathutils.Quaternion(new_components)
    else:
        old = mathutils.Quaternion(old_components[1:], old_components[0])
        new = mathutils.Quaternion(new_components[1:], new_components[0])
    old_euler = old.to_euler("XYZ")
    new_euler = new.to_euler("XYZ", old_euler)
    kept = mathutils.Euler([old_euler[k] if locked[k] else new_euler[k] for k in range(3)], "XYZ").to_quaternion()
    if mode == _QUATERNION:
        if kept.dot(new) < 0.0:
            kept.negate()
        return list(kept)
    axis, angle = kept.to_axis_angle()
    return [angle, *axis]
