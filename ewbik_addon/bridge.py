"""Armature <-> solver arrays: read the pose and pins, solve, write the pose back.

Everything per bone is read and written with `foreach_get` / `foreach_set` on
float32 buffers (per-bone RNA access costs microseconds per bone, which a live
update on a 159-bone rig cannot afford). Rotation modes are honoured: quaternion
bones stay vectorized; Euler and axis-angle bones are converted with mathutils
one by one, and only those. Blender's rotation locks keep the locked channels'
values, as the transform tools do; fully locked bones are handed to the solver
as stiffness 1 so they never absorb motion that would be thrown away.

The rig-derived solver objects (Skeleton, joint limits, stiffness, the list of
pins) are cached per armature and rebuilt only when a cheap signature of the
armature (bone names, rest matrices, lengths, per-bone settings) changes. The
live handler skips even that signature when only pin targets moved.

Arrays in the returned SolveResult follow `obj.pose.bones` order.
"""

import dataclasses
import time

import bpy
import mathutils
import numpy as np

from ..solver import Pin, Skeleton, SolverSettings, solve
from ..solver.kusudama import JointLimits, Kusudama
from ..solver.scene import SETTINGS_FIELDS
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
    pin_cache: dict = dataclasses.field(default_factory=dict)  # bone -> (inputs, Pin): unmoved pins are reused
    settings_error: str = None  # why the bone settings cannot be used, until they change
    driven: np.ndarray = None  # pose.bones order: the solve may change this bone's pose
    underneath: tuple = None  # (rotations, locations) pose.bones order: the pose the solver blends over
    written: tuple = None  # (rotations, locations) as the last solve wrote them
    solved: tuple = None  # (rotations, locations) as the last solve found them, before the blend
    holding: np.ndarray = None  # bones whose channels still hold what the last solve wrote


_rigs = {}


def clear_cache():
    """Forget every cached rig (file load, add-on unregister)."""
    _rigs.clear()


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
    rotations, locations, locks = _read_pose(obj, rig)
    _track_underneath(rig, rotations, locations)
    settings = _settings(obj, full)  # before the pins: a zero scale would make their targets infinitely far
    pins = _pins(obj, rig)
    stiffness = rig.stiffness.copy()
    stiffness[rig.to_solver[locks.fully_locked]] = 1.0
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
    solved_rotations = result.rotations[to_solver]
    solved_locations = result.locations[to_solver]
    if not (np.all(np.isfinite(solved_rotations)) and np.all(np.isfinite(solved_locations))):
        raise RigError(f"'{obj.name}': the solver produced an invalid pose; the pose was left unchanged")
    moved = result.moved[to_solver]
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
    locks = _read_locks(obj, rig)
    settings_key = (tuple(bone for bone, _ in pins), tuple(stiffness), repr(limits), locks.fully_locked.tobytes())
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
    rig.driven = _driven_bones(rig, (stiffness >= 1.0) | locks.fully_locked)


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
    if np.any(buffers.modes != _QUATERNION):
        names = [_MODE_NAME[int(mode)] for mode in buffers.modes]
        rotations = channels_to_quaternions(names, rotations, buffers.euler, buffers.axis_angle)
    locations = buffers.location.astype(float)
    bad = ~(np.isfinite(rotations).all(axis=1) & np.isfinite(locations).all(axis=1))
    if np.any(bad):
        raise RigError(f"bone '{rig.names[int(np.flatnonzero(bad)[0])]}': rotation or location is NaN or infinite")
    norms = np.linalg.norm(rotations, axis=1, keepdims=True)
    rotations = np.where(norms > 1e-9, rotations / np.where(norms > 1e-9, norms, 1.0), (1.0, 0.0, 0.0, 0.0))
    return rotations, locations, locks


def _pins(obj, rig):
    """Pins with armature-space target matrices (scale removed); raises RigError for bad targets."""
    to_armature = obj.matrix_world.inverted_safe()
    pins = []
    for bone, target in rig.pins:
        pose_bone = obj.pose.bones.get(bone)
        try:
            target_name = target.name
            target_matrix = target.matrix_world
        except ReferenceError:
            raise RigError(f"pin '{bone}': its target was deleted; pin the bone again or unpin it") from None
        if pose_bone is None:
            raise RigError(f"pin '{bone}': the bone no longer exists; unpin it")
        if not any(scene.objects.get(target_name) == target for scene in obj.users_scene):
            raise RigError(f"pin '{bone}': target '{target_name}' is not in the armature's scene")
        props = pose_bone.ewbik
        if target.type == "ARMATURE":
            target_matrix = _target_bone_matrix(obj, rig, bone, target, props.target_bone)
        loop_bone = _feedback_bone(obj, target)
        if loop_bone is not None and rig.driven[rig.index[loop_bone]]:
            raise RigError(
                f"pin '{bone}': target '{target_name}' follows bone '{loop_bone}', which the solver moves "
                "(feedback loop): parent the target elsewhere"
            )
        location, rotation, _ = (to_armature @ target_matrix).decompose()
        kind, planted = props.pin_kind, props.planted
        key = (*location, *rotation, props.weight, *props.orientation_weights, props.falloff, kind, planted)
        cached = rig.pin_cache.get(bone)
        if cached is None or cached[0] != key:
            cached = rig.pin_cache[bone] = (key, _make_pin(bone, location, rotation, props))
        pins.append(cached[1])
    return pins


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
    obj.update_tag()
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
