"""The bake: solve every frame of a range and turn the solved pose into plain rotation keys.

Animators pin hands and feet, animate the targets, and then need ordinary keys for export, game
engines and hand editing. The work lives in `PoseBake`, plain Python advanced one frame at a
time, so scripts, the modal operator and the tests (Blender's timers never fire headless) all run
the same code.

Each frame is solved as Solve solves it (from the pose underneath, without the live time budget),
so the keys hold the pose live playback shows for the same targets.
Keys are written once, after the last frame, a whole F-curve at a time with foreach_set. Nothing
in the action changes before that, and every F-curve the write touches is snapshotted first, so a
cancel or a failure leaves the action exactly as it was.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

import bpy
import numpy as np

from ...solver import EwbikError
from ..bridge import pin_reading, rig_cache
from ..bridge.rig_cache import pinned_chains
from ..com.active import is_selected
from ..com.armature_checks import RigError, armature_scale
from ..com.live_pause import suspended
from ..com.pose_channels import read_pose_channels, write_pose_channels
from ..com.rotation_channels import channels_to_quaternions, rotation_channel
from ..com.stored_settings import bone_setting, bone_target, pinned_bones
from ..rigs import production_checks
from ..solve import armature_solve, crowd_solve
from . import bake_dependencies
from .fcurve_keys import (
    KeyPlayer,
    KeyWriter,
    check_action,
    continuous_axis_angles,
    continuous_eulers,
    continuous_quaternions,
    keyed_frames,
    locked_rotation_components,
)
from .key_reduction import BakedBone, PinnedPoses, reduce_keys

if TYPE_CHECKING:
    from ...solver import SolveResult
    from ..bridge.pose_io import PoseBuffers
    from ..bridge.rig_cache import PinnedChains


@dataclasses.dataclass(frozen=True)
class BakeOptions:
    """What to bake; the operator's properties, or a script's arguments, passed to `PoseBake`."""

    frame_start: int
    frame_end: int
    step: int = 1
    only_selected: bool = False
    replace_range: bool = True
    disable_live: bool = True
    # Solve and key only the frames where a pin target (or an object above it) or the armature
    # has a key in its active action, instead of every `step`-th frame.
    keys_only: bool = False
    # Above 0: after the per-frame bake, drop the keys without which every pinned bone's head stays
    # within this many millimetres (the scene's unit scale) of the bake and every keyed bone's rotation
    # within `tolerance_deg` degrees, as Blender plays the keys that remain.
    tolerance_mm: float = 0.0
    tolerance_deg: float = 1.0
    # Key a copy of the armature's action, which it then plays; the action itself is untouched.
    new_action: bool = False

    def frames(self) -> np.ndarray:
        """The frames to solve: every `step`-th frame from the start, and always the end frame."""
        self.check_tolerances()
        if self.step < 1:
            reason = f"must be at least 1 frame, not {self.step}"
            raise RigError("step", reason, f"Step {reason}")
        if self.frame_start > self.frame_end:
            reason = f"start frame {self.frame_start} is after end frame {self.frame_end}"
            raise RigError("frame_start", reason, f"Nothing to bake: {reason}")
        return np.unique(
            np.append(np.arange(self.frame_start, self.frame_end + 1, self.step), self.frame_end)
        )

    def check_tolerances(self) -> None:
        """RigError for a tolerance that cannot be met or measured."""
        if not self.tolerance_mm >= 0.0:
            reason = f"must be 0 (every frame keyed) or more, not {self.tolerance_mm}"
            raise RigError("tolerance_mm", reason, f"Tolerance {reason}")
        if self.tolerance_mm > 0.0 and not self.tolerance_deg > 0.0:
            reason = f"must be above 0 degrees to reduce keys, not {self.tolerance_deg}"
            raise RigError("tolerance_deg", reason, f"Angle tolerance {reason}")
        if self.tolerance_mm > 0.0 and not self.replace_range:
            reason = "reduces keys only with Replace Keys in Range (keys between them would stay)"
            raise RigError("tolerance_mm", reason, f"A tolerance {reason}")

    def keyed_frames(self, armatures: Iterable[bpy.types.Object]) -> np.ndarray:
        """The frames to solve for `armatures` baked together: `frames`, or with `keys_only` the
        range's frames where their actions or their pins' targets' (or the objects' above those)
        have keys."""
        frames = self.frames()
        if not self.keys_only:
            return frames
        armatures = list(armatures)
        sources = {*armatures, *(target for obj in armatures for target in pin_targets_and_parents(obj))}
        keyed = keyed_frames(sources, int(frames[0]), int(frames[-1]))
        if not len(keyed):
            reason = f"no key in frames {frames[0]}-{frames[-1]} on the pin targets or the armature"
            raise RigError("keys_only", reason, f"Nothing to bake: {reason}")
        return keyed


@dataclasses.dataclass(frozen=True)
class BakeSummary:
    """What a finished bake keyed, for the operator's report."""

    frame_start: int
    frame_end: int
    frames: int
    bones: int
    fcurves: int
    keys: int = 0
    reduced: bool = False  # keys dropped within a tolerance

    def __str__(self) -> str:
        return (
            f"Baked {self.frames} frames ({self.frame_start}-{self.frame_end}) "
            f"into {self.fcurves} F-curves on {self.bones} bones"
            + (f", {self.keys} keys within the tolerance" if self.reduced else "")
        )


class PoseBake:
    """One bake in progress: solve frame after frame, then key the solved channels.

    `solve_next` handles one frame, so the modal operator can interleave progress and Esc.
    Until `finish` writes the keys only the pose and the current frame change, and `cancel`
    puts them back; any failure inside `solve_next` or `finish` cancels before it propagates.
    """

    def __init__(
        self, context: bpy.types.Context, obj: bpy.types.Object | None, options: BakeOptions
    ) -> None:
        if obj is None or obj.type != "ARMATURE":
            raise RigError("object", "is not an armature", "The active object is not an armature")
        if not obj.is_editable:
            reason = "is linked; add a library override to bake it"
            raise RigError("library", reason, f"Armature '{obj.name}' {reason}")
        scene = context.scene
        self.scene = scene
        self.view_layer = context.view_layer
        self.obj = obj
        self.name = obj.name
        self.was_live = obj.ewbik.live
        self.writer = None  # the KeyWriter of the keys written, until the bake ends
        self.options = options
        self.frames = options.keyed_frames([obj])
        pose_bones = obj.pose.bones
        pinned = pinned_bones(obj)
        if not pinned:
            raise RigError(
                "pins", "no bone is pinned", f"No bone of '{obj.name}' is pinned; pin the bones to bake first"
            )
        self.pins = [(pose_bone.name, bone_target(pose_bone)) for pose_bone in pinned]
        index = {pose_bone.name: i for i, pose_bone in enumerate(pose_bones)}
        parents = [pose_bone.parent.name if pose_bone.parent else None for pose_bone in pose_bones]
        self.may_move = pinned_chains(index, parents, [bone for bone, _ in self.pins])
        self.allowed = np.ones(len(pose_bones), dtype=bool)
        if options.only_selected:
            self.allowed = np.array([is_selected(pose_bone) for pose_bone in pose_bones])
            if not (self.allowed & self.may_move).any():
                raise RigError(
                    "only_selected",
                    "no selected bone is in a pinned chain",
                    "None of the selected bones is in a pinned chain; nothing to bake",
                )
        self.rotation_modes = [pose_bone.rotation_mode for pose_bone in pose_bones]
        self.pose_animated = pose_set_on_frame_change(obj)
        self.locked_components = [locked_rotation_components(pose_bone) for pose_bone in pose_bones]
        is_root = np.array([pose_bone.parent is None for pose_bone in pose_bones])
        self.keys_location = (obj.ewbik.translate_root & is_root) | production_checks.placed_controls(obj)
        self.keys_scale = np.array([bone_setting(pose_bone, "stretch") > 1.0 for pose_bone in pose_bones])
        check_action(
            obj,
            {
                pose_bones[i].path_from_id(name)
                for i in np.flatnonzero(self.may_move & self.allowed)
                for name in self.keyed_properties(i)
            },
            into_copy=options.new_action,
        )
        preferences = context.preferences.edit
        keyframe = bpy.types.Keyframe.bl_rna.properties
        self.interpolation = (
            keyframe["interpolation"].enum_items[preferences.keyframe_new_interpolation_type].value
        )
        self.handle_type = keyframe["handle_left_type"].enum_items[preferences.keyframe_new_handle_type].value
        self.start_frame = (scene.frame_current, scene.frame_subframe)
        self.start_pose = read_pose_channels(pose_bones)
        self.set_frames(self.frames)
        self.moved = np.zeros(len(pose_bones), dtype=bool)
        self.solved = 0
        self.held_buffers = None  # the rig's buffers while they hold the solves' writes

    def set_frames(self, frames: np.ndarray) -> None:
        """Solve and key `frames` (before the first frame is solved): a crowd's keys-only bake
        solves every armature on the frames any of them has keys on."""
        self.frames = frames
        self.poses = {
            name: np.empty((len(frames), *values.shape), dtype=np.float32)
            for name, values in self.start_pose.items()
        }

    @property
    def done(self) -> bool:
        return self.solved == len(self.frames)

    @property
    def frame(self) -> int:
        """The frame `solve_next` solves (the last one once done)."""
        return int(self.frames[min(self.solved, len(self.frames) - 1)])

    def solve_next(self) -> None:
        """Move to the next frame, solve it as Solve does (no time budget, bone settings read once),
        record it."""
        try:
            self._solve(self.frame)
        except BaseException:
            self.cancel()
            raise

    def solve_for(self, seconds: float) -> None:
        """Solve frames until `seconds` have passed (at least one frame) or all are done."""
        deadline = time.perf_counter() + seconds
        self.solve_next()
        while not self.done and time.perf_counter() < deadline:
            self.solve_next()

    @property
    def keeps_pose(self) -> bool:
        """Whether the channels still hold what the last frame's solve wrote, so the rig's buffers
        stand for them (`solve_armature`'s only_targets_moved): after the first frame, when no
        animation sets the armature's channels on a frame change."""
        return self.solved > 0 and not self.pose_animated

    def _solve(self, frame: int) -> None:
        with suspended():
            self.scene.frame_set(frame)
        rig_cache.forget_pin_settings(self.obj)
        self.solve_current_frame()

    def solve_current_frame(self) -> None:
        """Solve the scene's current frame (the one `frame` names) and record it."""
        with suspended():
            try:
                result = armature_solve.solve_armature(
                    self.obj, full=True, rescan=not self.solved, only_targets_moved=self.keeps_pose
                )
            except EwbikError as error:
                raise RigError.told_after(f"Frame {self.frame}: ", error) from error
            self.record(result)

    def record(self, result: SolveResult) -> None:
        """Keep the solved frame's channels (after checking Blender moved the targets)."""
        try:
            self._check_targets_evaluated()
        except RigError as error:
            raise RigError.told_after(f"Frame {self.frame}: ", error) from error
        self.moved |= result.moved
        for name, values in self.channels_written().items():
            self.poses[name][self.solved] = values
        self.solved += 1

    def channels_written(self) -> dict[str, np.ndarray]:
        """The pose channels as the solve left them: the rig's buffers, which mirror what it read
        and wrote (each bone's own rotation property and the location; the properties of other
        rotation modes are only read where some bone uses them, and are never keyed), and the
        scale, which stretch writes and the buffers do not mirror."""
        scale = np.empty(len(self.obj.pose.bones) * 3, dtype=np.float32)
        self.obj.pose.bones.foreach_get("scale", scale)
        return {**buffer_channels(rig_cache.rig_for(self.obj, False).buffers), "scale": scale.reshape(-1, 3)}

    def _check_targets_evaluated(self) -> None:
        """Blender does not evaluate a disabled or excluded target: its animation stops moving it."""
        depsgraph = self.view_layer.depsgraph
        for bone, target in self.pins:
            evaluated = target.evaluated_get(depsgraph)
            if not evaluated.is_evaluated or evaluated.hide_viewport:
                raise RigError(
                    f"pin '{bone}'",
                    f"target '{target.name}' is disabled in viewports or excluded from the view layer, "
                    "so Blender does not move it; enable it to bake",
                )

    def keyed_properties(self, i: int | np.integer) -> tuple[str, ...]:
        """The pose-bone properties keyed on bone `i`: its rotation, the root's location when
        the solver may move the root, and the scale of a bone that may stretch."""
        rotation = rotation_channel(self.rotation_modes[i])
        return (
            rotation,
            *(("location",) if self.keys_location[i] else ()),
            *(("scale",) if self.keys_scale[i] else ()),
        )

    def keyed_components(self, i: int | np.integer, name: str, size: int) -> list[int]:
        """The components of bone `i`'s property `name` the bake keys: every one but the locked
        rotation components, and of the scale only Y (stretch)."""
        skipped = {"location": (), "scale": (0, 2)}.get(name, self.locked_components[i])
        return [k for k in range(size) if k not in skipped]

    def kept_keys(
        self, writer: KeyWriter, channels: list[tuple[np.integer, str, np.ndarray]]
    ) -> dict[int, np.ndarray]:
        """Indices into `frames` of the keys each keyed bone keeps: with a tolerance those
        `key_reduction.reduce_keys` keeps as Blender plays them in the F-curves `writer` keys;
        without one, none named (every frame is keyed)."""
        options = self.options
        if options.tolerance_mm <= 0.0 or len(self.frames) < 3:
            return {}
        chains = rig_cache.rig_for(self.obj, False).chains
        in_skeleton = {row: k for k, row in enumerate(chains.rows.tolist())}
        bones: dict[int, BakedBone] = {}
        for i, name, values in channels:
            bone = bones.setdefault(int(i), BakedBone({}, self.rotation_modes[i], in_skeleton[int(i)]))
            bone.channels[name] = values
        player = KeyPlayer(self.frames, self.interpolation, self.handle_type)
        pose_bones = self.obj.pose.bones

        def play(row: int, name: str, kept: np.ndarray, values: np.ndarray) -> np.ndarray:
            path = pose_bones[row].path_from_id(name)
            keyed = self.keyed_components(row, name, values.shape[1])
            return np.column_stack(
                [
                    player.play(writer.fcurves.get((path, k)), kept, values[:, k])
                    if k in keyed
                    else values[:, k]
                    for k in range(values.shape[1])
                ]
            )

        scene_units = options.tolerance_mm / 1000.0 / self.scene.unit_settings.scale_length
        try:
            return reduce_keys(
                self.frames.astype(float),
                bones,
                self.pinned_poses(chains),
                math.radians(options.tolerance_deg),
                scene_units / armature_scale(self.obj),
                play,
            )
        finally:
            player.remove()

    def pinned_poses(self, chains: PinnedChains) -> PinnedPoses:
        """The pinned chains on every solved frame, as `channels_written` recorded them."""
        rows = chains.rows
        poses = self.poses
        rotations = channels_to_quaternions(
            [self.rotation_modes[row] for row in rows.tolist()],
            poses["rotation_quaternion"][:, rows],
            poses["rotation_euler"][:, rows],
            poses["rotation_axis_angle"][:, rows],
        )
        scales = poses["scale"][:, rows, 1].astype(float)
        return PinnedPoses(
            skeleton=chains.skeleton,
            pinned=np.array([chains.skeleton.index[bone] for bone in chains.pinned]),
            rotations=rotations / np.linalg.norm(rotations, axis=-1, keepdims=True),
            locations=poses["location"][:, rows].astype(float),
            scales=None if (scales == 1.0).all() else scales,
        )

    def keyed_channels(self) -> Iterator[tuple[np.integer, str, np.ndarray]]:
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

    def finish(self) -> BakeSummary:
        """Key every solved frame, go back to the starting frame, and say what was keyed."""
        try:
            summary = self.write_keys()
        except BaseException:
            self.cancel()
            raise
        return_to_start([(self, self.keyed)])
        return summary

    @property
    def keyed(self) -> np.ndarray:
        """The bones whose keys the bake writes."""
        return self.moved & self.allowed

    def check_keyable(self) -> None:
        """RigError when there is nothing to key (every armature of a crowd is asked before any is keyed)."""
        if not self.keyed.any():
            raise RigError(
                "pins",
                "moved none of the bones",
                f"The solver moved none of the bones of '{self.name}' to bake; nothing keyed",
            )

    def write_keys(self) -> BakeSummary:
        """Key every solved frame, or with a tolerance the frames `kept_keys` keeps (the pose and
        the frame stay as the last solve left them); if a write fails, the action is put back before
        the error propagates."""
        self.check_keyable()
        frames = self.frames.astype(np.float32)
        pose_bones = self.obj.pose.bones
        channels = list(self.keyed_channels())
        writer = KeyWriter(self.obj, new_action=self.options.new_action)
        fcurve_count = key_count = 0
        try:
            kept = self.kept_keys(writer, channels)
            for i, name, values in channels:
                pose_bone = pose_bones[i]
                data_path = pose_bone.path_from_id(name)
                fcurve_count += values.shape[1]
                rows = kept.get(int(i), slice(None))
                for index in self.keyed_components(i, name, values.shape[1]):
                    writer.write(
                        data_path,
                        index,
                        pose_bone.name,
                        frames[rows],
                        values[rows, index],
                        replace_range=self.options.replace_range,
                        interpolation=self.interpolation,
                        handle_type=self.handle_type,
                    )
                    key_count += len(frames[rows])
        except BaseException:
            writer.restore()
            raise
        self.writer = writer
        keyed = self.keyed
        if self.options.disable_live:
            self.obj.ewbik.live = False
        summary = BakeSummary(
            frame_start=int(self.frames[0]),
            frame_end=int(self.frames[-1]),
            frames=len(self.frames),
            bones=int(keyed.sum()),
            fcurves=fcurve_count,
            keys=key_count,
            reduced=bool(kept),
        )
        self.status_before = (self.obj.ewbik.status, self.obj.ewbik.status_is_error)
        self.obj.ewbik.status = f"{summary}" + (
            "; Live is off, the keys play back" if not self.obj.ewbik.live else ""
        )
        self.obj.ewbik.status_is_error = False
        return summary

    def cancel(self) -> None:
        """Put the pose and the current frame back as they were before the bake."""
        return_to_start([(self, np.zeros_like(self.moved))])

    def unkey(self) -> None:
        """Take back the keys `write_keys` wrote (another armature of the bake failed)."""
        if self.writer is not None:
            self.writer.restore()
            self.writer = None
            self.obj.ewbik.status, self.obj.ewbik.status_is_error = self.status_before
        self.obj.ewbik.live = self.was_live

    @property
    def deleted(self) -> bool:
        """Whether the armature was deleted since the bake started (the modal bake runs between
        the user's edits)."""
        try:
            self.obj.name  # noqa: B018 (raises ReferenceError once the object is gone)
        except ReferenceError:
            return True
        return False

    def check_alive(self) -> None:
        """RigError once the armature is gone: nothing of it can be solved, keyed or restored."""
        if self.deleted:
            raise RigError.about(self.name, "armature", "was deleted during the bake; nothing keyed")

    @property
    def may_hold_writes(self) -> bool:
        """Whether later frames may keep this armature's solved pose in the rig's buffers alone
        (`PoseBuffers.held`): after the first frame, when every read of its pose can come from them
        (no animation sets it, no constraint or driver poses a bone from the others, no IK control
        is placed), provided nothing the bake reads depends on it (`bake_dependencies`)."""
        rig = rig_cache.rig_for(self.obj, False)
        return self.keeps_pose and not (rig.fixed_mask.any() or rig.placed.any())

    def hold_writes(self) -> None:
        buffers = rig_cache.rig_for(self.obj, False).buffers
        buffers.held = True
        self.held_buffers = buffers

    def stop_holding(self) -> PoseBuffers | None:
        """Later solves write through Blender again; returns the buffers that were held (or None)."""
        buffers, self.held_buffers = self.held_buffers, None
        if buffers is not None:
            buffers.held = False
        return buffers

    def show_solved(self, buffers: PoseBuffers | None = None) -> None:
        """Blender's channels take what the held buffers (or `buffers`) kept, as if every solve had
        written them: the modal bake shows the last solved frame between timer ticks, and the bake's
        end puts the pose where it always was before returning to the starting frame."""
        if buffers is None:
            buffers = self.held_buffers
        if buffers is None:
            return
        used = {"rotation_quaternion", "location"} | {rotation_channel(mode) for mode in self.rotation_modes}
        channels = {name: values for name, values in buffer_channels(buffers).items() if name in used}
        write_pose_channels(self.obj.pose.bones, channels)
        self.obj.update_tag()

    def restore_pose(self, from_action: np.ndarray) -> None:
        """The starting pose back, except bones `from_action` (the scene is at the starting frame,
        so their channels are what the action now plays); the armature tagged for evaluation."""
        pose_bones = self.obj.pose.bones
        pose = {name: values.copy() for name, values in self.start_pose.items()}
        for name, values in read_pose_channels(pose_bones).items():
            pose[name][from_action] = values[from_action]
        write_pose_channels(pose_bones, pose)
        self.obj.update_tag()


def buffer_channels(buffers: PoseBuffers) -> dict[str, np.ndarray]:
    """The pose channels a rig's buffers hold, by property name (each bone's own rotation property
    and the location; the other rotation properties only where some bone uses them)."""
    return {
        "rotation_quaternion": buffers.quaternion,
        "rotation_euler": buffers.euler,
        "rotation_axis_angle": buffers.axis_angle,
        "location": buffers.location,
    }


def pin_targets_and_parents(obj: bpy.types.Object) -> list[bpy.types.Object]:
    """The armature's pin targets and every object above each (their animation moves the target)."""
    found = []
    for pose_bone in pinned_bones(obj):
        node = bone_target(pose_bone)
        while node is not None:
            found.append(node)
            node = node.parent
    return found


def pose_set_on_frame_change(obj: bpy.types.Object) -> bool:
    """Whether a frame change may set the armature's channels or settings (an action, NLA strips,
    drivers): then every baked frame reads its pose from Blender."""
    animation = obj.animation_data
    return animation is not None and (
        animation.action is not None or len(animation.nla_tracks) > 0 or len(animation.drivers) > 0
    )


def return_to_start(restores: list[tuple[PoseBake, np.ndarray]]) -> None:
    """Back to the starting frame with each bake's starting pose: restores holds (PoseBake, bones
    its action now plays) of bakes that share the scene and the starting frame.

    One frame change and one evaluation for all of them (a crowd of armatures returns in the
    time of one), while live solving is paused: the restored pose is the one the user left, not
    a fresh solve of it.
    """
    first = restores[0][0]
    frame, subframe = first.start_frame
    restores = [(bake, from_action) for bake, from_action in restores if not bake.deleted]
    with suspended():
        released = [(bake, bake.stop_holding()) for bake, _ in restores]  # every flag, before any write
        for bake, buffers in released:
            bake.show_solved(buffers)
        first.scene.frame_set(frame, subframe=subframe)
        for bake, from_action in restores:
            bake.restore_pose(from_action)
        first.view_layer.update()


def armatures_to_bake(context: bpy.types.Context) -> list[bpy.types.Object]:
    """The context's armature, then every other selected armature with a pinned bone."""
    first = context.object
    others = [
        obj
        for obj in context.selected_objects
        if obj != first and obj.type == "ARMATURE" and pinned_bones(obj)
    ]
    return [first, *sorted(others, key=lambda obj: obj.name)]


@dataclasses.dataclass(frozen=True)
class CrowdSummary:
    """What a bake of several armatures keyed."""

    summaries: tuple

    def __str__(self) -> str:
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

    def __init__(
        self, context: bpy.types.Context, objects: Iterable[bpy.types.Object], options: BakeOptions
    ) -> None:
        self.bakes = [PoseBake(context, obj, options) for obj in objects]
        if options.keys_only and len(self.bakes) > 1:
            frames = options.keyed_frames([bake.obj for bake in self.bakes])
            for bake in self.bakes:
                bake.set_frames(frames)
        self.scene = context.scene
        self.frames = self.bakes[0].frames

    @property
    def solved(self) -> int:
        return self.bakes[0].solved

    @property
    def done(self) -> bool:
        return self.bakes[0].done

    @property
    def frame(self) -> int:
        return self.bakes[0].frame

    def solve_next(self) -> None:
        try:
            for bake in self.bakes:
                bake.check_alive()
            with suspended():
                self.scene.frame_set(self.frame)
                if len(self.bakes) == 1:
                    self.bakes[0].solve_current_frame()
                else:
                    self._solve_together()
            if self.solved == 1:
                self._hold_writes()
        except BaseException:
            self.cancel()
            raise

    def _hold_writes(self) -> None:
        """After the first frame, the armatures whose pose nothing the bake reads depends on keep
        it in their buffers until the bake ends (`bake_dependencies`)."""
        armatures = [bake.obj for bake in self.bakes]
        read = bake_dependencies.armatures_read(
            armatures, [target for bake in self.bakes for _, target in bake.pins]
        )
        for bake in self.bakes:
            if bake.obj not in read and bake.may_hold_writes:
                bake.hold_writes()

    def _solve_together(self) -> None:
        """Every armature's frame in one solver call (crowd_solve.solve_crowd)."""
        for bake in self.bakes:
            rig_cache.forget_pin_settings(bake.obj)
            if bake.solved:
                continue
            try:
                pin_reading.pinned_targets(bake.obj)  # the bone settings scanned once, for the first frame
            except EwbikError as error:
                raise RigError.told_after(f"Frame {bake.frame}: ", error) from error
        outcomes = crowd_solve.solve_crowd(
            [bake.obj for bake in self.bakes], {bake.obj for bake in self.bakes if bake.keeps_pose}, full=True
        )
        for bake in self.bakes:
            outcome = outcomes[bake.obj]
            if isinstance(outcome, EwbikError):
                raise RigError.told_after(f"Frame {bake.frame}: ", outcome) from outcome
            bake.record(outcome)

    def solve_for(self, seconds: float) -> None:
        """Solve frames until `seconds` have passed (at least one frame) or all are done."""
        deadline = time.perf_counter() + seconds
        self.solve_next()
        while not self.done and time.perf_counter() < deadline:
            self.solve_next()

    def solve_all(self, progress: Callable[[int], object] = lambda solved: None) -> None:
        """Solve every remaining frame in one go (the operator's `execute`, the command line's
        bake), telling `progress` how many frames are solved after each."""
        while not self.done:
            self.solve_next()
            progress(self.solved)

    def finish(self) -> CrowdSummary:
        """Key every armature, then return them all to the starting frame together. All or none:
        an armature with nothing to key is refused before any is keyed, and if a write fails, the
        keys already written are taken back and every armature returns to its starting pose."""
        summaries = []
        try:
            for bake in self.bakes:
                bake.check_alive()
                bake.check_keyable()
            for bake in self.bakes:
                summaries.append(bake.write_keys())  # noqa: PERF401 (on a failure, how many were keyed)
        except BaseException:
            for bake in self.bakes[: len(summaries)]:
                bake.unkey()
            self.cancel()
            raise
        return_to_start([(bake, bake.keyed) for bake in self.bakes])
        return CrowdSummary(tuple(summaries))

    def cancel(self) -> None:
        return_to_start([(bake, np.zeros_like(bake.moved)) for bake in self.bakes])

    def show_solved(self) -> None:
        """Every held armature shows its last solved frame; on a failure the bake is cancelled
        (nothing stays held, every armature goes back to its start), as in `solve_next`."""
        try:
            for bake in self.bakes:
                bake.show_solved()
        except BaseException:
            self.cancel()
            raise
