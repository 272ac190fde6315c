"""Live solving: re-solve pinned armatures whenever a target or the armature changes, and on frame change.

Blender calls `depsgraph_update_post` after every evaluation (a dragged empty, an
edited setting, a posed bone). The handler looks at what changed, solves only the
live armatures concerned, each from its pose underneath (`pose_underneath`) within
its own time budget, and writes the pose back; Blender evaluates that write in a
second pass that runs no handlers, so solving never feeds itself. Errors end up
in the armature's `ewbik.status`, never as an exception out of the handler.

A live solve that runs out of its time budget shows where it got, and a timer
(`refine_unconverged`) then tags the armature, so the handler solves it once more
without a budget: the pose the user is left with is the one Solve and the bake give
for the same targets, however long the first solve was allowed.

Errors reach the user twice: in the status line (with an error icon), and once per
new error as a report (status bar and Info log) through `report_pending`, a timer,
because a handler cannot report. A target deleted by hand unpins its bone (the
other pins keep working); a bone renamed in Edit Mode waits for Object or Pose
Mode, and the target empties we made take the bone's new name.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import bpy
from bpy.app.handlers import persistent

from ...solver import EwbikError
from ..bridge import pin_reading, rig_cache, targets
from ..com import messages
from ..com.live_pause import is_suspended
from ..com.stored_settings import pinned_bones
from . import armature_solve, crowd_solve

if TYPE_CHECKING:
    from ...solver import SolveResult

REFINE_INTERVAL_S = 0.02

_state = {
    "busy": False,
    "unconverged": set(),  # session uids of armatures whose last live solve ran out of time
    "tagged": set(),  # session uids the timer tagged: their next solve has no time budget
    "reported": {},  # session uid -> the last error reported for it (reported again only once it changes)
    "reports": [],  # (level, message) waiting for report_pending
    "object_count": 0,  # len(bpy.data.objects) at the last update: fewer means something was deleted
}


def is_active() -> bool:
    """False while suspended or already solving."""
    return not (_state["busy"] or is_suspended())


@persistent
def on_depsgraph_update(scene: bpy.types.Scene, depsgraph: bpy.types.Depsgraph) -> None:
    """Solve the live armatures whose targets moved or whose pose or settings changed."""
    if not is_active():
        return
    _forget_deleted_armatures()
    changed, moved = set(), set()
    for update in depsgraph.updates:
        original = update.id.original
        if isinstance(original, bpy.types.Object):
            if original.type == "ARMATURE":
                changed.add(original.session_uid)
            if update.is_updated_transform:
                moved.add(original.session_uid)
        elif isinstance(original, bpy.types.Armature):
            changed.add(original.session_uid)
    if changed or moved:
        _solve_live(depsgraph.view_layer, changed, moved)


@persistent
def on_frame_change(scene: bpy.types.Scene, depsgraph: bpy.types.Depsgraph) -> None:
    """Solve every live pinned armature: targets or the armature may be animated. A render's frame
    change reads the targets as its own depsgraph evaluated them (Blender moves the objects of
    the file only for the viewport's) and solves each armature without the time budget."""
    if is_active():
        rendering = depsgraph if depsgraph.mode == "RENDER" else None
        _solve_live(depsgraph.view_layer, None, None, rendering)


def _solve_live(
    view_layer: bpy.types.ViewLayer,
    changed: set[int] | None,
    moved: set[int] | None,
    rendering: bpy.types.Depsgraph | None = None,
) -> None:
    """Solve each live armature of the view layer that the change concerns (all when changed is None);
    several of them in one solver call (crowd_solve.solve_crowd), or each alone for a render."""
    _state["busy"] = True
    try:
        due = {}
        for obj in view_layer.objects:
            if obj.type == "ARMATURE" and obj.ewbik.live:
                unpinned = _is_due(obj, changed, moved, view_layer)
                if unpinned is not None:
                    due[obj] = unpinned
        only_targets = {obj for obj in due if changed is not None and not _armature_changed(obj, changed)}
        refined = {obj: due.pop(obj) for obj in list(due) if obj.session_uid in _state["tagged"] or rendering}
        for obj, unpinned in refined.items():
            _solve_one(obj, unpinned, only_targets_moved=obj in only_targets, full=True, depsgraph=rendering)
        if len(due) > 1:
            _solve_crowd(due, only_targets)
        elif due:
            obj, unpinned = next(iter(due.items()))
            _solve_one(obj, unpinned, only_targets_moved=obj in only_targets)
    finally:
        _state["busy"] = False
        _state["tagged"].clear()  # a tagged armature that was not solved here is no longer pending


def _is_due(
    obj: bpy.types.Object, changed: set[int] | None, moved: set[int] | None, view_layer: bpy.types.ViewLayer
) -> str | None:
    """Whether obj needs a solve for this update (changed/moved: session uids from the depsgraph
    update; None on frame change: solve if pinned). Rescans its bone settings when it changed,
    unpins deleted targets and follows renamed bones. Returns None when no solve is due, else the
    message about pins it just lost ("" for none); a rig problem is reported on the armature.
    view_layer: the one being updated, where the targets are looked for first."""
    uid = obj.session_uid
    refining = uid in _state["tagged"]
    rescan = changed is not None and _armature_changed(obj, changed)
    if changed is None or rescan:  # its pose or settings may have changed: the next solve reads them
        rig_cache.forget_armature_state(obj)
    try:
        if obj.mode == "EDIT":
            _report_edit_mode(obj)
            return None
        pinned = pin_reading.pinned_targets(obj, rescan=rescan)
        unpinned = targets.unpin_deleted(obj, pinned, view_layer)
        if unpinned:
            pinned = pin_reading.pinned_targets(obj, rescan=True)
        if rescan:
            targets.follow_bone_renames(obj, pinned)
        if not pinned:
            _set_status(obj, unpinned, error=bool(unpinned))
            return None
        if changed is not None and not (
            rescan
            or refining
            or unpinned
            or _any_moved(pinned + pin_reading.pole_objects(obj), moved | changed)
        ):
            return None
        return unpinned
    except EwbikError as error:
        _set_status(obj, str(error), error=True)
    except Exception as error:  # a handler must never raise: report on the armature instead
        _set_status(obj, f"Live solve failed: {type(error).__name__}: {error}", error=True)
    return None


def _armature_changed(obj: bpy.types.Object, changed: set[int]) -> bool:
    """Whether the depsgraph update changed the armature itself (bones, settings, pose), not only
    targets. The refinement timer's own tag is no change: its bone settings and pose channels
    are as the last solve left them."""
    if obj.session_uid in _state["tagged"]:
        return False
    return obj.session_uid in changed or obj.data.session_uid in changed


def _solve_one(
    obj: bpy.types.Object,
    unpinned: str,
    *,
    only_targets_moved: bool = False,
    full: bool = False,
    depsgraph: bpy.types.Depsgraph | None = None,
) -> None:
    """only_targets_moved: nothing but targets changed since the armature's last solve; full: no
    time budget (a refinement, a render); depsgraph: a render's, where the targets are read."""
    try:
        result = armature_solve.solve_armature(
            obj, full=full, rescan=False, only_targets_moved=only_targets_moved, depsgraph=depsgraph
        )
    except EwbikError as error:
        _set_status(obj, str(error), error=True)
    except Exception as error:  # a handler must never raise: report on the armature instead
        _set_status(obj, f"Live solve failed: {type(error).__name__}: {error}", error=True)
    else:
        _report(obj, result, unpinned)


def _solve_crowd(due: dict[bpy.types.Object, str], only_targets: set[bpy.types.Object]) -> None:
    """due: {armature: message about pins it just lost}; only_targets: those of them that nothing
    but their targets changed since their last solve."""
    try:
        outcomes = crowd_solve.solve_crowd(list(due), only_targets)
    except Exception as error:  # a handler must never raise: report on the armatures instead
        outcomes = {obj: error for obj in due}
    for obj, outcome in outcomes.items():
        if isinstance(outcome, EwbikError):
            _set_status(obj, str(outcome), error=True)
        elif isinstance(outcome, Exception):
            _set_status(obj, f"Live solve failed: {type(outcome).__name__}: {outcome}", error=True)
        else:
            _report(obj, outcome, due[obj])


def _report(obj: bpy.types.Object, result: SolveResult, unpinned: str) -> None:
    _set_status(obj, unpinned or pin_reading.pins_summary(obj, result), error=bool(unpinned))
    _plan_refinement(obj, result)


def _report_edit_mode(obj: bpy.types.Object) -> None:
    """A pinned armature in Edit Mode is not solved (bones may be renamed or gone): say so."""
    if pinned_bones(obj):
        armature_solve.solve_armature(obj, rescan=False)  # raises the Edit Mode RigError
    else:
        _set_status(obj, "")


def _plan_refinement(obj: bpy.types.Object, result: SolveResult) -> None:
    """Remember armatures whose solve ran out of its time budget short of the pins, and make sure
    the timer runs: their next solve has no budget and gives the answer."""
    uid = obj.session_uid
    budget = obj.ewbik.time_budget_ms
    cut = budget > 0.0 and result.ms >= budget
    if result.converged or not cut or uid in _state["tagged"]:
        _state["unconverged"].discard(uid)
        return
    _state["unconverged"].add(uid)
    if not bpy.app.timers.is_registered(refine_unconverged):
        bpy.app.timers.register(refine_unconverged, first_interval=REFINE_INTERVAL_S)


def has_unconverged() -> bool:
    """True while some live solve, stopped short of its pins, waits for the refinement timer."""
    return bool(_state["unconverged"])


def refine_unconverged() -> float | None:
    """Timer body: tag the armatures whose live solve stopped short, so the handler solves again.

    Returns None (stop) when nothing is left; the next solve that stops short registers it again.
    """
    if is_suspended():
        return REFINE_INTERVAL_S
    pending = _state["unconverged"]
    _state["unconverged"] = set()
    for obj in bpy.data.objects:
        if obj.session_uid in pending:
            _state["tagged"].add(obj.session_uid)
            obj.update_tag()
    return None


def _any_moved(pinned: Iterable[bpy.types.Object], moved: set[int]) -> bool:
    """moved: uids of objects that moved or (armatures) were reposed, so bone targets count too."""
    try:
        return any(target.session_uid in moved for target in pinned)
    except ReferenceError:
        return True  # a deleted target: let the solve report it


def _set_status(obj: bpy.types.Object, message: str, *, error: bool = False) -> None:
    """Show the outcome on the armature; a new error is also reported once (see report_pending)."""
    if obj.ewbik.status != message:
        obj.ewbik.status = message
    if obj.ewbik.status_is_error != error:
        obj.ewbik.status_is_error = error
    reported = _state["reported"]
    if not error:
        reported.pop(obj.session_uid, None)
    elif reported.get(obj.session_uid) != message:
        reported[obj.session_uid] = message
        _state["reports"].append(f"{obj.name}: {message}")
        if not bpy.app.timers.is_registered(report_pending):
            bpy.app.timers.register(report_pending, first_interval=0.0)


def report_pending() -> None:
    """Timer body: report the live errors queued since the last call (status bar and Info log)."""
    pending, _state["reports"] = _state["reports"], []
    for message in pending:
        messages.report_problem(message)
    return None


def _forget_deleted_armatures() -> None:
    """Drop the cached rigs and refinement bookkeeping of armatures deleted since the last update."""
    count = len(bpy.data.objects)
    shrunk = count < _state["object_count"]
    _state["object_count"] = count
    if not shrunk:
        return
    alive = rig_cache.forget_deleted_rigs()
    for uid in set(_state["reported"]) - alive:
        del _state["reported"][uid]
    _state["unconverged"] &= alive


@persistent
def on_load(_file_path: str) -> None:
    """A new file has other armatures: forget cached rigs and pending refinements."""
    _forget_everything()


def _forget_everything() -> None:
    for pending in ("unconverged", "tagged", "reported", "reports"):
        _state[pending].clear()
    rig_cache.clear_cache()


@persistent
def on_undo(*_args: object) -> None:
    """Undo and redo put back the channels and the record of the pose underneath beside them: the
    rigs' copies of that record are stale."""
    rig_cache.forget_recorded_poses()


_HANDLERS = (
    (bpy.app.handlers.depsgraph_update_post, on_depsgraph_update),
    (bpy.app.handlers.frame_change_post, on_frame_change),
    (bpy.app.handlers.load_post, on_load),
    (bpy.app.handlers.undo_post, on_undo),
    (bpy.app.handlers.redo_post, on_undo),
)


def register() -> None:
    rig_cache.clear_cache()
    for handlers, handler in _HANDLERS:
        if handler not in handlers:
            handlers.append(handler)


def unregister() -> None:
    for handlers, handler in _HANDLERS:
        while handler in handlers:
            handlers.remove(handler)
    for timer in (refine_unconverged, report_pending):
        if bpy.app.timers.is_registered(timer):
            bpy.app.timers.unregister(timer)
    _forget_everything()
