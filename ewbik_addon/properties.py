"""Settings stored in the .blend: per armature (`Object.ewbik`) and per pose bone (`PoseBone.ewbik`).

Names follow the public surface in INTERFACE.md. Every change marks the armature
dirty so the live handler re-solves; values are plain RNA properties, so they are
saved and undoable. Pin weight, orientation weights and falloff are animatable (the
solver reads them on every solve); stiffness and limits are not, because the live
handler reads them only when the armature itself changes.
"""

import math

import bpy
from bpy.props import (
    BoolProperty,
    CollectionProperty,
    EnumProperty,
    FloatProperty,
    FloatVectorProperty,
    IntProperty,
    PointerProperty,
    StringProperty,
)

from ..solver import presets
from . import production_rigs


def _changed(self, context):
    """Ask the live handler to solve the owning armature again."""
    owner = self.id_data
    if owner is not None:
        owner.update_tag()


class EWBIK_PG_limit_cone(bpy.types.PropertyGroup):
    """One cone of a Kusudama, in the bone's rest frame (+Y is the rest direction)."""

    direction: FloatVectorProperty(
        name="Direction",
        description="Axis of the cone in the bone's rest frame (normalized when solving)",
        size=3,
        subtype="DIRECTION",
        default=(0.0, 1.0, 0.0),
        options=set(),
        update=_changed,
    )
    radius: FloatProperty(
        name="Radius",
        description="Half-angle of the cone: how far the bone may swing from its axis",
        subtype="ANGLE",
        min=0.0,
        max=math.pi,
        default=math.radians(45.0),
        options=set(),
        update=_changed,
    )


def _role_items():
    return [(production_rigs.NO_ROLE, "None", "Leave this bone out of the presets")] + [
        (role, role, f"The bone is the body's {role}") for role in presets.body_roles()]


class EWBIK_PG_role_row(bpy.types.PropertyGroup):
    """One row of an armature's name mapping: a bone and the body role presets give it."""

    bone: StringProperty(name="Bone", description="Bone of the armature", options=set(), update=_changed)
    role: EnumProperty(
        name="Role",
        description="Body role the presets treat this bone as, whatever its name says",
        items=_role_items(),
        options=set(),
        update=_changed,
    )


def _is_not_armature(self, obj):
    return obj.type != "ARMATURE"


class EWBIK_PG_bone(bpy.types.PropertyGroup):
    """Pin target and joint limits of one pose bone."""

    target: PointerProperty(
        name="Target",
        description="Object the bone is pinned to; the bone is pinned while this is set",
        type=bpy.types.Object,
        poll=_is_not_armature,
        update=_changed,
    )
    weight: FloatProperty(
        name="Weight",
        description="How strongly this pin pulls compared with the others",
        min=0.0,
        soft_max=10.0,
        default=1.0,
        update=_changed,
    )
    orientation_weights: FloatVectorProperty(
        name="Orientation Weights",
        description="How strongly the bone's X, Y and Z axes follow the target's (0 = position only)",
        size=3,
        min=0.0,
        soft_max=10.0,
        default=(1.0, 1.0, 1.0),
        update=_changed,
    )
    falloff: FloatProperty(
        name="Falloff",
        description="How much bones beyond another pinned bone still feel this pin (0 = not at all)",
        min=0.0,
        max=1.0,
        default=0.0,
        update=_changed,
    )
    stiffness: FloatProperty(
        name="Stiffness",
        description="Resistance to rotation by the solver (1 = never rotated)",
        min=0.0,
        max=1.0,
        default=0.0,
        options=set(),
        update=_changed,
    )
    cones: CollectionProperty(type=EWBIK_PG_limit_cone)
    active_cone_index: IntProperty(name="Active Cone", default=0)
    use_twist_limit: BoolProperty(
        name="Limit Twist",
        description="Limit the rotation about the bone's own axis",
        default=False,
        options=set(),
        update=_changed,
    )
    twist_min: FloatProperty(
        name="Twist Min",
        subtype="ANGLE",
        min=-2.0 * math.pi,
        max=2.0 * math.pi,
        soft_min=-math.pi,
        soft_max=math.pi,
        default=math.radians(-45.0),
        options=set(),
        update=_changed,
    )
    twist_max: FloatProperty(
        name="Twist Max",
        subtype="ANGLE",
        min=-2.0 * math.pi,
        max=2.0 * math.pi,
        soft_min=-math.pi,
        soft_max=math.pi,
        default=math.radians(45.0),
        options=set(),
        update=_changed,
    )
    comfort: FloatProperty(
        name="Comfort",
        description="Gentle pull back toward the middle of the allowed region (0 = off)",
        min=0.0,
        max=1.0,
        default=0.0,
        options=set(),
        update=_changed,
    )


class EWBIK_PG_armature(bpy.types.PropertyGroup):
    """Solver settings of one armature object."""

    live: BoolProperty(
        name="Live",
        description="Solve whenever a target or the armature changes, and on frame change",
        default=True,
        update=_changed,
    )
    iterations: IntProperty(
        name="Iterations",
        description="At most this many solver iterations per update",
        min=1,
        soft_max=200,
        max=10000,
        default=15,
        update=_changed,
    )
    time_budget_ms: FloatProperty(
        name="Time Budget (ms)",
        description="Stop a live update once this much time is spent (0 = no budget)",
        min=0.0,
        soft_max=50.0,
        default=10.0,
        update=_changed,
    )
    tolerance: FloatProperty(
        name="Tolerance",
        description="Stop early when every pin is this close to its target (a distance in the scene, "
        "whatever the armature's scale)",
        subtype="DISTANCE",
        min=0.0,
        default=1e-5,
        precision=6,
        update=_changed,
    )
    dampening: FloatProperty(
        name="Dampening",
        description="Largest rotation of one bone in one step",
        subtype="ANGLE",
        min=math.radians(0.1),
        max=math.pi,
        default=0.0873,
        update=_changed,
    )
    stabilization_passes: IntProperty(
        name="Stabilization",
        description="Undo bone steps that make the pose worse (0 = off)",
        min=0,
        max=4,
        default=1,
        update=_changed,
    )
    translate_root: BoolProperty(
        name="Move Root",
        description="Let the solver move the root bone (hips) as well as rotate it",
        default=False,
        update=_changed,
    )
    show_limits: BoolProperty(
        name="Show Limits",
        description="Draw joint-limit cones in the viewport",
        default=True,
    )
    auto_limits: BoolProperty(
        name="Humanoid Limits on Pin",
        description="When pinning bones of an armature that has no joint limits yet, set the humanoid "
        "preset on the bones it recognises (arms or legs needed), so knees and elbows bend the right way",
        default=True,
    )
    active_pin_index: IntProperty(name="Active Pin", default=0)
    role_mapping: CollectionProperty(type=EWBIK_PG_role_row)
    active_role_index: IntProperty(name="Active Mapping Row", default=0)
    status: StringProperty(name="Status", description="Outcome of the last solve")


CLASSES = (EWBIK_PG_limit_cone, EWBIK_PG_bone, EWBIK_PG_role_row, EWBIK_PG_armature)


def register():
    for cls in CLASSES:
        bpy.utils.register_class(cls)
    bpy.types.Object.ewbik = PointerProperty(type=EWBIK_PG_armature)
    bpy.types.PoseBone.ewbik = PointerProperty(type=EWBIK_PG_bone)


def unregister():
    del bpy.types.PoseBone.ewbik
    del bpy.types.Object.ewbik
    for cls in reversed(CLASSES):
        bpy.utils.unregister_class(cls)
