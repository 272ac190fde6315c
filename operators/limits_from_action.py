"""`ewbik.limits_from_action`: joint limits fitted to the armature's animation over a frame range."""

import bpy
from bpy.props import BoolProperty, FloatProperty, IntProperty

from ..ewbik_addon.bake.action_limits import fit_action_limits
from ..ewbik_addon.com.active import armature_to_step_through, is_selected, limits_editable
from ..ewbik_addon.com.pose_channels import action_range, frame_range, read_pose_channels, write_pose_channels
from ..solver import EwbikError
from ..solver.fit_limits import DEFAULT_MARGIN, DEFAULT_MAX_CONES


class EWBIK_OT_limits_from_action(
    frame_range("the action's frame range, or the timeline's preview range when it is on"), bpy.types.Operator
):
    """Fit joint limits to the armature's animation: per bone the smallest cones and twist range holding most frames"""

    bl_idname = "ewbik.limits_from_action"
    bl_label = "Limits from Action"
    bl_options = {"REGISTER", "UNDO"}

    coverage: FloatProperty(
        name="Coverage",
        description="Share of the frames the limits must hold; the rest are treated as outliers",
        subtype="FACTOR",
        min=0.01,
        max=1.0,
        default=0.99,
    )
    max_cones: IntProperty(
        name="Max Cones",
        description="Most cones per bone (a chain of cones follows curved or elongated motion)",
        min=1,
        soft_max=8,
        default=DEFAULT_MAX_CONES,
    )
    margin: FloatProperty(
        name="Margin",
        description=(
            "Room added around the fitted limits for motion the action does not show, as a share of "
            "each bone's range of motion (0: exactly the action's motion)"
        ),
        subtype="FACTOR",
        min=0.0,
        max=1.0,
        default=DEFAULT_MARGIN,
    )
    only_selected: BoolProperty(
        name="Only Selected Bones",
        description="Change only the selected bones instead of every bone of the armature",
        default=False,
    )

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return armature_to_step_through(cls, context, "Select an animated armature") and limits_editable(
            cls, context.object
        )

    def execute(self, context: bpy.types.Context) -> set[str]:
        obj = context.object
        self.fill_frame_range(*action_range(context.scene, obj))
        names = None
        if self.only_selected:
            names = {b.name for b in obj.pose.bones if obj.mode == "POSE" and is_selected(b)}
            if not names:
                self.report({"WARNING"}, "No bones selected")
                return {"CANCELLED"}
        pose = read_pose_channels(obj.pose.bones)
        try:
            limited = fit_action_limits(
                context.scene,
                obj,
                self.frame_start,
                self.frame_end,
                coverage=self.coverage,
                max_cones=self.max_cones,
                margin=self.margin,
                bone_names=names,
            )
        except EwbikError as error:
            self.report({"ERROR"}, str(error))
            return {"CANCELLED"}
        finally:
            write_pose_channels(obj.pose.bones, pose)
        if not limited:
            frames = f"{self.frame_start}..{self.frame_end}"
            self.report({"WARNING"}, f"No bone moves in frames {frames}: no limits fitted")
            return {"CANCELLED"}
        frames = self.frame_end - self.frame_start + 1
        self.report(
            {"INFO"},
            f"Limits fitted on {len(limited)} bone{'s' if len(limited) != 1 else ''} from {frames} frames",
        )
        return {"FINISHED"}


CLASSES = (EWBIK_OT_limits_from_action,)
