"""`ewbik.bake`: solve every frame of a range and turn the solved pose into plain rotation keys.

Animators pin hands and feet, animate the targets, and then need ordinary keys for export, game
engines and hand editing. The work lives in `PoseBake`, plain Python advanced one frame at a
time, so scripts, the modal operator and the tests (Blender's timers never fire headless) all run
the same code. `EWBIK_OT_bake` only drives it: `execute` in one go, `invoke` + a timer-driven
modal with a progress bar, a status line and Esc to cancel.

Each frame is solved warm-started from the previous frame's solution, so the keys are continuous.
Keys are written once, after the last frame, a whole F-curve at a time with foreach_set. Nothing
in the action changes before that, and every F-curve the write touches is snapshotted first, so a
cancel or a failure leaves the action exactly as it was.
"""

import dataclasses
import time

import bpy
import numpy as np
from bpy.props import BoolProperty, IntProperty
from bpy_extras import anim_utils
from mathutils import Euler

from ..ewbik_addon import bridge, live
from ..ewbik_addon.bridge import RigError
from ..ewbik_addon.active import armature_to_step_through, is_selected
from ..ewbik_addon.pose_channels import SceneFrameRange, read_pose_channels, write_pose_channels

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


def rotation_channel(rotation_mode):
    """The pose-bone property a bone in this rotation mode is keyed on."""
    return {"QUATERNION": "rotation_quaternion", "AXIS_ANGLE": "rotation_axis_angle"}.get(
        rotation_mode, "rotation_euler"
    )


def locked_rotation_components(pose_bone):
    """Indices of the bone's rotation channel that its locks keep, so the bake never keys them.

    Euler locks and 4D quaternion/axis-angle locks hold single components; Blender's ordinary
    quaternion locks act on Euler angles and change every component, so none is skipped there.
    """
    if pose_bone.rotation_mode not in ("QUATERNION", "AXIS_ANGLE"):
        return {k for k in range(3) if pose_bone.lock_rotation[k]}
    if pose_bone.lock_rotations_4d:
        return ({0} if pose_bone.lock_rotation_w else set()) | {k + 1 for k in range(3) if pose_bone.lock_rotation[k]}
    return set()


def read_keys(keyframe_points):
    """All keys of an F-curve, field by field: {Keyframe property: (K, size) array}."""
    keys = {}
    for name, (size, dtype) in KEY_FIELDS.items():
        values = np.empty(len(keyframe_points) * size, dtype=dtype)
        keyframe_points.foreach_get(name, values)
        keys[name] = values.reshape(-1, size)
    return keys


def write_keys(keyframe_points, keys):
    """Replace every key of an F-curve with `keys` (as `read_keys` returns them), in that order."""
    keyframe_points.clear()
    keyframe_points.add(len(keys["co"]))
    for name, values in keys.items():
        keyframe_points.foreach_set(name, values.ravel())


def _same_side_signs(vectors):
    """+1 or -1 per row, so that every signed row lies on the side of the previous signed row."""
    flips = np.sign(np.einsum("ij,ij->i", vectors[1:], vectors[:-1]))
    flips[flips == 0] = 1
    return np.concatenate([[1.0], np.cumprod(flips)])


def continuous_quaternions(quaternions):
    """(F, 4) keys of one bone with each quaternion in the hemisphere of the previous one.

    q and -q are the same rotation, but F-curves interpolate the numbers: a sign flip between two
    frames would spin the bone the long way round.
    """
    return quaternions * _same_side_signs(quaternions)[:, None]


def continuous_axis_angles(axis_angles):
    """(F, 4) (angle, x, y, z) keys of one bone with each axis on the side of the previous one.

    (angle, axis) and (-angle, -axis) are the same rotation; an axis flipping between frames would
    interpolate through a zero axis.
    """
    return axis_angles * _same_side_signs(axis_angles[:, 1:])[:, None]


def continuous_eulers(eulers, order):
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


@dataclasses.dataclass(frozen=True)
class BakeOptions:
    """What to bake; the operator's properties, or a script's arguments, passed to `PoseBake`."""

    frame_start: int
    frame_end: int
    step: int = 1
    only_selected: bool = False
    replace_range: bool = True
    disable_live: bool = True

    def frames(self):
        """The frames to solve: every `step`-th frame from the start, and always the end frame."""
        if self.step < 1:
            raise RigError(f"Step must be at least 1 frame, not {self.step}")
        if self.frame_start > self.frame_end:
            raise RigError(f"Nothing to bake: start frame {self.frame_start} is after end frame {self.frame_end}")
        return np.unique(np.append(np.arange(self.frame_start, self.frame_end + 1, self.step), self.frame_end))


def bake_slot(anim_data):
    """The action slot a bake keys (layered actions): the assigned one, else a suitable slot no
    other ID uses, else None (a new slot). Never another object's slot of a shared action."""
    if anim_data.action_slot is not None:
        return anim_data.action_slot
    return next((slot for slot in anim_data.action_suitable_slots if not slot.users()), None)


def action_fcurves(anim_data):
    """The F-curves a bake would key into (None without an action or channels)."""
    if anim_data is None or anim_data.action is None:
        return None
    if LAYERED_ACTIONS:
        slot = bake_slot(anim_data)
        channelbag = None if slot is None else anim_utils.action_get_channelbag_for_slot(anim_data.action, slot)
        return None if channelbag is None else channelbag.fcurves
    return anim_data.action.fcurves


def check_action(obj, bake_paths):
    """Refuse actions the bake cannot write: linked, in NLA tweak mode, or with locked channels."""
    anim_data = obj.animation_data
    if anim_data is None or anim_data.action is None:
        return
    action = anim_data.action
    if action.library is not None or not action.is_editable:
        source = action.library.filepath if action.library is not None else "a library"
        raise RigError(f"Action '{action.name}' is linked from {source}; make it local to bake into it")
    if anim_data.use_tweak_mode:
        raise RigError(f"'{obj.name}' is in NLA tweak mode; leave tweak mode to bake into its action")
    sharing = [] if LAYERED_ACTIONS else objects_animated_with(action, besides=obj)
    if sharing:
        raise RigError(
            f"Action '{action.name}' also animates {', '.join(repr(o.name) for o in sharing[:3])}"
            f"{' and more' if len(sharing) > 3 else ''}; baking '{obj.name}' into it would overwrite "
            f"their keys. Give '{obj.name}' its own action (a copy) and bake again"
        )
    fcurves = action_fcurves(anim_data) or ()
    for fcurve in fcurves:
        locked = fcurve.lock or (fcurve.group is not None and fcurve.group.lock)
        if locked and fcurve.data_path in bake_paths:
            raise RigError(
                f"Channel {fcurve.data_path}[{fcurve.array_index}] of action '{action.name}' is locked; "
                "unlock it to bake"
            )


def objects_animated_with(action, besides):
    """Other objects that play `action`, as their active action or in an NLA strip.

    Without action slots (Blender before 4.4) every F-curve of an action drives every object
    that plays it, so a bake into a shared action would rewrite the others' animation.
    """
    def plays(anim_data):
        return anim_data is not None and (anim_data.action == action or any(
            strip.action == action for track in anim_data.nla_tracks for strip in track.strips))

    return [other for other in bpy.data.objects if other != besides and plays(other.animation_data)]


class KeyWriter:
    """Writes baked keys into the armature's active action, and can put the action back exactly.

    Creates what is missing (animation data, action, slot, channelbag, F-curves, groups) and
    remembers it; snapshots each existing F-curve before its keys change. `restore` undoes both.
    """

    def __init__(self, obj):
        self.obj = obj
        self.created_animation_data = obj.animation_data is None
        anim_data = obj.animation_data_create()
        self.created_action = anim_data.action is None
        if self.created_action:
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

    def _ensure_channelbag(self, anim_data):
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

    def write(self, data_path, index, group, frames, values, *, replace_range, interpolation, handle_type):
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

    def restore(self):
        """Put the action (and the armature's animation data) back as they were before `write`."""
        obj = self.obj
        if self.created_action:
            obj.animation_data.action = None
            bpy.data.actions.remove(self.action)
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

    def _restore_slot(self):
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


@dataclasses.dataclass(frozen=True)
class BakeSummary:
    """What a finished bake keyed, for the operator's report."""

    frame_start: int
    frame_end: int
    frames: int
    bones: int
    fcurves: int

    def __str__(self):
        return (
            f"Baked {self.frames} frames ({self.frame_start}-{self.frame_end}) "
            f"into {self.fcurves} F-curves on {self.bones} bones"
        )


class PoseBake:
    """One bake in progress: solve frame after frame, then key the solved channels.

    `solve_next` handles one frame, so the modal operator can interleave progress and Esc.
    Until `finish` writes the keys only the pose and the current frame change, and `cancel`
    puts them back; any failure inside `solve_next` or `finish` cancels before it propagates.
    """

    def __init__(self, context, obj, options):
        if obj is None or obj.type != "ARMATURE":
            raise RigError("The active object is not an armature")
        if not obj.is_editable:
            raise RigError(f"Armature '{obj.name}' is linked; add a library override to bake it")
        scene = context.scene
        self.scene = scene
        self.view_layer = context.view_layer
        self.obj = obj
        self.options = options
        self.frames = options.frames()
        pose_bones = obj.pose.bones
        pinned = [pose_bone for pose_bone in pose_bones if pose_bone.ewbik.target is not None]
        if not pinned:
            raise RigError(f"No bone of '{obj.name}' is pinned; pin the bones to bake first")
        self.pins = [(pose_bone.name, pose_bone.ewbik.target) for pose_bone in pinned]
        index = {pose_bone.name: i for i, pose_bone in enumerate(pose_bones)}
        self.may_move = np.zeros(len(pose_bones), dtype=bool)
        for pose_bone in pinned:
            self.may_move[[index[bone.name] for bone in (pose_bone, *pose_bone.parent_recursive)]] = True
        self.allowed = np.ones(len(pose_bones), dtype=bool)
        if options.only_selected:
            self.allowed = np.array([is_selected(pose_bone) for pose_bone in pose_bones])
            if not (self.allowed & self.may_move).any():
                raise RigError("None of the selected bones is in a pinned chain; nothing to bake")
        self.rotation_modes = [pose_bone.rotation_mode for pose_bone in pose_bones]
        self.locked_components = [locked_rotation_components(pose_bone) for pose_bone in pose_bones]
        self.rotation_locked = np.array([
            any(pose_bone.lock_rotation) or (pose_bone.lock_rotations_4d and pose_bone.lock_rotation_w)
            for pose_bone in pose_bones
        ])
        is_root = np.array([pose_bone.parent is None for pose_bone in pose_bones])
        self.keys_location = (obj.ewbik.translate_root & is_root) | bridge.placed_controls(obj)
        check_action(obj, {
            pose_bones[i].path_from_id(name)
            for i in np.flatnonzero(self.may_move & self.allowed)
            for name in self.keyed_properties(i)
        })
        preferences = context.preferences.edit
        keyframe = bpy.types.Keyframe.bl_rna.properties
        self.interpolation = keyframe["interpolation"].enum_items[preferences.keyframe_new_interpolation_type].value
        self.handle_type = keyframe["handle_left_type"].enum_items[preferences.keyframe_new_handle_type].value
        self.start_frame = (scene.frame_current, scene.frame_subframe)
        self.start_pose = read_pose_channels(pose_bones)
        self.poses = {
            name: np.empty((len(self.frames), *values.shape), dtype=np.float32)
            for name, values in self.start_pose.items()
        }
        self.moved = np.zeros(len(pose_bones), dtype=bool)
        self.solved = 0

    @property
    def done(self):
        return self.solved == len(self.frames)

    @property
    def frame(self):
        """The frame `solve_next` solves (the last one once done)."""
        return int(self.frames[min(self.solved, len(self.frames) - 1)])

    def solve_next(self):
        """Move to the next frame, start from the previous frame's solution, solve, record.

        The solve is the one live solving runs on a frame change: within the armature's time
        budget, bone settings read once. So a baked frame costs no more than a live solve of it,
        and the keys hold what live playback showed; a budget of 0 bakes fully converged frames.
        """
        try:
            self._solve(self.frame)
        except BaseException:
            self.cancel()
            raise

    def solve_for(self, seconds):
        """Solve frames until `seconds` have passed (at least one frame) or all are done."""
        deadline = time.perf_counter() + seconds
        self.solve_next()
        while not self.done and time.perf_counter() < deadline:
            self.solve_next()

    def _solve(self, frame):
        with live.suspended():
            self.scene.frame_set(frame)
        self.solve_current_frame()

    def solve_current_frame(self):
        """Solve the scene's current frame (the one `frame` names) and record it."""
        with live.suspended():
            self.warm_start()
            try:
                result = bridge.solve_armature(self.obj, rescan=not self.solved)
            except RigError as error:
                raise RigError(f"Frame {self.frame}: {error}") from error
            self.record(result)

    def warm_start(self):
        """The previous frame's solution replaces what the old keys say, but never on locked
        rotation channels or unkeyed locations, which keep their animation. Below full influence
        the keys are the pose underneath the blend, so they stay."""
        if not (self.solved and self.obj.animation_data is not None and self.obj.ewbik.influence >= 1.0):
            return
        pose_bones = self.obj.pose.bones
        pose = read_pose_channels(pose_bones)
        for name, values in pose.items():
            carry = self.moved & (self.keys_location if name == "location" else ~self.rotation_locked)
            values[carry] = self.poses[name][self.solved - 1][carry]
        write_pose_channels(pose_bones, pose)

    def record(self, result):
        """Keep the solved frame's channels (after checking Blender moved the targets)."""
        try:
            self._check_targets_evaluated()
        except RigError as error:
            raise RigError(f"Frame {self.frame}: {error}") from error
        self.moved |= result.moved
        for name, values in read_pose_channels(self.obj.pose.bones).items():
            self.poses[name][self.solved] = values
        self.solved += 1

    def _check_targets_evaluated(self):
        """Blender does not evaluate a disabled or excluded target: its animation stops moving it."""
        depsgraph = self.view_layer.depsgraph
        for bone, target in self.pins:
            evaluated = target.evaluated_get(depsgraph)
            if not evaluated.is_evaluated or evaluated.hide_viewport:
                raise RigError(
                    f"pin '{bone}': target '{target.name}' is disabled in viewports or excluded from the view "
                    "layer, so Blender does not move it; enable it to bake"
                )

    def keyed_properties(self, i):
        """The pose-bone properties keyed on bone `i`: its rotation, and the root's location when
        the solver may move the root."""
        rotation = rotation_channel(self.rotation_modes[i])
        return (rotation, "location") if self.keys_location[i] else (rotation,)

    def keyed_channels(self):
        """(pose-bone index, property, (F, size) values) of every channel to key, made continuous."""
        for i in np.flatnonzero(self.moved & self.allowed):
            for name in self.keyed_properties(i):
                values = self.poses[name][:, i].astype(np.float64)
                if name == "rotation_quaternion":
                    values = continuous_quaternions(values)
                elif name == "rotation_axis_angle":
                    values = continuous_axis_angles(values)
                elif name == "rotation_euler":
                    values = continuous_eulers(values, self.rotation_modes[i])
                yield i, name, values

    def finish(self):
        """Key every solved frame, go back to the starting frame, and say what was keyed."""
        try:
            return self._finish()
        except BaseException:
            self.cancel()
            raise

    def _finish(self):
        if not (self.moved & self.allowed).any():
            raise RigError("The solver moved none of the bones to bake; nothing keyed")
        frames = self.frames.astype(np.float32)
        pose_bones = self.obj.pose.bones
        writer = KeyWriter(self.obj)
        fcurve_count = 0
        try:
            for i, name, values in self.keyed_channels():
                pose_bone = pose_bones[i]
                data_path = pose_bone.path_from_id(name)
                fcurve_count += values.shape[1]
                skipped = self.locked_components[i] if name != "location" else ()
                for index in (k for k in range(values.shape[1]) if k not in skipped):
                    writer.write(
                        data_path, index, pose_bone.name, frames, values[:, index],
                        replace_range=self.options.replace_range, interpolation=self.interpolation,
                        handle_type=self.handle_type,
                    )
        except BaseException:
            writer.restore()
            raise
        keyed = self.moved & self.allowed
        self._return_to_start(from_action=keyed)
        if self.options.disable_live:
            self.obj.ewbik.live = False
        return BakeSummary(
            frame_start=int(self.frames[0]), frame_end=int(self.frames[-1]), frames=len(self.frames),
            bones=int(keyed.sum()), fcurves=fcurve_count,
        )

    def cancel(self):
        """Put the pose and the current frame back as they were before the bake."""
        self._return_to_start(from_action=np.zeros_like(self.moved))

    def _return_to_start(self, from_action):
        """Back to the starting frame with the starting pose, except bones `from_action` now plays.

        Evaluated while live solving is paused: the restored pose is the one the user left, not a
        fresh solve of it.
        """
        pose_bones = self.obj.pose.bones
        frame, subframe = self.start_frame
        with live.suspended():
            self.scene.frame_set(frame, subframe=subframe)
            pose = {name: values.copy() for name, values in self.start_pose.items()}
            for name, values in read_pose_channels(pose_bones).items():
                pose[name][from_action] = values[from_action]
            write_pose_channels(pose_bones, pose)
            self.obj.update_tag()
            self.view_layer.update()


def armatures_to_bake(context):
    """The context's armature, then every other selected armature with a pinned bone."""
    first = context.object
    others = [
        obj for obj in context.selected_objects
        if obj != first and obj.type == "ARMATURE" and any(b.ewbik.target is not None for b in obj.pose.bones)
    ]
    return [first, *sorted(others, key=lambda obj: obj.name)]


@dataclasses.dataclass(frozen=True)
class CrowdSummary:
    """What a bake of several armatures keyed."""

    summaries: tuple

    def __str__(self):
        if len(self.summaries) == 1:
            return str(self.summaries[0])
        first = self.summaries[0]
        return (
            f"Baked {first.frames} frames ({first.frame_start}-{first.frame_end}) of {len(self.summaries)} "
            f"armatures into {sum(s.fcurves for s in self.summaries)} F-curves on "
            f"{sum(s.bones for s in self.summaries)} bones"
        )


class CrowdBake:
    """Several armatures baked in one pass over the frames: each frame is set (and the scene
    evaluated) once, then every armature solves it. Same interface as PoseBake; a failure in
    any armature cancels all of them."""

    def __init__(self, context, objects, options):
        self.bakes = [PoseBake(context, obj, options) for obj in objects]
        self.scene = context.scene
        self.frames = self.bakes[0].frames

    @property
    def solved(self):
        return self.bakes[0].solved

    @property
    def done(self):
        return self.bakes[0].done

    @property
    def frame(self):
        return self.bakes[0].frame

    def solve_next(self):
        try:
            with live.suspended():
                self.scene.frame_set(self.frame)
                if len(self.bakes) == 1:
                    self.bakes[0].solve_current_frame()
                else:
                    self._solve_together()
        except BaseException:
            self.cancel()
            raise

    def _solve_together(self):
        """Every armature's frame in one solver call (bridge.solve_crowd)."""
        for bake in self.bakes:
            bake.warm_start()
            try:
                bridge.pinned_targets(bake.obj, rescan=not bake.solved)
            except RigError as error:
                raise RigError(f"Frame {bake.frame}: {error}") from error
        outcomes = bridge.solve_crowd([bake.obj for bake in self.bakes])
        for bake in self.bakes:
            outcome = outcomes[bake.obj]
            if isinstance(outcome, RigError):
                raise RigError(f"Frame {bake.frame}: {outcome}") from outcome
            bake.record(outcome)

    def solve_for(self, seconds):
        """Solve frames until `seconds` have passed (at least one frame) or all are done."""
        deadline = time.perf_counter() + seconds
        self.solve_next()
        while not self.done and time.perf_counter() < deadline:
            self.solve_next()

    def finish(self):
        """Key every armature; if one fails, the ones not yet keyed are put back too."""
        summaries = []
        for i, bake in enumerate(self.bakes):
            try:
                summaries.append(bake.finish())
            except BaseException:
                for later in self.bakes[i + 1:]:
                    later.cancel()
                raise
        return CrowdSummary(tuple(summaries))

    def cancel(self):
        for bake in reversed(self.bakes):
            bake.cancel()


class EWBIK_OT_bake(SceneFrameRange, bpy.types.Operator):
    """Solve every frame of a range and key the solved rotations on the bones the solver moves (every selected armature with pins)"""

    bl_idname = "ewbik.bake"
    bl_label = "Bake IK to Keyframes"
    bl_options = {"REGISTER", "UNDO"}

    step: IntProperty(name="Step", description="Solve and key every this many frames (the end frame is always keyed)",
                      min=1, default=1)
    only_selected: BoolProperty(
        name="Only Selected Bones",
        description="Key only the selected bones among those the solver moves",
        default=False,
    )
    replace_range: BoolProperty(
        name="Replace Keys in Range",
        description=(
            "Remove the existing keys inside the range on the baked channels; otherwise only keys on "
            "the baked frames are replaced. Keys outside the range are always kept"
        ),
        default=True,
    )
    disable_live: BoolProperty(
        name="Turn Off Live Solving",
        description="Stop live solving afterwards, so the baked keys play back instead of the pins",
        default=True,
    )

    @classmethod
    def poll(cls, context):
        return armature_to_step_through(cls, context, "Select an armature with pinned bones")

    def _options(self, context):
        """The bake options, with an unset range filled in from the scene (and shown in redo)."""
        self.fill_frame_range(context.scene)
        return BakeOptions(
            frame_start=self.frame_start, frame_end=self.frame_end, step=self.step,
            only_selected=self.only_selected, replace_range=self.replace_range,
            disable_live=self.disable_live,
        )

    def execute(self, context):
        window_manager = context.window_manager
        try:
            bake = CrowdBake(context, armatures_to_bake(context), self._options(context))
            window_manager.progress_begin(0, len(bake.frames))
            try:
                while not bake.done:
                    bake.solve_next()
                    window_manager.progress_update(bake.solved)
            finally:
                window_manager.progress_end()
            summary = bake.finish()
        except RigError as error:
            self.report({"ERROR"}, str(error))
            return {"CANCELLED"}
        self.report({"INFO"}, str(summary))
        return {"FINISHED"}

    def invoke(self, context, event):
        try:
            self._bake = CrowdBake(context, armatures_to_bake(context), self._options(context))
        except RigError as error:
            self.report({"ERROR"}, str(error))
            return {"CANCELLED"}
        window_manager = context.window_manager
        self._timer = window_manager.event_timer_add(0.001, window=context.window)
        window_manager.progress_begin(0, len(self._bake.frames))
        window_manager.modal_handler_add(self)
        self._show_status(context)
        return {"RUNNING_MODAL"}

    def modal(self, context, event):
        bake = self._bake
        if event.type == "ESC":
            bake.cancel()
            self._end(context)
            self.report({"WARNING"}, "Bake cancelled; the action is unchanged")
            return {"CANCELLED"}
        if event.type != "TIMER":
            return {"RUNNING_MODAL"}
        try:
            bake.solve_for(seconds=1 / 30)
            if not bake.done:
                context.window_manager.progress_update(bake.solved)
                self._show_status(context)
                return {"RUNNING_MODAL"}
            summary = bake.finish()
        except RigError as error:
            self._end(context)
            self.report({"ERROR"}, str(error))
            return {"CANCELLED"}
        except BaseException:
            self._end(context)
            raise
        self._end(context)
        self.report({"INFO"}, str(summary))
        return {"FINISHED"}

    def cancel(self, context):
        """Blender ends the modal (file load, window closed): put everything back."""
        self._bake.cancel()
        self._end(context)

    def _show_status(self, context):
        bake = self._bake
        context.workspace.status_text_set(
            f"Baking IK: frame {bake.frame} ({bake.solved}/{len(bake.frames)}), Esc to cancel"
        )

    def _end(self, context):
        window_manager = context.window_manager
        window_manager.event_timer_remove(self._timer)
        window_manager.progress_end()
        context.workspace.status_text_set(None)


CLASSES = (EWBIK_OT_bake,)
