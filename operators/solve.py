"""`ewbik.solve`: solve the active armature properly now, to convergence within its own limits;
`ewbik.report_problem`: show a live-solving problem in the status bar.

The live Iterations and Time Budget keep dragging fluid; Solve is what the user presses when the
pose must be right, so it repeats full solves (each the live iteration count, warm-started from
the last) until the pins are reached, solves stop gaining (`live.Progress`, the rule that also
ends live refinement), or the cap of MAX_ITERATIONS iterations or TIME_LIMIT_S seconds is hit.

The live handler cannot report (it is not an operator); its timer calls `ewbik.report_problem`
once per new error, so a user with the sidebar closed still learns why the body stopped
following. Blender shows the reports of an operator run from Python in the interface only when
the operator goes modal, so its `invoke` reports, waits for the next event and finishes; its
`execute` (no window: background runs) reports to the terminal. `messages.report_problem` picks.
"""

import math
import time

import bpy
from bpy.props import StringProperty

from ..ewbik_addon import armature_checks, armature_solve, live, pin_reading, production_checks, targets
from ..ewbik_addon.active import active_armature
from ..ewbik_addon.messages import count, degrees, distance

MAX_ITERATIONS = 5000
TIME_LIMIT_S = 2.0


def solve_to_convergence(obj):
    """(last SolveResult, iterations in all, milliseconds in all); raises armature_checks.RigError."""
    started = time.perf_counter()
    result = armature_solve.solve_armature(obj, full=True)
    progress = live.Progress(result)
    iterations = result.iterations
    while not result.converged and result.iterations and iterations < MAX_ITERATIONS:
        if time.perf_counter() - started >= TIME_LIMIT_S:
            break
        result = armature_solve.solve_armature(obj, full=True, rescan=False)
        iterations += result.iterations
        if not progress.gaining(result):
            break
    return result, iterations, (time.perf_counter() - started) * 1e3


class EWBIK_OT_solve(bpy.types.Operator):
    """Solve the active armature (or the one whose target is selected) now, to convergence (ignores the live Iterations and Time Budget)"""

    bl_idname = "ewbik.solve"
    bl_label = "Solve"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        obj = active_armature(context)
        if obj is None:
            cls.poll_message_set("Select an armature or one of its pin targets")
            return False
        if obj.mode == "EDIT":
            cls.poll_message_set("Leave Edit Mode to solve")
            return False
        return True

    def execute(self, context):
        obj = active_armature(context)
        try:
            unpinned = targets.unpin_deleted(obj, pin_reading.pinned_targets(obj))
            result, iterations, ms = solve_to_convergence(obj)
        except armature_checks.RigError as error:
            obj.ewbik.status = str(error)
            obj.ewbik.status_is_error = True
            self.report({"ERROR"}, str(error))
            return {"CANCELLED"}
        context.view_layer.update()
        elsewhere = pin_reading.pins_elsewhere(obj, result)
        details = ", ".join(
            f"{bone} {distance(context.scene, position)} ({degrees(math.radians(orientation))})"
            for bone, (position, orientation) in production_checks.evaluated_pin_errors(obj).items()
        )
        state = "converged" if result.converged and not elsewhere else "stopped"
        summary = f"{state} after {count(iterations, 'iteration')}, {ms:.1f} ms: {details}"
        if elsewhere:
            summary += "; constraints or drivers pose " + ", ".join(elsewhere) + " away from the solve"
        if unpinned:
            summary = f"{unpinned}; {summary}"
        obj.ewbik.status = summary
        obj.ewbik.status_is_error = False
        self.report({"WARNING"} if elsewhere else {"INFO"}, summary)
        return {"FINISHED"}


class EWBIK_OT_report_problem(bpy.types.Operator):
    """Show a live-solving problem in the status bar"""

    bl_idname = "ewbik.report_problem"
    bl_label = "Report EWBIK Problem"
    bl_options = {"INTERNAL"}

    message: StringProperty(name="Message", options={"SKIP_SAVE"})

    def execute(self, context):
        self.report({"ERROR"}, self.message)
        return {"FINISHED"}

    def invoke(self, context, event):
        self.report({"ERROR"}, self.message)
        context.window_manager.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def modal(self, context, event):
        return {"FINISHED", "PASS_THROUGH"}


CLASSES = (EWBIK_OT_solve, EWBIK_OT_report_problem)
