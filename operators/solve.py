"""`ewbik.solve`: solve the active armature now, without the live time budget;
`ewbik.report_problem`: show a live-solving problem in the status bar.

Every solve starts from the pose underneath (`pose_underneath`), so Solve gives the pose live
solving gives for the same targets once it has the time: what the user presses when the pose
must be right, or when live solving is off.

The live handler cannot report (it is not an operator); its timer calls `ewbik.report_problem`
once per new error, so a user with the sidebar closed still learns why the body stopped
following. Blender shows the reports of an operator run from Python in the interface only when
the operator goes modal, so its `invoke` reports, waits for the next event and finishes; its
`execute` (no window: background runs) reports to the terminal. `messages.report_problem` picks.
"""

import math

import bpy
from bpy.props import StringProperty

from ..ewbik_addon import armature_checks, armature_solve, live, pin_reading, production_checks, targets
from ..ewbik_addon.active import active_armature
from ..ewbik_addon.messages import count, degrees, distance


class EWBIK_OT_solve(bpy.types.Operator):
    """Solve the active armature (or the one whose target is selected) now, without the live Time Budget"""

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
            result = armature_solve.solve_armature(obj, full=True)
        except armature_checks.RigError as error:
            obj.ewbik.status = str(error)
            obj.ewbik.status_is_error = True
            self.report({"ERROR"}, str(error))
            return {"CANCELLED"}
        with live.suspended():  # the live handler would solve this write again, within its time budget
            context.view_layer.update()
        elsewhere = pin_reading.pins_elsewhere(obj, result)
        state = "converged" if result.converged and not elsewhere else "stopped"
        details = ", ".join(
            f"{bone} {distance(context.scene, position)} ({degrees(math.radians(orientation))})"
            for bone, (position, orientation) in production_checks.evaluated_pin_errors(obj).items()
        )
        summary = (
            f"{state} after {count(result.iterations, 'iteration')}, {result.ms:.1f} ms: "
            f"{pin_reading.pins_summary(obj, result)} ({details})"
        )
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
