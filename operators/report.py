"""`ewbik.report_problem`: show a message as an error report (status bar, Info log).

The live handler cannot report (it is not an operator); its timer calls this once per new error,
so a user with the sidebar closed still learns why the body stopped following.
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


CLASSES = (EWBIK_OT_report_problem,)
