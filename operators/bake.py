"""`ewbik.bake`: solve every frame of a range and key the solved pose (`ewbik_addon.bake.bake_engine`).

The operator only drives the bake: `execute` in one go, `invoke` + a timer-driven modal with a
progress bar, a status line and Esc to cancel.
"""

import bpy

from ..ewbik_addon.bake.bake_engine import BakeOptions, CrowdBake, armatures_to_bake
from ..ewbik_addon.bake.option_fields import option_properties, options_of
from ..ewbik_addon.com.active import armature_to_step_through
from ..ewbik_addon.com.pose_channels import frame_range, scene_range
from ..solver import EwbikError


class EWBIK_OT_bake(
    frame_range("the scene's frame range, or its preview range"), option_properties(), bpy.types.Operator
):
    """Solve every frame of a range and key the solved rotations on the bones the solver moves (every selected armature with pins)"""

    bl_idname = "ewbik.bake"
    bl_label = "Bake IK to Keyframes"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return armature_to_step_through(cls, context, "Select an armature with pinned bones")

    def _options(self, context: bpy.types.Context) -> BakeOptions:
        """The bake options, with an unset range filled in from the scene (and shown in redo)."""
        self.fill_frame_range(*scene_range(context.scene))
        return options_of(self, self.frame_start, self.frame_end)

    def execute(self, context: bpy.types.Context) -> set[str]:
        window_manager = context.window_manager
        try:
            bake = CrowdBake(context, armatures_to_bake(context), self._options(context))
            window_manager.progress_begin(0, len(bake.frames))
            try:
                bake.solve_all(window_manager.progress_update)
            finally:
                window_manager.progress_end()
            summary = bake.finish()
        except EwbikError as error:
            self.report({"ERROR"}, str(error))
            return {"CANCELLED"}
        self.report({"INFO"}, str(summary))
        return {"FINISHED"}

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        try:
            self._bake = CrowdBake(context, armatures_to_bake(context), self._options(context))
        except EwbikError as error:
            self.report({"ERROR"}, str(error))
            return {"CANCELLED"}
        window_manager = context.window_manager
        self._timer = window_manager.event_timer_add(0.001, window=context.window)
        window_manager.progress_begin(0, len(self._bake.frames))
        window_manager.modal_handler_add(self)
        self._show_status(context)
        return {"RUNNING_MODAL"}

    def modal(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        bake = self._bake
        if event.type == "ESC":
            bake.cancel()
            self._end(context)
            self.report({"WARNING"}, "Bake cancelled; the action is unchanged")
            return {"CANCELLED"}
        if event.type != "TIMER":
            return {"RUNNING_MODAL"}
        try:
            bake.solve_for(seconds=1 / 30)
            if not bake.done:
                bake.show_solved()
                context.window_manager.progress_update(bake.solved)
                self._show_status(context)
                return {"RUNNING_MODAL"}
            summary = bake.finish()
        except EwbikError as error:
            self._end(context)
            self.report({"ERROR"}, str(error))
            return {"CANCELLED"}
        except BaseException:
            self._end(context)
            raise
        self._end(context)
        self.report({"INFO"}, str(summary))
        return {"FINISHED"}

    def cancel(self, context: bpy.types.Context) -> None:
        """Blender ends the modal (file load, window closed): put everything back."""
        self._bake.cancel()
        self._end(context)

    def _show_status(self, context: bpy.types.Context) -> None:
        bake = self._bake
        context.workspace.status_text_set(
            f"Baking IK: frame {bake.frame} ({bake.solved}/{len(bake.frames)}), Esc to cancel"
        )

    def _end(self, context: bpy.types.Context) -> None:
        window_manager = context.window_manager
        window_manager.event_timer_remove(self._timer)
        window_manager.progress_end()
        context.workspace.status_text_set(None)


CLASSES = (EWBIK_OT_bake,)
