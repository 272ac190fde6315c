"""Targets of the metarig's hands, feet and head keyed on a walk-like loop, for the benches and farm
shots that bake a pinned metarig (no bpy import: the targets' own vector type does the sums)."""

import math

KEY_EVERY = 5  # target keys every this many frames, Bezier in between

# Target paths, metres in world space: (toward the middle, forward and back, up). Targets start where
# the pins were made and only move where the limb can follow, so errors measure solving, not reach.
MOTION = {
    "hand.L": (0.15, 0.12, 0.15),
    "hand.R": (0.15, 0.12, 0.15),
    "foot.L": (0.0, 0.08, 0.10),
    "foot.R": (0.0, 0.08, 0.10),
    "spine.006": (0.0, 0.03, 0.0),
}


def animate_targets(targets, frames):
    """Loops from each target's start ({pinned bone: target}), keyed every few frames: two cycles
    over frames 1..frames.

    Left and right swing forward and back in opposition, as in a walk.
    """
    for name, target in targets.items():
        start = target.location.copy()
        inward, forward, up = MOTION[name]
        side = math.copysign(1.0, start.x)
        for frame in range(1, frames + KEY_EVERY, KEY_EVERY):
            t = 4.0 * math.pi * (frame - 1) / frames
            offset = (
                -side * inward * 0.5 * (1.0 - math.cos(t)),
                side * forward * math.sin(t),
                up * 0.5 * (1.0 - math.cos(2.0 * t)),
            )
            target.location = start + type(start)(offset)
            target.keyframe_insert("location", frame=frame)
