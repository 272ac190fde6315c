"""The analytic finish of two-bone limbs: each limb ending in a pin no other pin shares placed
exactly (`two_bone.two_bone_ik`), kept only where its pin gets closer.

It serves solves the polish cannot run (pin falloff below 1), straight limbs limited to a hinge
where the polish stalls (a straight knee is singular; the finish bends it to the side its limits
allow), and as a guarded last step of a solve that ends unconverged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import quat
from .loop_constants import BEND_TILT, STRAIGHT_REACH, STRAIGHT_SINE
from .plan import Limbs
from .qcp import rotations_from_covariance
from .two_bone import two_bone_ik

if TYPE_CHECKING:  # loop.py imports this module
    from .kusudama import JointLimits
    from .loop import State


def finish_limbs(
    state: State,
    limbs: Limbs,
    frozen: np.ndarray,
    limits: JointLimits | None,
    initial: np.ndarray,
    allowance: np.ndarray,
    bend: np.ndarray | None = None,
) -> None:
    """Place each single-pin two-bone limb exactly with analytic IK, then turn its end bone.

    The joint stays on the side the iterations bent it to, or bends toward `bend` (L, 3). A limb is put back
    as it was if its pin ends up farther from its target (joint limits can
    prevent the exact pose) or if a bone would end farther from where the solve
    started than the dampening allows for the iterations run, so the finish
    never makes a pose jump that the iterations themselves could not.
    """
    skel = state.skeleton
    upper, lower, end, pin = limbs.upper, limbs.lower, limbs.end, limbs.pin
    head_u, head_l, head_e = state.world_head[upper], state.world_head[lower], state.world_head[end]
    joint, tip = two_bone_ik(
        head_u,
        state.target_pos[pin],
        np.linalg.norm(head_l - head_u, axis=-1),
        np.linalg.norm(head_e - head_l, axis=-1),
        head_l - head_u if bend is None else bend,
    )
    turn_u = quat.shortest_arc(head_l - head_u, joint - head_u)
    turn_l = quat.multiply(quat.shortest_arc(quat.rotate(turn_u, head_e - head_l), tip - joint), turn_u)
    world_u = quat.to_matrix(turn_u) @ state.world[upper]
    world_l = quat.to_matrix(turn_l) @ state.world[lower]
    world_e = quat.to_matrix(turn_l) @ state.world[end]
    axes = np.swapaxes(world_e, -1, -2)
    axis_cov = np.einsum("la,lai,laj->lij", state.axis_weight[pin], axes, state.target_axes[pin])
    turn_e = quat.to_matrix(rotations_from_covariance(axis_cov))
    turn_e[frozen[end]] = np.eye(3)
    world_e = turn_e @ world_e

    bones = np.concatenate((upper, lower, end))
    old = state.rotations[bones].copy()
    frames = np.concatenate(
        (
            skel.parent_frames(upper, state.world),
            world_u @ skel.local_rest_matrix[lower],
            world_l @ skel.local_rest_matrix[end],
        )
    )
    new = quat.from_matrix(np.swapaxes(frames, -1, -2) @ np.concatenate((world_u, world_l, world_e)))
    if limits is not None:
        new = limits.constrain(bones, new, 0)
    new = quat.normalize(new)
    travel = quat.angle(quat.multiply(quat.conjugate(initial[bones]), new))
    too_far = (travel > allowance[bones] + 1e-12).reshape(3, -1).any(0)
    before = state.pin_costs()[pin]
    state.rotations[bones] = new
    state.forward()
    worse = np.tile((state.pin_costs()[pin] > before) | too_far, 3)
    if np.any(worse):
        state.rotations[bones[worse]] = old[worse]
        state.forward()


def hinged_limbs(limbs: Limbs, limits: JointLimits | None) -> Limbs | None:
    """The limbs whose joint is limited, or None: where a stalled polish tries the analytic finish.

    A straight limb is singular: no turn moves its end toward its root to first order. A free
    joint leaves by turning sideways, but one limited to a narrow hinge corridor cannot, so
    sweeps and polish keep it straight and pull the rest of the body toward an end they cannot
    lift. When a polish step keeps more than POLISH_SLOW of the misfit while such a limb is
    straight and its pin misses, the analytic placement bends the joint directly, to the side
    its limits allow; each limb is kept only if its pin gets closer, and the polish goes on
    from there. A bent limb is left to the polish (placing it would turn its bend plane).
    """
    if limits is None:
        return None
    hinged = limits.limited[limbs.lower]
    if not hinged.any():
        return None
    return Limbs(limbs.upper[hinged], limbs.lower[hinged], limbs.end[hinged], limbs.pin[hinged])


def stuck_limbs(state: State, hinges: Limbs, tolerance: float) -> Limbs | None:
    """The hinged limbs that are straight while their target is closer to their root than a
    straight bend reaches (so they must bend more), and that miss their pin; or None."""
    head_u, head_l, head_e = (state.world_head[b] for b in (hinges.upper, hinges.lower, hinges.end))
    upper, lower = head_l - head_u, head_e - head_l
    upper_sq, lower_sq = np.sum(upper * upper, axis=-1), np.sum(lower * lower, axis=-1)
    normal = np.cross(upper, lower)
    straight = np.sum(normal * normal, axis=-1) < STRAIGHT_SINE**2 * upper_sq * lower_sq
    lengths = np.sqrt(upper_sq) + np.sqrt(lower_sq)
    near = np.linalg.norm(state.target_pos[hinges.pin] - head_u, axis=-1) < lengths * STRAIGHT_REACH
    stuck = straight & near & ~state.reached(tolerance)[hinges.pin]
    if not stuck.any():
        return None
    return Limbs(hinges.upper[stuck], hinges.lower[stuck], hinges.end[stuck], hinges.pin[stuck])


def allowed_bends(state: State, limbs: Limbs, limits: JointLimits) -> np.ndarray:
    """Per limb, the side its joint may bend to: opposite to where the centre of the lower
    bone's allowed swings tilts it from the upper bone (a knee bends forward when the shin may
    only swing back). Limbs whose lower bone has no such tilt keep their current side."""
    head_u, head_l = state.world_head[limbs.upper], state.world_head[limbs.lower]
    upper = (head_l - head_u) / np.linalg.norm(head_l - head_u, axis=-1, keepdims=True)
    centres = np.array([limits.kusudamas[b].centre for b in limbs.lower])
    allowed = (state.skeleton.parent_frames(limbs.lower, state.world) @ centres[..., None])[..., 0]
    tilt = allowed - np.sum(allowed * upper, axis=-1, keepdims=True) * upper
    tilted = np.linalg.norm(tilt, axis=-1, keepdims=True) > BEND_TILT
    return np.where(tilted, -tilt, upper)
