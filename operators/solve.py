"""`ewbik.solve`: solve the active armature now, without the live time budget.

Every solve starts from the pose underneath (`pose_underneath`), so Solve gives the pose live
solving gives for the same targets once it has the time: what the user presses when the pose
must be right, or when live solving is off.
"""

import bpy

from ..ewbik_addon.com.active import active_armature
from ..ewbik_addon.solve.solve_now import solve_now
from ..solver import EwbikError


class EWBIK_OT_solve(bpy.types.Operator):
    """Solve the active armature (or the one whose target is selected) now, without the live Time Budget"""

    bl_idname = "ewbik.solve"
    bl_label = "Solve"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        obj = active_armature(context)
        if obj is None:
            cls.poll_message_set("Select an armature or one of its pin targets")
            return False
        if obj.mode == "EDIT":
            cls.poll_message_set("Leave Edit Mode to solve")
            return False
        return True

    def execute(self, context: bpy.types.Context) -> set[str]:
        try:
            solved = solve_now(context, active_armature(context))
        except EwbikError as error:
            self.report({"ERROR"}, str(error))
            return {"CANCELLED"}
        self.report({"WARNING"} if solved.elsewhere else {"INFO"}, solved.summary)
        return {"FINISHED"}


CLASSES = (EWBIK_OT_solve,)
