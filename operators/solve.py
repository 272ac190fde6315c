"""`ewbik.solve`: solve the active armature now, to convergence or the iteration cap."""

import bpy

from ..ewbik_addon import bridge


class EWBIK_OT_solve(bpy.types.Operator):
    """Solve the active armature now, ignoring the live time budget"""

    bl_idname = "ewbik.solve"
    bl_label = "Solve"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        obj = context.object
        if obj is None or obj.type != "ARMATURE":
            cls.poll_message_set("Select an armature")
            return False
        if obj.mode == "EDIT":
            cls.poll_message_set("Leave Edit Mode to solve")
            return False
        return True

    def execute(self, context):
        obj = context.object
        try:
            result = bridge.solve_armature(obj, full=True)
        except bridge.RigError as error:
            obj.ewbik.status = str(error)
            self.report({"ERROR"}, str(error))
            return {"CANCELLED"}
        context.view_layer.update()
        elsewhere = bridge.pins_elsewhere(obj, result)
        errors = bridge.evaluated_pin_errors(obj)
        details = ", ".join(
            f"{bone} {bridge.scene_length(obj, position)} ({orientation:.2g}°)"
            for bone, (position, orientation) in errors.items()
        )
        state = "converged" if result.converged and not elsewhere else "stopped"
        summary = f"{state} after {result.iterations} iterations, {result.ms:.1f} ms: {details}"
        if elsewhere:
            summary += "; constraints or drivers pose " + ", ".join(elsewhere) + " away from the solve"
        obj.ewbik.status = summary
        self.report({"WARNING"} if elsewhere else {"INFO"}, summary)
        return {"FINISHED"}


CLASSES = (EWBIK_OT_solve,)
