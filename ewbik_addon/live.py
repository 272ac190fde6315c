"""Live solving: re-solve pinned armatures whenever a target or the armature changes, and on frame change.

Blender calls `depsgraph_update_post` after every evaluation (a dragged empty, an
edited setting, a posed bone). The handler looks at what changed, solves only the
live armatures concerned, each within its own time budget and warm-started from
its current pose, and writes the pose back; Blender evaluates that write in a
second pass that runs no handlers, so solving never feeds itself. Errors end up
in the armature's `ewbik.status`, never as an exception out of the handler.

A solve cut short by its time budget leaves the pose short of the targets, and
nothing else would update once the mouse stops. A timer (`refine_unconverged`)
then tags such armatures, so the handler keeps solving, a budget at a time,
until the pins are reached, progress stops, or MAX_REFINEMENTS solves have run.
"""

import contextlib

import bpy
from bpy.app.handlers import persistent

from . import bridge

MAX_REFINEMENTS = 50
REFINE_INTERVAL_S = 0.02

_state = {
    "busy": False,
    "suspended": 0,
    "unconverged": set(),  # session uids of armatures whose last live solve ran out of time
    "tagged": set(),  # session uids the timer tagged: their next solve is a refinement
    "refinements_left": {},  # session uid -> refinement solves left since the user last changed something
}


@contextlib.contextmanager
def suspended():
    """Pause live solving inside the block (baking steps frames and solves by itself)."""
    _state["suspended"] += 1
    try:
        yield
    finally:
        _state["suspended"] -= 1


def is_active():
    """False while suspended or already solving."""
    return not (_state["busy"] or _state["suspended"])


@persistent
def on_depsgraph_update(scene, depsgraph):
    """Solve the live armatures whose targets moved or whose pose or settings changed."""
    if not is_active():
        return
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
def on_frame_change(scene, depsgraph):
    """Solve every live pinned armature: targets or the armature may be animated."""
    if is_active():
        _solve_live(depsgraph.view_layer, None, None)


def _solve_live(view_layer, changed, moved):
    """Solve each live armature of the view layer that the change concerns (all when changed is None)."""
    _state["busy"] = True
    try:
        for obj in view_layer.objects:
            if obj.type == "ARMATURE" and obj.ewbik.live:
                _solve_one(obj, changed, moved)
    finally:
        _state["busy"] = False
        _state["tagged"].clear()  # a tagged armature that was not solved here is no longer pending


def _solve_one(obj, changed, moved):
    """changed/moved: session uids from the depsgraph update; None on frame change (solve if pinned)."""
    uid = obj.session_uid
    refining = uid in _state["tagged"]
    # The refinement timer's own tag is not a change of the rig: its bone settings stay cached.
    rescan = changed is not None and not refining and (uid in changed or obj.data.session_uid in changed)
    try:
        targets = bridge.pinned_targets(obj, rescan=rescan)
        if not targets:
            _set_status(obj, "")
            return
        if changed is not None and not (rescan or refining or _any_moved(targets, moved | changed)):
            return
        result = bridge.solve_armature(obj, rescan=False)
    except bridge.RigError as error:
        _set_status(obj, str(error))
    except Exception as error:  # a handler must never raise: report on the armature instead
        _set_status(obj, f"Live solve failed: {type(error).__name__}: {error}")
    else:
        _set_status(obj, _summary(result))
        _plan_refinement(obj, result)


def _plan_refinement(obj, result):
    """Remember armatures whose solve stopped on its time budget, and make sure the timer runs."""
    uid = obj.session_uid
    left = _state["refinements_left"]
    if uid in _state["tagged"]:
        left[uid] -= 1
    else:
        left[uid] = MAX_REFINEMENTS
    budget = obj.ewbik.time_budget_ms
    stopped_by_budget = budget > 0.0 and result.ms >= budget and not result.converged
    if not stopped_by_budget or left[uid] <= 0:
        _state["unconverged"].discard(uid)
        return
    _state["unconverged"].add(uid)
    if not bpy.app.timers.is_registered(refine_unconverged):
        bpy.app.timers.register(refine_unconverged, first_interval=REFINE_INTERVAL_S)


def has_unconverged():
    """True while some live solve, cut short by its time budget, waits for the refinement timer."""
    return bool(_state["unconverged"])


def refine_unconverged():
    """Timer body: tag the armatures whose live solve ran out of time, so the handler solves again.

    Returns None (stop) when nothing is left; the next budget-limited solve registers it again.
    """
    if _state["suspended"]:
        return REFINE_INTERVAL_S
    pending = _state["unconverged"]
    _state["unconverged"] = set()
    for obj in bpy.data.objects:
        if obj.session_uid in pending:
            _state["tagged"].add(obj.session_uid)
            obj.update_tag()
    return None


def _any_moved(targets, moved):
    """moved: uids of objects that moved or (armatures) were reposed, so bone targets count too."""
    try:
        return any(target.session_uid in moved for target in targets)
    except ReferenceError:
        return True  # a deleted target: let the solve report it


def _summary(result):
    worst = float(result.position_errors.max()) if len(result.position_errors) else 0.0
    state = "reached" if result.converged else "reaching"
    return f"{len(result.position_errors)} pins {state}, largest distance {worst:.2g}"


def _set_status(obj, message):
    if obj.ewbik.status != message:
        obj.ewbik.status = message


@persistent
def on_load(_file_path):
    """A new file has other armatures: forget cached rigs and pending refinements."""
    _forget_everything()


def _forget_everything():
    for pending in ("unconverged", "tagged", "refinements_left"):
        _state[pending].clear()
    bridge.clear_cache()


_HANDLERS = (
    (bpy.app.handlers.depsgraph_update_post, on_depsgraph_update),
    (bpy.app.handlers.frame_change_post, on_frame_change),
    (bpy.app.handlers.load_post, on_load),
)


def register():
    bridge.clear_cache()
    for handlers, handler in _HANDLERS:
        if handler not in handlers:
            handlers.append(handler)


def unregister():
    for handlers, handler in _HANDLERS:
        while handler in handlers:
            handlers.remove(handler)
    if bpy.app.timers.is_registered(refine_unconverged):
        bpy.app.timers.unregister(refine_unconverged)
    _forget_everything()
