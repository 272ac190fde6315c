"""How natural a solved body looks beside the captured one (the naturalness bench's measures).

Against the captured pose of a mocap clip's sampled frames: the "free joints" (every bone between
the hips and a pin that neither is pinned nor hangs directly off the given hips), how far they
are from where they were captured, the elbows and knees that bend the wrong way, and the jitter
the solver adds (second differences over consecutive frames).
"""

import dataclasses

import numpy as np

from solver.presets import bone_roles
from tests.support.mocap_frames import EFFECTORS, HIPS, hips_given_start

BEND_MIN_DEG = 10.0
LIMBS = (("upper_arm", "forearm"), ("thigh", "shin"))


@dataclasses.dataclass
class Body:
    """Which heads the measures read: `joints` (names, in this order in every heads array), the
    free ones among them, and per elbow/knee the joints above, at and below the bend."""

    joints: list
    free: np.ndarray
    bends: np.ndarray


@dataclasses.dataclass
class Solved:
    """One way of solving one clip: per counted frame the body's heads (metres), the captured
    heads of the same frames, pin errors and time."""

    heads: np.ndarray
    truth: np.ndarray
    position_mm: np.ndarray
    orientation_deg: np.ndarray
    cpu_ms: np.ndarray
    pelvis_mm: np.ndarray | None = None  # per frame, where the hips are solved (None: given)


def body_of(skeleton):
    """The Body of a skeleton with the pins and hips of `mocap_frames`."""
    hips = skeleton.index[HIPS]
    pinned = [skeleton.index[e] for e in EFFECTORS]
    chain = sorted({a for p in pinned for a in skeleton.ancestors(p)} - set(skeleton.ancestors(hips)))
    names = [skeleton.names[i] for i in chain]
    free = [k for k, i in enumerate(chain) if i not in pinned and skeleton.parents[i] != hips]
    by_role = {role: name for name, role in bone_roles(names).items()}
    bends = []
    for side in "LR":
        for upper, lower in LIMBS:
            u, m = names.index(by_role[f"{upper}.{side}"]), names.index(by_role[f"{lower}.{side}"])
            below = next(k for k, i in enumerate(chain) if skeleton.parents[i] == chain[m])
            bends.append((u, m, below))
    return Body(names, np.array(free), np.array(bends))


def heads_of(clip, body, rotations, locations):
    """(joints, 3) heads of the body's joints in a pose of the clip's skeleton."""
    return clip.skeleton.forward(rotations, locations)[1][[clip.skeleton.index[j] for j in body.joints]]


def captured_heads(clip, body):
    """(frames, joints, 3) heads of the captured pose at the clip's sampled frames."""
    out = []
    for row in range(len(clip.frames)):
        rotations, locations = hips_given_start(clip, row, clip.clip_rotations[row])
        out.append(heads_of(clip, body, rotations, locations))
    return np.array(out)


@dataclasses.dataclass
class Measures:
    """The naturalness and accuracy numbers of one run over one or more clips."""

    free_mm: float
    flip_share: float
    flip_frames: int
    limb_flip_shares: np.ndarray
    jitter_mm: float
    pins_p95_mm: float
    pins_p95_deg: float
    cpu_ms: float
    frames: int
    pelvis_mm: float = float("nan")  # mean distance of the solved hips from the captured (nan: given)


def bend_planes(heads, bends):
    """Per frame and limb: the bend-plane normal (cross of upper and lower direction) and the bend in degrees."""
    upper = heads[:, bends[:, 1]] - heads[:, bends[:, 0]]
    lower = heads[:, bends[:, 2]] - heads[:, bends[:, 1]]
    normal = np.cross(upper, lower)
    bend = np.degrees(np.arctan2(np.linalg.norm(normal, axis=-1), np.sum(upper * lower, axis=-1)))
    return normal, bend


def flipped_limbs(heads, truth, bends):
    """(flipped, countable) per frame and limb: countable = bent at least BEND_MIN_DEG in both
    poses, flipped = countable with the bend-plane normals more than 90 deg apart."""
    solved_normal, solved_bend = bend_planes(heads, bends)
    true_normal, true_bend = bend_planes(truth, bends)
    countable = (solved_bend >= BEND_MIN_DEG) & (true_bend >= BEND_MIN_DEG)
    return countable & (np.sum(solved_normal * true_normal, axis=-1) < 0.0), countable


def wrong_way_frames(heads, truth, bends):
    """(frames where a countable elbow or knee bends the other way than captured, frames with a countable one)."""
    flipped, countable = flipped_limbs(heads, truth, bends)
    return int(flipped.any(axis=1).sum()), int(countable.any(axis=1).sum())


def second_differences(heads):
    return np.linalg.norm(heads[2:] - 2.0 * heads[1:-1] + heads[:-2], axis=-1).ravel()


def measure(solved, body):
    """Measures over a list of Solved (one per clip); jitter never spans two clips."""
    heads = np.concatenate([s.heads for s in solved])
    truth = np.concatenate([s.truth for s in solved])
    flipped, counted = wrong_way_frames(heads, truth, body.bends)
    by_limb, countable = flipped_limbs(heads, truth, body.bends)
    jitter = np.mean(np.concatenate([second_differences(s.heads[:, body.free]) for s in solved])) - np.mean(
        np.concatenate([second_differences(s.truth[:, body.free]) for s in solved])
    )
    return Measures(
        free_mm=1e3 * float(np.linalg.norm(heads[:, body.free] - truth[:, body.free], axis=-1).mean()),
        flip_share=flipped / max(counted, 1),
        flip_frames=counted,
        limb_flip_shares=by_limb.sum(axis=0) / np.maximum(countable.sum(axis=0), 1),
        jitter_mm=1e3 * float(jitter),
        pins_p95_mm=float(np.percentile(np.concatenate([s.position_mm for s in solved]), 95)),
        pins_p95_deg=float(np.percentile(np.concatenate([s.orientation_deg for s in solved]), 95)),
        cpu_ms=float(np.median(np.concatenate([s.cpu_ms for s in solved]))),
        frames=len(heads),
        pelvis_mm=(
            float(np.mean(np.concatenate([s.pelvis_mm for s in solved])))
            if all(s.pelvis_mm is not None for s in solved)
            else float("nan")
        ),
    )
