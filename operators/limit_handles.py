"""Ctrl+click on the active bone's limit sphere adds a cone there; Ctrl+Shift+click removes the nearest."""

import bpy
from bpy.props import BoolProperty, FloatVectorProperty

from ..ewbik_addon.com.active import active_limit_bone, editable_limit_bone
from ..ewbik_addon.viewport.limit_gizmos import (
    add_cone,
    editable_bone,
    remove_cone_at,
    sphere_direction,
    view_ray,
)
from ..ewbik_addon.viewport.overlay import limit_frame


class EWBIK_OT_cone_at_cursor(bpy.types.Operator):
    """Add a limit cone where the active bone's limit sphere is clicked, or remove the cone nearest to the click"""

    bl_idname = "ewbik.cone_at_cursor"
    bl_label = "Add/Remove Limit Cone Here"
    bl_options = {"REGISTER", "UNDO"}

    direction: FloatVectorProperty(
        name="Direction",
        description="Where on the sphere, in the bone's rest frame",
        size=3,
        subtype="DIRECTION",
        default=(0.0, 1.0, 0.0),
    )
    remove: BoolProperty(
        name="Remove", description="Remove the cone nearest to the direction instead", default=False
    )

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return editable_limit_bone(cls, context) is not None

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        pose_bone = editable_bone(context) if context.region_data is not None else None
        if pose_bone is None:
            return {"PASS_THROUGH"}
        frame = limit_frame(pose_bone.id_data, pose_bone)
        direction = sphere_direction(frame, pose_bone.length, *view_ray(context, event), beside=False)
        if direction is None:
            return {"PASS_THROUGH"}
        self.direction = direction
        return self.execute(context)

    def execute(self, context: bpy.types.Context) -> set[str]:
        settings = active_limit_bone(context).bone.ewbik
        if self.remove:
            index = remove_cone_at(settings, self.direction)
            if index is None:
                self.report({"WARNING"}, "This bone has no limit cones")
                return {"CANCELLED"}
            self.report({"INFO"}, f"Limit cone {index + 1} removed")
        else:
            index = add_cone(settings, self.direction)
            self.report({"INFO"}, f"Limit cone {index + 1} added")
        return {"FINISHED"}


CLASSES = (EWBIK_OT_cone_at_cursor,)
