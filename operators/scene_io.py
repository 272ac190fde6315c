"""Scene documents in and out of Blender: bug reports, the CLI solver, and reproducing either.

Export writes what `scene_export.scene_document` sees. Import validates the whole
document with the solver's own parser first and builds a complete plan before
touching the file, so a bad document is reported and changes nothing.
"""

import json
import pathlib

import bpy
from bpy.props import StringProperty
from bpy_extras.io_utils import ExportHelper, ImportHelper
from mathutils import Matrix, Quaternion

from ..ewbik_addon import armature_checks, scene_export
from ..ewbik_addon.active import active_armature
from ..ewbik_addon.targets import new_target
from ..solver.scene import parse_scene
from ..ewbik_addon.limit_settings import set_limits
from ..ewbik_addon.properties import STORED_SETTINGS
from ..ewbik_addon.rotation_channels import rotation_channel

# The tolerance is set apart (the document holds armature units, the property a scene distance),
# and so is the time budget (null in the document, 0 in the property).
SETTINGS_FIELDS = tuple(name for name in STORED_SETTINGS if name not in ("tolerance", "time_budget_ms"))


class EWBIK_OT_export_scene(bpy.types.Operator, ExportHelper):
    """Write the active armature (rest, pose, pins, limits, settings) as an EWBIK scene document"""

    bl_idname = "ewbik.export_scene"
    bl_label = "Export EWBIK Scene"
    bl_options = {"REGISTER"}

    filename_ext = ".json"
    filter_glob: StringProperty(default="*.json", options={"HIDDEN"})

    @classmethod
    def poll(cls, context):
        return active_armature(context) is not None

    def execute(self, context):
        obj = active_armature(context)
        try:
            document = scene_export.scene_document(obj)
        except armature_checks.RigError as error:
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


def read_document(path):
    """The parsed JSON of a scene file; raises ValueError with a message for the user."""
    try:
        with open(path, encoding="utf-8") as stream:
            document = json.load(stream)
    except OSError as error:
        raise ValueError(f"Could not read {path}: {error.strerror or error}") from error
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{pathlib.Path(path).name} is not JSON: {error}") from error
    try:
        parse_scene(document)
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        raise ValueError(f"Invalid scene document: {error}") from error
    return document


def rotation_values(pose_bone, quaternion):
    """(property name, value) that gives the pose bone this local rotation in its own rotation mode."""
    channel = rotation_channel(pose_bone.rotation_mode)
    if channel == "rotation_quaternion":
        return channel, quaternion
    if channel == "rotation_axis_angle":
        axis, angle = quaternion.to_axis_angle()
        return channel, (angle, *axis)
    return channel, quaternion.to_euler(pose_bone.rotation_mode, pose_bone.rotation_euler)


def build_armature(context, document, name):
    """A new armature object with the document's bones at their rest matrices, active, in object mode.

    Live solving starts off, so the recorded pose is what the animator sees first.
    """
    data = bpy.data.armatures.new(name)
    obj = bpy.data.objects.new(name, data)
    obj.ewbik.live = False
    context.collection.objects.link(obj)
    for other in context.view_layer.objects:
        other.select_set(False)
    obj.select_set(True)
    context.view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    edit_bones = {}
    for bone in document["bones"]:
        edit_bone = data.edit_bones.new(bone["name"])
        edit_bone.head = (0.0, 0.0, 0.0)
        edit_bone.tail = (0.0, bone["length"], 0.0)
        edit_bone.matrix = Matrix(bone["rest"])
        edit_bones[bone["name"]] = edit_bone
    for bone in document["bones"]:
        if bone.get("parent") is not None:
            edit_bones[bone["name"]].parent = edit_bones[bone["parent"]]
    bpy.ops.object.mode_set(mode="OBJECT")
    return obj


def pose_plan(obj, document):
    """Every property assignment the import makes on `obj`, computed before any is made.

    Returns a list of (owner, property name, value) and the pins as (pose bone,
    world target matrix, existing target or None).
    """
    assignments = []
    bones = obj.pose.bones
    for bone in document["bones"]:
        pose_bone = bones[bone["name"]]
        rotation = Quaternion(bone.get("rotation", (1.0, 0.0, 0.0, 0.0))).normalized()
        assignments.append((pose_bone, *rotation_values(pose_bone, rotation)))
        assignments.append((pose_bone, "location", tuple(bone.get("location", (0.0, 0.0, 0.0)))))
        stiffness = float(bone.get("stiffness", 0.0))
        if not (stiffness == 1.0 and all(pose_bone.lock_rotation)):
            # Export writes 1 for fully locked bones; the locks already freeze them here,
            # and storing 1 would keep them frozen after the animator unlocks them.
            assignments.append((pose_bone.ewbik, "stiffness", stiffness))
    solver_settings = document.get("settings", {})
    for field in SETTINGS_FIELDS:
        if field in solver_settings:
            assignments.append((obj.ewbik, field, solver_settings[field]))
    if "tolerance" in solver_settings:
        assignments.append((obj.ewbik, "tolerance", solver_settings["tolerance"] * armature_checks.armature_scale(obj)))
    if "time_budget_ms" in solver_settings:
        assignments.append((obj.ewbik, "time_budget_ms", solver_settings["time_budget_ms"] or 0.0))

    pins = []
    for entry in document.get("pins", ()):
        pose_bone = bones[entry["bone"]]
        settings = pose_bone.ewbik
        pins.append((pose_bone, obj.matrix_world @ Matrix(entry["target"]), settings.target))
        assignments.append((settings, "weight", float(entry.get("weight", 1.0))))
        assignments.append((settings, "orientation_weights", tuple(entry.get("orientation_weights", (1.0, 1.0, 1.0)))))
        assignments.append((settings, "falloff", float(entry.get("falloff", 0.0))))
    return assignments, pins


def apply_document(context, obj, document):
    """Give `obj` the document's pose, pins, limits, stiffness and solver settings."""
    assignments, pins = pose_plan(obj, document)
    limits = {bone["name"]: bone.get("limits") for bone in document["bones"]}
    pinned = {pose_bone.name for pose_bone, _matrix, _target in pins}

    for owner, name, value in assignments:
        setattr(owner, name, value)
    for pose_bone in obj.pose.bones:
        if pose_bone.name not in pinned:
            pose_bone.ewbik.target = None
        set_limits(pose_bone.ewbik, limits.get(pose_bone.name) or {})
    for pose_bone, matrix, existing in pins:
        movable = existing is not None and existing.type != "ARMATURE"  # never move a rig a pin follows
        target = existing if movable else new_target(context, obj, pose_bone)
        target.matrix_world = matrix
        pose_bone.ewbik.target = target
    obj.update_tag()


class EWBIK_OT_import_scene(bpy.types.Operator, ImportHelper):
    """Load an EWBIK scene document: onto the active armature when its bones match, else as a new armature"""

    bl_idname = "ewbik.import_scene"
    bl_label = "Import EWBIK Scene"
    bl_options = {"REGISTER", "UNDO"}

    filename_ext = ".json"
    filter_glob: StringProperty(default="*.json", options={"HIDDEN"})

    def execute(self, context):
        try:
            document = read_document(self.filepath)
        except ValueError as error:
            self.report({"ERROR"}, str(error))
            return {"CANCELLED"}
        names = {bone["name"] for bone in document["bones"]}
        obj = active_armature(context)
        if obj is not None and {bone.name for bone in obj.data.bones} == names:
            if obj.mode == "EDIT":
                bpy.ops.object.mode_set(mode="POSE")
            created = False
        else:
            if context.object is not None and context.object.mode != "OBJECT":
                bpy.ops.object.mode_set(mode="OBJECT")
            obj = build_armature(context, document, pathlib.Path(self.filepath).stem or "EWBIK Scene")
            created = True
        apply_document(context, obj, document)
        where = f"new armature '{obj.name}'" if created else f"'{obj.name}'"
        self.report({"INFO"}, f"Loaded {len(names)} bones and {len(document.get('pins', ()))} pins onto {where}")
        return {"FINISHED"}


CLASSES = (EWBIK_OT_export_scene, EWBIK_OT_import_scene)
