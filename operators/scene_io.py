"""Scene documents in and out of Blender: bug reports, the CLI solver, and reproducing either.

Export writes what `scene_export.scene_document` sees. Import (`ewbik_addon.documents.scene_import`) validates the
whole document and plans every change before touching the file, so a bad document is reported
and changes nothing.
"""

import json
import pathlib

import bpy
from bpy.props import BoolProperty, StringProperty
from bpy_extras.io_utils import ExportHelper, ImportHelper

from ..ewbik_addon.com.active import active_armature
from ..ewbik_addon.documents import scene_export, scene_import
from ..solver import EwbikError


class EWBIK_OT_export_scene(bpy.types.Operator, ExportHelper):
    """Write the active armature (rest, pose, pins, limits, settings) as an EWBIK scene document"""

    bl_idname = "ewbik.export_scene"
    bl_label = "Export EWBIK Scene"
    bl_options = {"REGISTER"}

    filename_ext = ".json"
    filter_glob: StringProperty(default="*.json", options={"HIDDEN"})

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return active_armature(context) is not None

    def execute(self, context: bpy.types.Context) -> set[str]:
        obj = active_armature(context)
        try:
            document = scene_export.scene_document(obj)
        except EwbikError as error:
            self.report({"ERROR"}, str(error))
            return {"CANCELLED"}
        try:
            with open(self.filepath, "w", encoding="utf-8") as stream:
                json.dump(document, stream, indent=1)
        except OSError as error:
            self.report({"ERROR"}, f"Could not write {self.filepath}: {error.strerror or error}")
            return {"CANCELLED"}
        self.report({"INFO"}, f"Wrote {len(document['bones'])} bones and {len(document['pins'])} pins")
        return {"FINISHED"}


class EWBIK_OT_import_scene(bpy.types.Operator, ImportHelper):
    """Load an EWBIK scene document onto the active armature (its bones must be the document's), or as a new armature"""

    bl_idname = "ewbik.import_scene"
    bl_label = "Import EWBIK Scene"
    bl_options = {"REGISTER", "UNDO"}

    filename_ext = ".json"
    filter_glob: StringProperty(default="*.json", options={"HIDDEN"})
    as_new_armature: BoolProperty(
        name="As New Armature",
        description="Build a new armature from the document even when an armature is active "
        "(an active armature with other bones is refused otherwise)",
        default=False,
    )

    def execute(self, context: bpy.types.Context) -> set[str]:
        try:
            document = scene_import.read_document(self.filepath)
            obj = scene_import.receiving_armature(active_armature(context), document, self.as_new_armature)
        except EwbikError as error:
            self.report({"ERROR"}, str(error))
            return {"CANCELLED"}
        notes = []
        if obj is None:
            if context.object is not None and context.object.mode != "OBJECT":
                bpy.ops.object.mode_set(mode="OBJECT")
            name = pathlib.Path(self.filepath).stem or "EWBIK Scene"
            obj = scene_import.build_armature(context, document, name)
            where = f"new armature '{obj.name}'"
        else:
            differ = scene_import.rest_differences(obj, document)
            if differ:
                notes.append(
                    f"the rest pose of {len(differ)} bone(s) differs from the document's "
                    f"(e.g. '{differ[0]}'), so the pose will look different"
                )
            where = f"'{obj.name}'"
        notes += scene_import.apply_document(context, obj, document)
        summary = (
            f"Loaded {len(document['bones'])} bones and {len(document.get('pins', ()))} pins onto {where}"
        )
        self.report({"WARNING"} if notes else {"INFO"}, "; ".join([summary, *notes]))
        return {"FINISHED"}


CLASSES = (EWBIK_OT_export_scene, EWBIK_OT_import_scene)
