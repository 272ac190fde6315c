"""A mocap clip's sampled frames as solver problems: the hands, feet and head pinned where the
capture puts them, the hips given, solved frame after frame (the benches' and the tests' test).

The rig is scaled to RIG_HEIGHT (1.75 m, tests/support/mocap.py), so metres * 1000 are
millimetres on a human-sized body.
"""

import dataclasses
import os
import time

import numpy as np

from solver import Pin, Skeleton, SolverSettings, quat, solve
from tests.support import mocap

EFFECTORS = ("lhand", "rhand", "LeftAnkle", "RightAnkle", "Head")
HIPS = "Hips"
RIG_HEIGHT = 1.75


@dataclasses.dataclass
class Clip:
    """One clip's sampled test frames: targets, hips pose and the solver skeleton."""

    name: str
    path: str
    bones: list
    skeleton: Skeleton
    frames: np.ndarray
    targets: np.ndarray
    hips_rotation: np.ndarray
    hips_location: np.ndarray
    clip_rotations: np.ndarray
    scale: float


def load_clip(path, step, loaded=None):
    """Read a clip (or take the already `loaded` mocap.Mocap of it) and take every `step`-th frame's
    effector matrices with the solver's own FK (identical to `mocap.forward_kinematics`),
    so targets and solves share one convention."""
    clip = loaded if loaded is not None else mocap.load_bvh(path, height=RIG_HEIGHT)
    names = [b["name"] for b in clip.bones]
    skeleton = Skeleton(
        names,
        [b["parent"] for b in clip.bones],
        [np.array(b["rest"]) for b in clip.bones],
        [b["length"] for b in clip.bones],
    )
    order = [names.index(n) for n in skeleton.names]
    frames = np.arange(0, len(clip.rotations), step)
    rotations = clip.rotations[:, order]
    locations = clip.locations[:, order]
    pinned = [skeleton.index[e] for e in EFFECTORS]
    targets = np.tile(np.eye(4), (len(frames), len(pinned), 1, 1))
    for row, f in enumerate(frames):
        world_rotation, world_head = skeleton.forward(rotations[f], locations[f])
        targets[row, :, :3, :3] = quat.to_matrix(world_rotation[pinned])
        targets[row, :, :3, 3] = world_head[pinned]
    root = skeleton.index[HIPS]
    return Clip(
        name=os.path.splitext(os.path.basename(path))[0],
        path=path,
        bones=clip.bones,
        skeleton=skeleton,
        frames=frames,
        targets=targets,
        hips_rotation=rotations[frames, root],
        hips_location=locations[frames, root],
        clip_rotations=rotations[frames],
        scale=clip.scale,
    )


def hips_given_start(clip, row, previous=None):
    """Start pose for sampled frame `row`: `previous` (or rest) with the clip's hips."""
    n = len(clip.skeleton)
    rotations = np.tile(quat.IDENTITY, (n, 1)) if previous is None else previous.copy()
    locations = np.zeros((n, 3))
    root = clip.skeleton.index[HIPS]
    rotations[root] = clip.hips_rotation[row]
    locations[root] = clip.hips_location[row]
    return rotations, locations


def frame_pins(clip, row, orientation_weight=1.0):
    axes = (orientation_weight,) * 3
    return [Pin(bone, clip.targets[row, k], orientation_weights=axes) for k, bone in enumerate(EFFECTORS)]


@dataclasses.dataclass
class FrameSolve:
    """One counted row of a solved sequence: where it started and how it ended."""

    row: int
    rotations: np.ndarray  # the start pose
    locations: np.ndarray
    settings: SolverSettings
    result: object  # SolveResult
    cpu_ms: float
    pins_cpu_ms: float


def solve_sequence(
    clip,
    settings,
    warm,
    rest_settings=None,
    limits=None,
    stiffness=None,
    rows=None,
    start=None,
    orientation_weight=1.0,
):
    """Solve the sampled rows in order, yielding a FrameSolve for each counted one.

    Warm runs start every row from the previous row's solution; their first row has none, is
    solved from `start` (local rotations; None = rest) with `rest_settings` and not counted.
    Other runs solve every row from `start`. `stiffness` (None: only the given hips frozen).
    """
    rows = np.arange(len(clip.frames)) if rows is None else np.asarray(rows)
    if stiffness is None:
        stiffness = np.zeros(len(clip.skeleton))
        stiffness[clip.skeleton.index[HIPS]] = 1.0
    previous = None
    for row in rows:
        start_cpu = time.process_time()
        pins = frame_pins(clip, row, orientation_weight)
        pins_cpu_ms = (time.process_time() - start_cpu) * 1e3
        seeding = warm and previous is None
        rotations, locations = hips_given_start(clip, row, start if previous is None else previous)
        used = rest_settings if seeding else settings
        start_cpu = time.process_time()
        result = solve(clip.skeleton, pins, rotations, locations, used, limits=limits, stiffness=stiffness)
        cpu_ms = (time.process_time() - start_cpu) * 1e3
        if not np.all(np.isfinite(result.rotations)):
            raise RuntimeError(f"non-finite rotations solving {clip.name} frame {clip.frames[row]}")
        if warm:
            previous = result.rotations
        if not seeding:
            yield FrameSolve(int(row), rotations, locations, used, result, cpu_ms, pins_cpu_ms)
