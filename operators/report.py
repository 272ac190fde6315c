"""`ewbik.report_problem`: show a message as an error report (status bar, Info log).

The live handler cannot report (it is not an operator); its timer calls this once per new error,
so a user with the sidebar closed still learns why the body stopped following. Blender shows the
reports of an operator run from Python in the interface only when the operator goes modal, so
`invoke` reports, waits for the next event and finishes; `execute` (no window: background runs)
reports to the terminal. `ewbik_addon.messages.report_problem` picks which.
"""

import bpy
from bpy.props import StringProperty


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


CLASSES = (EWBIK_OT_report_problem,)
