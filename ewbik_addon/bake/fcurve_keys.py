"""Baked channels -> F-curve keys: continuous values, whole F-curves written with foreach_set.

Every F-curve a write touches is snapshotted first (`KeyWriter`), so a cancel or a failure puts
the action back exactly as it was.
"""

from __future__ import annotations

from collections.abc import Container, Iterable

import bpy
import numpy as np
from bpy_extras import anim_utils
from mathutils import Euler

from ..com.armature_checks import RigError
from ..com.rotation_channels import is_euler

# Blender 4.4+ actions have slots; there the legacy action.fcurves writes into an unassigned
# "legacy" slot that the armature does not play (and 5.0 removed it), so keys go to the channelbag
# of the armature's own slot.
LAYERED_ACTIONS = "slots" in bpy.types.Action.bl_rna.properties


# Every stored field of a keyframe, so a snapshot puts keys back exactly: name -> (values, dtype).
KEY_FIELDS = {
    "co": (2, np.float32),
    "handle_left": (2, np.float32),
    "handle_right": (2, np.float32),
    "interpolation": (1, np.int32),
    "easing": (1, np.int32),
    "type": (1, np.int32),
    "handle_left_type": (1, np.int32),
    "handle_right_type": (1, np.int32),
    "back": (1, np.float32),
    "amplitude": (1, np.float32),
    "period": (1, np.float32),
    "select_control_point": (1, bool),
    "select_left_handle": (1, bool),
    "select_right_handle": (1, bool),
}


def locked_rotation_components(pose_bone: bpy.types.PoseBone) -> set[int]:
    """Indices of the bone's rotation channel that its locks keep, so the bake never keys them.

    Euler locks and 4D quaternion/axis-angle locks hold single components; Blender's ordinary
    quaternion locks act on Euler angles and change every component, so none is skipped there.
    """
    if is_euler(pose_bone.rotation_mode):
        return {k for k in range(3) if pose_bone.lock_rotation[k]}
    if pose_bone.lock_rotations_4d:
        return ({0} if pose_bone.lock_rotation_w else set()) | {
            k + 1 for k in range(3) if pose_bone.lock_rotation[k]
        }
    return set()


def read_keys(keyframe_points: bpy.types.FCurveKeyframePoints) -> dict[str, np.ndarray]:
    """All keys of an F-curve, field by field: {Keyframe property: (K, size) array}."""
    keys = {}
    for name, (size, dtype) in KEY_FIELDS.items():
        values = np.empty(len(keyframe_points) * size, dtype=dtype)
        keyframe_points.foreach_get(name, values)
        keys[name] = values.reshape(-1, size)
    return keys


def write_keys(keyframe_points: bpy.types.FCurveKeyframePoints, keys: dict[str, np.ndarray]) -> None:
    """Replace every key of an F-curve with `keys` (as `read_keys` returns them), in that order."""
    keyframe_points.clear()
    keyframe_points.add(len(keys["co"]))
    for name, values in keys.items():
        keyframe_points.foreach_set(name, values.ravel())


def _same_side_signs(vectors: np.ndarray) -> np.ndarray:
    """+1 or -1 per row, so that every signed row lies on the side of the previous signed row."""
    flips = np.sign(np.einsum("ij,ij->i", vectors[1:], vectors[:-1]))
    flips[flips == 0] = 1
    return np.concatenate([[1.0], np.cumprod(flips)])


def continuous_quaternions(quaternions: np.ndarray) -> np.ndarray:
    """(F, 4) keys of one bone with each quaternion in the hemisphere of the previous one.

    q and -q are the same rotation, but F-curves interpolate the numbers: a sign flip between two
    frames would spin the bone the long way round.
    """
    return quaternions * _same_side_signs(quaternions)[:, None]


def continuous_axis_angles(axis_angles: np.ndarray) -> np.ndarray:
    """(F, 4) (angle, x, y, z) keys of one bone with each axis on the side of the previous one.

    (angle, axis) and (-angle, -axis) are the same rotation; an axis flipping between frames would
    interpolate through a zero axis.
    """
    return axis_angles * _same_side_signs(axis_angles[:, 1:])[:, None]


def continuous_eulers(eulers: np.ndarray, order: str) -> np.ndarray:
    """(F, 3) Euler keys of one bone, each the equivalent triple closest to the previous frame's.

    An Euler rotation has two triples (and any multiple of 2 pi) for the same orientation; the
    solver's conversion may pick another one on the next frame, which plays back as a flip.
    """
    result = eulers.copy()
    previous = Euler(result[0], order)
    for frame in range(1, len(result)):
        previous = Euler(result[frame], order).to_matrix().to_euler(order, previous)
        result[frame] = previous
    return result


def bake_slot(anim_data: bpy.types.AnimData) -> bpy.types.ActionSlot | None:
    """The action slot a bake keys (layered actions): the assigned one, else a suitable slot no
    other ID uses, else None (a new slot). Never another object's slot of a shared action."""
    if anim_data.action_slot is not None:
        return anim_data.action_slot
    return next((slot for slot in anim_data.action_suitable_slots if not slot.users()), None)


def action_fcurves(anim_data: bpy.types.AnimData | None) -> bpy.types.bpy_prop_collection | None:
    """The F-curves a bake would key into (None without an action or channels)."""
    if anim_data is None or anim_data.action is None:
        return None
    if LAYERED_ACTIONS:
        slot = bake_slot(anim_data)
        channelbag = (
            None if slot is None else anim_utils.action_get_channelbag_for_slot(anim_data.action, slot)
        )
        return None if channelbag is None else channelbag.fcurves
    return anim_data.action.fcurves


def check_action(obj: bpy.types.Object, bake_paths: Container[str], into_copy: bool = False) -> None:
    """Refuse actions the bake cannot write: linked, in NLA tweak mode, or with locked channels;
    `into_copy` (the bake keys a copy of the action) lets a linked or shared action be."""
    anim_data = obj.animation_data
    if anim_data is None or anim_data.action is None:
        return
    action = anim_data.action
    if not into_copy and (action.library is not None or not action.is_editable):
        source = action.library.filepath if action.library is not None else "a library"
        reason = f"is linked from {source}; make it local to bake into it"
        raise RigError("action", reason, f"Action '{action.name}' {reason}")
    if anim_data.use_tweak_mode:
        raise RigError.about(
            obj.name, "use_tweak_mode", "is in NLA tweak mode; leave tweak mode to bake into its action"
        )
    sharing = [] if into_copy else objects_keyed_with(anim_data, besides=obj)
    if sharing:
        reason = (
            f"also animates {', '.join(repr(o.name) for o in sharing[:3])}"
            f"{' and more' if len(sharing) > 3 else ''}; baking '{obj.name}' into it would overwrite "
            f"their keys. Give '{obj.name}' its own action (a copy) and bake again"
        )
        raise RigError("action", reason, f"Action '{action.name}' {reason}")
    fcurves = action_fcurves(anim_data) or ()
    for fcurve in fcurves:
        locked = fcurve.lock or (fcurve.group is not None and fcurve.group.lock)
        if locked and fcurve.data_path in bake_paths:
            channel = f"{fcurve.data_path}[{fcurve.array_index}]"
            reason = f"of action '{action.name}' is locked; unlock it to bake"
            raise RigError(channel, reason, f"Channel {channel} {reason}")


def objects_keyed_with(anim_data: bpy.types.AnimData, besides: bpy.types.Object) -> list[bpy.types.ID]:
    """Other IDs the bake's keys would animate: with action slots (Blender 4.4+) those using the
    slot the bake keys (Alt+D gives a copy the same action and slot), before them every one that
    plays the action."""
    if not LAYERED_ACTIONS:
        return objects_animated_with(anim_data.action, besides)
    slot = bake_slot(anim_data)
    return [] if slot is None else [user for user in slot.users() if user != besides]


def objects_animated_with(action: bpy.types.Action, besides: bpy.types.Object) -> list[bpy.types.Object]:
    """Other objects that play `action`, as their active action or in an NLA strip.

    Without action slots (Blender before 4.4) every F-curve of an action drives every object
    that plays it, so a bake into a shared action would rewrite the others' animation.
    """

    def plays(anim_data: bpy.types.AnimData | None) -> bool:
        return anim_data is not None and (
            anim_data.action == action
            or any(strip.action == action for track in anim_data.nla_tracks for strip in track.strips)
        )

    return [other for other in bpy.data.objects if other != besides and plays(other.animation_data)]


def _set_new_keys(
    points: bpy.types.FCurveKeyframePoints,
    frames: np.ndarray,
    values: np.ndarray,
    interpolation: int,
    handle_type: int,
) -> None:
    """Fill freshly added keys (nothing kept between them) with the baked values: only the fields
    a bake sets are written; the rest keep what `keyframe_points.add` gave them."""
    co = np.column_stack([frames, values]).astype(np.float32).ravel()
    for name in ("co", "handle_left", "handle_right"):
        points.foreach_set(name, co)
    points.foreach_set("interpolation", np.full(len(frames), interpolation, dtype=np.int32))
    for name in ("handle_left_type", "handle_right_type"):
        points.foreach_set(name, np.full(len(frames), handle_type, dtype=np.int32))


class KeyWriter:
    """Writes baked keys into the armature's active action, and can put the action back exactly.

    Creates what is missing (animation data, action, slot, channelbag, F-curves, groups) and
    remembers it; snapshots each existing F-curve before its keys change. `restore` undoes both.
    With `new_action` the keys go into a copy of the action (its other channels play on) that the
    armature then plays, and the action itself is left as it was (`replaced`).
    """

    def __init__(self, obj: bpy.types.Object, new_action: bool = False) -> None:
        self.obj = obj
        self.created_animation_data = obj.animation_data is None
        anim_data = obj.animation_data_create()
        self.replaced = None  # (action, its slot or None, its fake user) the copy stands in for
        if new_action and anim_data.action is not None:
            self._play_copy(anim_data)
        self.created_action = anim_data.action is None or self.replaced is not None
        if anim_data.action is None:
            anim_data.action = bpy.data.actions.new(f"{obj.name}Action")
        self.action = anim_data.action
        if LAYERED_ACTIONS:
            self._ensure_channelbag(anim_data)
            self.fcurve_collection = self.channelbag.fcurves
            self.groups = self.channelbag.groups
        else:
            self.fcurve_collection = self.action.fcurves
            self.groups = self.action.groups
        self.existing_groups = {group.name for group in self.groups}
        self.fcurves = {(fcurve.data_path, fcurve.array_index): fcurve for fcurve in self.fcurve_collection}
        self.snapshots = {}
        self.created_fcurves = []

    def _play_copy(self, anim_data: bpy.types.AnimData) -> None:
        """The armature plays a copy of its action (the same slot of it, with slots); the action
        gets a fake user so that saving the file keeps it once nothing plays it."""
        action = anim_data.action
        slot = anim_data.action_slot if LAYERED_ACTIONS else None
        self.replaced = (action, slot, action.use_fake_user)
        copy = action.copy()
        anim_data.action = copy
        if slot is not None:
            anim_data.action_slot = next(s for s in copy.slots if s.identifier == slot.identifier)
        action.use_fake_user = True

    def _ensure_channelbag(self, anim_data: bpy.types.AnimData) -> None:
        action = self.action
        self.slot = anim_data.action_slot
        self.assigned_slot = self.slot is None
        self.created_slot = False
        if self.assigned_slot:
            self.slot = bake_slot(anim_data)
            if self.slot is None:
                self.slot = action.slots.new(self.obj.id_type, self.obj.name)
                self.created_slot = True
            anim_data.action_slot = self.slot
        self.channelbag = anim_utils.action_get_channelbag_for_slot(action, self.slot)
        self.created_layer = len(action.layers) == 0
        self.created_strip = not self.created_layer and len(action.layers[0].strips) == 0
        self.created_channelbag = self.channelbag is None
        if self.created_channelbag:
            layer = action.layers.new("Layer") if self.created_layer else action.layers[0]
            strip = layer.strips.new(type="KEYFRAME") if len(layer.strips) == 0 else layer.strips[0]
            self.channelbag = strip.channelbag(self.slot, ensure=True)

    def write(
        self,
        data_path: str,
        index: int,
        group: str,
        frames: np.ndarray,
        values: np.ndarray,
        *,
        replace_range: bool,
        interpolation: int,
        handle_type: int,
    ) -> None:
        """Key `values` (F,) at `frames` (F,) on one channel, keeping the keys the options keep.

        With `replace_range` every key inside [first frame, last frame] goes; without, only keys
        on the baked frames. Kept keys are copied field by field, untouched.
        """
        fcurve = self.fcurves.get((data_path, index))
        if fcurve is None:
            fcurve = self.fcurve_collection.new(data_path, index=index)
            fcurve.group = self.groups.get(group) or self.groups.new(group)
            self.fcurves[(data_path, index)] = fcurve
            self.created_fcurves.append(fcurve)
        points = fcurve.keyframe_points
        old = read_keys(points)
        self.snapshots.setdefault(fcurve, old)
        when = old["co"][:, 0]
        keep = (when < frames[0]) | (when > frames[-1]) if replace_range else ~np.isin(when, frames)
        kept_count = int(keep.sum())

        points.clear()
        points.add(kept_count + len(frames))
        if not kept_count:
            _set_new_keys(points, frames, values, interpolation, handle_type)
            points.handles_recalc()
            return
        keys = read_keys(points)
        order = np.argsort(np.concatenate([when[keep], frames]), kind="stable")
        slot_of = np.empty_like(order)
        slot_of[order] = np.arange(len(order))
        kept_slots, new_slots = slot_of[:kept_count], slot_of[kept_count:]
        for name in KEY_FIELDS:
            keys[name][kept_slots] = old[name][keep]
        co = np.column_stack([frames, values])
        for name in ("co", "handle_left", "handle_right"):
            keys[name][new_slots] = co
        keys["interpolation"][new_slots] = interpolation
        keys["handle_left_type"][new_slots] = handle_type
        keys["handle_right_type"][new_slots] = handle_type
        for name, field in keys.items():
            points.foreach_set(name, field.ravel())
        points.handles_recalc()

    def restore(self) -> None:
        """Put the action (and the armature's animation data) back as they were before `write`."""
        obj = self.obj
        if self.created_action:
            obj.animation_data.action = None
            bpy.data.actions.remove(self.action)
            if self.replaced is not None:
                self._play_replaced()
        else:
            for fcurve in self.created_fcurves:
                self.fcurve_collection.remove(fcurve)
            for fcurve, keys in self.snapshots.items():
                if fcurve not in self.created_fcurves:
                    write_keys(fcurve.keyframe_points, keys)
            for group in [group for group in self.groups if group.name not in self.existing_groups]:
                self.groups.remove(group)
            if LAYERED_ACTIONS:
                self._restore_slot()
        if self.created_animation_data:
            obj.animation_data_clear()

    def _play_replaced(self) -> None:
        action, slot, fake_user = self.replaced
        action.use_fake_user = fake_user
        self.obj.animation_data.action = action
        if slot is not None:
            self.obj.animation_data.action_slot = slot

    def _restore_slot(self) -> None:
        action = self.action
        if self.created_layer:
            action.layers.remove(action.layers[0])
        elif self.created_strip:
            action.layers[0].strips.remove(action.layers[0].strips[0])
        elif self.created_channelbag:
            action.layers[0].strips[0].channelbags.remove(self.channelbag)
        if self.assigned_slot:
            self.obj.animation_data.action_slot = None
        if self.created_slot:
            action.slots.remove(self.slot)


def keyed_frames(objects: Iterable[bpy.types.Object], frame_start: int, frame_end: int) -> np.ndarray:
    """The whole frames (sorted) in [frame_start, frame_end] where the active action of any of
    `objects` has a key on some F-curve (a key between frames counts for the nearest frame)."""
    frames = [np.empty(0)]
    for obj in objects:
        for fcurve in action_fcurves(obj.animation_data) or ():
            co = np.empty(len(fcurve.keyframe_points) * 2, dtype=np.float32)
            fcurve.keyframe_points.foreach_get("co", co)
            frames.append(np.rint(co[0::2]))
    every = np.unique(np.concatenate(frames))
    return every[(every >= frame_start) & (every <= frame_end)].astype(int)


class KeyPlayer:
    """What an F-curve holding only some of a channel's baked keys plays on every baked frame.

    Blender evaluates a scratch F-curve (in a scratch action) given those keys as the bake writes
    them, and the auto smoothing and extrapolation of the F-curve they go to: whatever the
    interpolation, handle type and smoothing, what is measured is what plays back.
    """

    def __init__(self, frames: np.ndarray, interpolation: int, handle_type: int) -> None:
        self.frames = frames.astype(np.float32)
        self.interpolation = interpolation
        self.handle_type = handle_type
        self.action = bpy.data.actions.new("EWBIK key reduction")
        if LAYERED_ACTIONS:
            slot = self.action.slots.new("OBJECT", "Reduction")
            strip = self.action.layers.new("Layer").strips.new(type="KEYFRAME")
            self.fcurve = strip.channelbag(slot, ensure=True).fcurves.new("location", index=0)
        else:
            self.fcurve = self.action.fcurves.new("location", index=0)
        self.new_curve = (self.fcurve.auto_smoothing, self.fcurve.extrapolation)

    def play(self, written_to: bpy.types.FCurve | None, kept: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Values (F,) on the baked frames of `values` (F,) keyed only on the frames `kept`
        (indices), written to the F-curve `written_to` (None: a new one)."""
        fcurve = self.fcurve
        settings = (
            self.new_curve if written_to is None else (written_to.auto_smoothing, written_to.extrapolation)
        )
        fcurve.auto_smoothing, fcurve.extrapolation = settings
        points = fcurve.keyframe_points
        points.clear()
        points.add(len(kept))
        _set_new_keys(points, self.frames[kept], values[kept], self.interpolation, self.handle_type)
        points.handles_recalc()
        return np.array([fcurve.evaluate(frame) for frame in self.frames.tolist()])

    def remove(self) -> None:
        bpy.data.actions.remove(self.action)
