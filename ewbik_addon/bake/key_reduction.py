"""Fewer keys within a tolerance: which of a per-frame bake's keys each bone can do without.

A key may go when what the keys that remain play keeps every bone's rotation within an angle of
the per-frame bake and every pinned bone's head within a distance of it, on every baked frame.
What they play is asked of a `Player`: the bake asks Blender's own F-curves, so the interpolation,
handles and auto smoothing the keys get are what is measured. Rotations are compared as the angle
between quaternions (either sign), whatever the bone's rotation mode; the pinned heads by forward
kinematics of the pinned chains with the solver's `Skeleton`. The kept keys are a subset of the
bake's sign-continuous quaternions, so no flip comes in between them.

Greedy and honest: each bone starts with its first and last frame; while some bone turns too far
from the bake, its worst frame is added, and while some pinned head strays too far, its worst
frame is added to the bone of its chain that moves the head the most there. Keys are only ever
added, so it ends (at worst with every frame kept, which reproduces the bake exactly). No Blender here: the bake hands over
its channels and a player, and the tests run this without it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ...solver import quat
from ..com.rotation_channels import channels_to_quaternions, rotation_channel

if TYPE_CHECKING:
    from ...solver import Skeleton

# (bone row, property, indices of the kept frames, the channel's (F, size) baked values) -> the
# (F, size) values an F-curve holding only the kept keys plays on every baked frame.
Player = Callable[[int, str, np.ndarray, np.ndarray], np.ndarray]


def rotation_angles(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angles (radians) between rotations given as quaternions (..., 4), either sign, any length."""
    return quat.angle(quat.multiply(quat.normalize(b), quat.conjugate(quat.normalize(a))))


@dataclasses.dataclass
class BakedBone:
    """One keyed bone's per-frame bake: its channels (property -> (F, size), continuous), its
    rotation mode, and its place in the pinned chains' skeleton."""

    channels: dict[str, np.ndarray]
    rotation_mode: str
    in_skeleton: int


@dataclasses.dataclass
class PinnedPoses:
    """The pinned chains on every baked frame, as forward kinematics needs them: local rotations
    (F, N, 4), locations (F, N, 3) and Y scales (F, N) or None, in `skeleton` order."""

    skeleton: Skeleton
    pinned: np.ndarray  # skeleton indices of the pinned bones
    rotations: np.ndarray
    locations: np.ndarray
    scales: np.ndarray | None

    def heads(self, rotations: np.ndarray, locations: np.ndarray, scales: np.ndarray | None) -> np.ndarray:
        """Every chain bone's armature-space head (F, N, 3) of a pose on every frame."""
        return np.stack(
            [
                self.skeleton.frames(
                    rotations[f], locations[f], scales=None if scales is None else scales[f]
                )[1]
                for f in range(len(rotations))
            ]
        )

    def chain_of(self, pin: int) -> set[int]:
        """Skeleton indices of a pinned bone and every bone above it."""
        return set(self.skeleton.ancestors(int(self.pinned[pin])))


def bone_quaternions(rotation_mode: str, channels: dict[str, np.ndarray]) -> np.ndarray:
    """Quaternions (F, 4) of one bone's rotation channel in its own mode, not normalized."""
    values = channels[rotation_channel(rotation_mode)][:, None, :]
    quaternion = values if rotation_mode == "QUATERNION" else np.zeros((len(values), 1, 4))
    return channels_to_quaternions([rotation_mode], quaternion, values, values)[:, 0]


def reduce_keys(
    frames: np.ndarray,
    bones: dict[int, BakedBone],
    poses: PinnedPoses,
    max_angle: float,
    max_distance: float,
    play: Player,
) -> dict[int, np.ndarray]:
    """Indices into `frames` (F,) of the keys each bone of `bones` keeps: with only those played
    (`play`), every bone turns at most `max_angle` (radians) and every pinned head moves at most
    `max_distance` (armature units) from the per-frame bake on each frame."""
    kept = {row: np.unique([0, len(frames) - 1]) for row in bones}
    played = {row: _played(row, bone, kept[row], play) for row, bone in bones.items()}
    baked = poses.heads(poses.rotations, poses.locations, poses.scales)
    chains = [poses.chain_of(pin) for pin in range(len(poses.pinned))]
    while True:
        turns = {
            row: rotation_angles(bone_quaternions(bone.rotation_mode, bone.channels), played[row][0])
            for row, bone in bones.items()
        }
        added = {row: {int(np.argmax(turn))} for row, turn in turns.items() if turn.max() > max_angle}
        misses = np.linalg.norm(
            _played_heads(poses, bones, played)[:, poses.pinned] - baked[:, poses.pinned], axis=-1
        )
        for pin, chain in enumerate(chains):
            if misses[:, pin].max() > max_distance:
                frame = int(misses[:, pin].argmax())
                row = _likeliest_cause(bones, played, turns, baked, frame, poses.pinned[pin], chain, kept)
                if row is not None:
                    added.setdefault(row, set()).add(frame)
        grown = [row for row, new in added.items() if not new <= set(kept[row].tolist())]
        if not grown:
            return kept
        for row in grown:
            kept[row] = np.union1d(kept[row], sorted(added[row]))
            played[row] = _played(row, bones[row], kept[row], play)


def _likeliest_cause(
    bones: dict[int, BakedBone],
    played: dict[int, tuple[np.ndarray, dict[str, np.ndarray]]],
    turns: dict[int, np.ndarray],
    baked: np.ndarray,
    frame: int,
    pinned: int,
    chain: set[int],
    kept: dict[int, np.ndarray],
) -> int | None:
    """The keyed bone of a pinned chain, not yet keyed on `frame`, that moves the pinned head the
    most there: its turn times its distance to the head, plus how far its location strays."""
    causes = {}
    for row, bone in bones.items():
        if bone.in_skeleton not in chain or frame in kept[row]:
            continue
        lever = np.linalg.norm(baked[frame, pinned] - baked[frame, bone.in_skeleton])
        shift = 0.0
        if "location" in bone.channels:
            shift = np.linalg.norm(played[row][1]["location"][frame] - bone.channels["location"][frame])
        causes[row] = turns[row][frame] * lever + shift
    return max(causes, key=causes.__getitem__) if causes else None


def _played(
    row: int, bone: BakedBone, kept: np.ndarray, play: Player
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(quaternions (F, 4), channels) a bone plays on every frame from the keys `kept`."""
    channels = {name: play(row, name, kept, values) for name, values in bone.channels.items()}
    return bone_quaternions(bone.rotation_mode, channels), channels


def _played_heads(
    poses: PinnedPoses,
    bones: dict[int, BakedBone],
    played: dict[int, tuple[np.ndarray, dict[str, np.ndarray]]],
) -> np.ndarray:
    """Every chain bone's head (F, N, 3) with every keyed bone playing its kept keys."""
    rotations, locations = poses.rotations.copy(), poses.locations.copy()
    scales = None if poses.scales is None else poses.scales.copy()
    for row, bone in bones.items():
        quaternions, channels = played[row]
        rotations[:, bone.in_skeleton] = quaternions / np.linalg.norm(quaternions, axis=-1, keepdims=True)
        if "location" in channels:
            locations[:, bone.in_skeleton] = channels["location"]
        if scales is not None and "scale" in channels:
            scales[:, bone.in_skeleton] = channels["scale"][:, 1]
    return poses.heads(rotations, locations, scales)
