"""Solve one armature to convergence now (no live time budget) and say how it went.

The status the sidebar shows and the operator reports are the same words: the solve's state,
its iterations and time, each pin's miss in the scene's units, and the pins that constraints or
drivers pose away from the solve.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

from ...solver import EwbikError
from ..bridge import pin_reading, targets
from ..com.live_pause import suspended
from ..com.messages import count, degrees, distance
from ..rigs import production_checks
from . import armature_solve

if TYPE_CHECKING:
    import bpy

    from ...solver import SolveResult


@dataclasses.dataclass(frozen=True)
class SolvedNow:
    """What Solve did: the summary shown, and the pins posed elsewhere (a warning when any)."""

    summary: str
    elsewhere: dict[str, float]  # pinned bone: its evaluated distance from the target (scene units)


def solve_now(context: bpy.types.Context, obj: bpy.types.Object) -> SolvedNow:
    """Solve `obj` fully, let Blender evaluate the written pose, and store the summary as the
    armature's status. Raises an EwbikError (stored as the status too) for anything the user must fix."""
    try:
        unpinned = targets.unpin_deleted(obj, pin_reading.pinned_targets(obj))
        result = armature_solve.solve_armature(obj, full=True)
    except EwbikError as error:
        obj.ewbik.status = str(error)
        obj.ewbik.status_is_error = True
        raise
    with suspended():  # the live handler would solve this write again, within its time budget
        context.view_layer.update()
    elsewhere = pin_reading.pins_elsewhere(obj, result)
    summary = _summary(context.scene, obj, result, elsewhere)
    if unpinned:
        summary = f"{unpinned}; {summary}"
    obj.ewbik.status = summary
    obj.ewbik.status_is_error = False
    return SolvedNow(summary, elsewhere)


def _summary(
    scene: bpy.types.Scene, obj: bpy.types.Object, result: SolveResult, elsewhere: dict[str, float]
) -> str:
    state = "converged" if result.converged and not elsewhere else "stopped"
    details = ", ".join(
        f"{bone} {distance(scene, position)} ({degrees(math.radians(orientation))})"
        for bone, (position, orientation) in production_checks.evaluated_pin_errors(obj).items()
    )
    summary = (
        f"{state} after {count(result.iterations, 'iteration')}, {result.ms:.1f} ms: "
        f"{pin_reading.pins_summary(obj, result)} ({details})"
    )
    if elsewhere:
        summary += "; constraints or drivers pose " + ", ".join(elsewhere) + " away from the solve"
    return summary
