"""Pose channels <-> solver arrays, honouring rotation modes and Blender's rotation locks.

Everything per bone is read and written with `foreach_get` / `foreach_set` on float32 buffers
(per-bone RNA access costs microseconds per bone, which a live update on a 159-bone rig cannot
afford). Quaternion bones stay vectorized; Euler and axis-angle bones are converted with
mathutils one by one, and only those. Locked channels keep their values, as the transform tools
do. Arrays are in `obj.pose.bones` order.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import bpy
import mathutils
import numpy as np

from ..com.armature_checks import RigError
from ..com.rotation_channels import channels_to_quaternions, is_euler
from ..rigs.production_checks import evaluated_locals

if TYPE_CHECKING:
    from .rig_cache import Rig

_ROTATION_MODE = {
    item.identifier: item.value for item in bpy.types.PoseBone.bl_rna.properties["rotation_mode"].enum_items
}


_MODE_NAME = {value: name for name, value in _ROTATION_MODE.items()}


_QUATERNION = _ROTATION_MODE["QUATERNION"]


_AXIS_ANGLE = _ROTATION_MODE["AXIS_ANGLE"]


_EULER = tuple(value for name, value in _ROTATION_MODE.items() if is_euler(name))


# The narrowest refresh after which Blender re-evaluates a pose written from inside a depsgraph
# handler: the transform tag from 4.5 on (half the cost of a full tag on 5.2); 4.2 ignores it
# there and needs the data tag (as costly as a full one).
_POSE_REFRESH = {"OBJECT"} if bpy.app.version >= (4, 5, 0) else {"DATA"}


@dataclasses.dataclass
class ConvertedChannels:
    """The quaternions of the Euler and axis-angle bones' channels as last read or written, with
    those channels: a bone whose mode and channels still hold them is not converted again, so a
    drag converts nothing (the bones the solve turned were written, and remembered, here)."""

    modes: np.ndarray  # -1: nothing remembered
    euler: np.ndarray
    axis_angle: np.ndarray
    quaternions: np.ndarray

    @classmethod
    def empty(cls, n: int) -> ConvertedChannels:
        return cls(
            modes=np.full(n, -1, np.int32),
            euler=np.zeros((n, 3), np.float32),
            axis_angle=np.zeros((n, 4), np.float32),
            quaternions=np.zeros((n, 4)),
        )

    def remember(
        self,
        bones: np.ndarray,
        modes: np.ndarray,
        euler: np.ndarray,
        axis_angle: np.ndarray,
        quaternions: np.ndarray,
    ) -> None:
        self.modes[bones] = modes[bones]
        self.euler[bones] = euler[bones]
        self.axis_angle[bones] = axis_angle[bones]
        self.quaternions[bones] = quaternions


@dataclasses.dataclass
class PoseBuffers:
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
    converted: ConvertedChannels
    mirrors_channels: bool = False  # the buffers hold the channels as last read, or as written since
    locks: Locks | None = None  # derived from the lock buffers as last read
    held: bool = False  # a bake keeps what the solves write here only, ahead of Blender's channels
    # (unit quaternions, locations) float64 of the channels the buffers mirror
    pose: tuple[np.ndarray, np.ndarray] | None = None

    @classmethod
    def empty(cls, n: int) -> PoseBuffers:
        return cls(
            modes=np.empty(n, np.int32),
            quaternion=np.empty((n, 4), np.float32),
            euler=np.zeros((n, 3), np.float32),
            axis_angle=np.zeros((n, 4), np.float32),
            location=np.empty((n, 3), np.float32),
            lock_rotation=np.empty((n, 3), bool),
            lock_w=np.empty(n, bool),
            lock_4d=np.empty(n, bool),
            lock_location=np.empty((n, 3), bool),
            converted=ConvertedChannels.empty(n),
        )


@dataclasses.dataclass
class Locks:
    """Each bone's rotation and location locks as a solve honours them (`read_locks`)."""

    rotation: np.ndarray  # (N, 3)
    w: np.ndarray
    four_d: np.ndarray
    location: np.ndarray  # (N, 3)
    any_rotation: np.ndarray
    fully_locked: np.ndarray
    partly_locked: np.ndarray  # some rotation channel locked, not X, Y and Z: a solve cannot see these
    free_quaternion: np.ndarray  # quaternion bones without rotation locks: written in one go


def read_locks(pose_bones: bpy.types.bpy_prop_collection, buffers: PoseBuffers) -> Locks:
    """The bones' locks as the live solve and the bake both apply them: Blender ignores the 4D
    flags on Euler bones."""
    pose_bones.foreach_get("rotation_mode", buffers.modes)
    pose_bones.foreach_get("lock_rotation", buffers.lock_rotation.reshape(-1))
    pose_bones.foreach_get("lock_rotation_w", buffers.lock_w)
    pose_bones.foreach_get("lock_rotations_4d", buffers.lock_4d)
    pose_bones.foreach_get("lock_location", buffers.lock_location.reshape(-1))
    four_d = buffers.lock_4d & ~np.isin(buffers.modes, _EULER)
    any_rotation = buffers.lock_rotation.any(axis=1) | (four_d & buffers.lock_w)
    # Locking X, Y and Z freezes the bone, whatever W (4D) says.
    fully_locked = buffers.lock_rotation.all(axis=1)
    buffers.locks = Locks(
        rotation=buffers.lock_rotation,
        w=buffers.lock_w,
        four_d=four_d,
        location=buffers.lock_location,
        any_rotation=any_rotation,
        fully_locked=fully_locked,
        partly_locked=any_rotation & ~fully_locked,
        free_quaternion=(buffers.modes == _QUATERNION) & ~any_rotation,
    )
    return buffers.locks


def read_pose(
    obj: bpy.types.Object, rig: Rig, channels_kept: bool = False
) -> tuple[np.ndarray, np.ndarray, Locks]:
    """Local rotations as unit quaternions (N, 4) float64, locations (N, 3), locks; pose.bones order.

    channels_kept: the caller knows that nothing but this add-on's own writes changed the pose
    channels since the last read (a live drag moves only targets), so the rig's buffers, which
    mirror those writes, stand for them and Blender is not asked again (nor checked again for
    NaN: they hold what was checked when read or written); their float64 pose is kept with them
    (`write_pose` converts the rows it writes), so nothing is converted for the bones it did
    not write. Bones that constraints or drivers pose are evaluated again all the same. Held
    buffers (`write_pose`) always stand for the channels.
    """
    buffers = rig.buffers
    if (channels_kept or buffers.held) and buffers.mirrors_channels:
        rotations, locations = buffers.pose[0].copy(), buffers.pose[1].copy()
    else:
        _fetch_channels(obj.pose.bones, buffers)
        rotations, locations = _channel_pose(buffers, slice(None), fetched=True)
        finite = np.isfinite(rotations).all(axis=1) & np.isfinite(locations).all(axis=1)
        buffers.mirrors_channels = bool(finite.all())  # bad channels are read again next time
        if not buffers.mirrors_channels:
            raise RigError(
                f"bone '{rig.names[int(np.flatnonzero(~finite)[0])]}'",
                "rotation or location is NaN or infinite",
            )
        rotations = unit_quaternions(rotations)
        buffers.pose = (rotations.copy(), locations.copy())
    if rig.fixed_mask is not None and rig.fixed_mask.any():
        rotations[rig.fixed_mask], locations[rig.fixed_mask] = evaluated_locals(obj, rig, rig.fixed_mask)
    return rotations, locations, buffers.locks


def _channel_pose(
    buffers: PoseBuffers, rows: slice | np.ndarray, fetched: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(quaternions, not normalized, and locations) float64 of the buffers' channels at `rows`:
    every bone's slice when `fetched` (the channels were just read from Blender, see
    `_other_mode_quaternions`), else an index array of bones whose conversions are remembered."""
    rotations = buffers.quaternion[rows].astype(float)
    other = buffers.modes[rows] != _QUATERNION
    if other.any():
        rotations[other] = _other_mode_quaternions(buffers, other if fetched else rows[other], fetched)
    return rotations, buffers.location[rows].astype(float)


def unit_quaternions(rotations: np.ndarray) -> np.ndarray:
    """Quaternions normalized row by row (the same whichever rows are asked), zero ones made the
    identity."""
    norms = np.sqrt(np.einsum("ij,ij->i", rotations, rotations))[:, None]
    if norms.min(initial=1.0) > 1e-9:
        return rotations / norms
    return np.where(norms > 1e-9, rotations / np.where(norms > 1e-9, norms, 1.0), (1.0, 0.0, 0.0, 0.0))


def _fetch_channels(pose_bones: bpy.types.bpy_prop_collection, buffers: PoseBuffers) -> None:
    """Every channel a solve reads, one foreach_get each (Euler and axis-angle only when some bone
    uses them)."""
    read_locks(pose_bones, buffers)
    pose_bones.foreach_get("rotation_quaternion", buffers.quaternion.reshape(-1))
    pose_bones.foreach_get("location", buffers.location.reshape(-1))
    axis_angle = buffers.modes == _AXIS_ANGLE
    if axis_angle.any():
        pose_bones.foreach_get("rotation_axis_angle", buffers.axis_angle.reshape(-1))
    if np.isin(buffers.modes, _EULER).any():
        pose_bones.foreach_get("rotation_euler", buffers.euler.reshape(-1))


def _other_mode_quaternions(buffers: PoseBuffers, other: np.ndarray, fetched: bool) -> np.ndarray:
    """Quaternions (not normalized) of the bones in Euler or axis-angle mode (`other`: a mask of
    every bone, or without `fetched` any index), converted only where the mode or channels differ
    from what `buffers.converted` remembers; with nothing fetched since the last read or write it
    remembers them all."""
    known = buffers.converted
    if not fetched:
        return known.quaternions[other]
    modes = buffers.modes
    axis_angle = modes == _AXIS_ANGLE
    changed = np.where(
        axis_angle,
        (buffers.axis_angle != known.axis_angle).any(axis=1),
        (buffers.euler != known.euler).any(axis=1),
    )
    stale = np.flatnonzero(other & ((modes != known.modes) | changed))
    if len(stale):
        names = [_MODE_NAME[mode] for mode in modes[stale].tolist()]
        quaternions = channels_to_quaternions(
            names, buffers.quaternion[stale], buffers.euler[stale], buffers.axis_angle[stale]
        )
        known.remember(stale, modes, buffers.euler, buffers.axis_angle, quaternions)
    return known.quaternions[other]


def write_pose(
    obj: bpy.types.Object,
    rig: Rig,
    locks: Locks,
    moved: np.ndarray,
    rotations: np.ndarray,
    locations: np.ndarray,
    translate_root: bool,
) -> np.ndarray:
    """Write the moved bones in each bone's rotation mode, keeping locked channels; tag the armature.
    While the buffers are `held`, only they take the channels (Blender neither gets them nor
    evaluates the armature again).

    Returns the rotations actually written, as unit quaternions in pose.bones order.
    """
    buffers = rig.buffers
    written = rotations.copy()
    quaternion = buffers.quaternion.copy()
    plain = np.flatnonzero(moved & locks.free_quaternion)
    turned = rotations[plain]
    flip = (turned * quaternion[plain]).sum(axis=1) < 0.0
    turned[flip] *= -1.0
    quaternion[plain] = turned
    one_by_one = np.flatnonzero(moved & ~locks.free_quaternion)
    pose_bones = obj.pose.bones
    if len(one_by_one):
        _write_one_by_one(pose_bones, buffers, locks, one_by_one, rotations, quaternion, written)
    buffers.quaternion = quaternion
    relocated = False
    if translate_root:
        move = moved[:, None] & ~locks.location
        location = np.where(move, locations, buffers.location).astype(np.float32)
        relocated = not np.array_equal(location, buffers.location)
        buffers.location = location
    if buffers.pose is not None:
        rows = np.flatnonzero(moved)
        rotations_read, locations_read = _channel_pose(buffers, rows, fetched=False)
        buffers.pose[0][rows] = unit_quaternions(rotations_read)
        if translate_root:
            buffers.pose[1][rows] = locations_read
    if buffers.held:
        return written
    pose_bones.foreach_set("rotation_quaternion", quaternion.reshape(-1))
    if relocated:  # a root moved: the buffers hold every other location as Blender does
        pose_bones.foreach_set("location", buffers.location.reshape(-1))
    obj.update_tag(refresh=_POSE_REFRESH)
    return written


def _write_one_by_one(
    pose_bones: bpy.types.bpy_prop_collection,
    buffers: PoseBuffers,
    locks: Locks,
    bones: np.ndarray,
    rotations: np.ndarray,
    quaternion: np.ndarray,
    written: np.ndarray,
) -> None:
    """The moved bones in Euler or axis-angle mode or with rotation locks (`_write_one`): their
    channels into `quaternion` (float32) and Blender, what they now hold into `written`."""
    modes = buffers.modes
    euler = buffers.euler.copy()
    axis_angle = buffers.axis_angle.copy()
    for i in bones.tolist():
        written[i] = _write_one(i, rotations[i], euler, axis_angle, quaternion, buffers, locks)
    bone_modes = modes[bones]
    other_modes = bones[bone_modes != _QUATERNION]
    buffers.converted.remember(other_modes, modes, euler, axis_angle, written[other_modes])
    kinds = set(bone_modes.tolist())
    if _AXIS_ANGLE in kinds:
        buffers.axis_angle = axis_angle
        if not buffers.held:
            pose_bones.foreach_set("rotation_axis_angle", axis_angle.reshape(-1))
    if kinds & set(_EULER):
        buffers.euler = euler
        if not buffers.held:
            pose_bones.foreach_set("rotation_euler", euler.reshape(-1))


def _write_one(
    i: int,
    rotation: np.ndarray,
    euler: np.ndarray,
    axis_angle: np.ndarray,
    quaternion: np.ndarray,
    buffers: PoseBuffers,
    locks: Locks,
) -> tuple[float, ...]:
    """One bone in Euler or axis-angle mode, or with locks; mirrors Blender's transform-lock rules."""
    mode = int(buffers.modes[i])
    new = mathutils.Quaternion(rotation.tolist())
    locked = locks.rotation[i]
    if mode in _EULER:
        old = mathutils.Euler(buffers.euler[i].tolist(), _MODE_NAME[mode])
        angles = new.to_euler(old.order, old)
        if locks.any_rotation[i]:
            angles = mathutils.Euler(
                [old[k] if flag else angles[k] for k, flag in enumerate(locked.tolist())], old.order
            )
        euler[i] = angles
        return tuple(angles.to_quaternion())
    if mode == _QUATERNION:
        old_components = buffers.quaternion[i].tolist()
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
        components = [
            old if flag else value for flag, old, value in zip(flags, old_components, new_components)
        ]
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


def _euler_locked(
    mode: int, old_components: list[float], new_components: list[float], locked: np.ndarray
) -> list[float]:
    """Blender's non-4D lock rule: compare as XYZ Euler angles, keep the locked ones."""
    if mode == _QUATERNION:
        old = mathutils.Quaternion(old_components).normalized()
        new = mathutils.Quaternion(new_components)
    else:
        old = mathutils.Quaternion(old_components[1:], old_components[0])
        new = mathutils.Quaternion(new_components[1:], new_components[0])
    old_euler = old.to_euler("XYZ")
    new_euler = new.to_euler("XYZ", old_euler)
    kept = mathutils.Euler(
        [old_euler[k] if locked[k] else new_euler[k] for k in range(3)], "XYZ"
    ).to_quaternion()
    if mode == _QUATERNION:
        if kept.dot(new) < 0.0:
            kept.negate()
        return list(kept)
    axis, angle = kept.to_axis_angle()
    return [angle, *axis]
