"""Settings stored in the .blend: per armature object (`Object.ewbik`), per pose bone (`PoseBone.ewbik`:
the pin) and per bone of the armature data (`Bone.ewbik`: the joint limits).

Joint limits belong to the skeleton, as a bone's rest does: every object sharing the armature
shares them, and Blender's evaluation of a posed object never copies them (it copies every value
stored on every pose bone on each live update). Names follow the public interface
(docs/INTERFACE.md). Every change marks the armature object or data dirty so the live handler
re-solves; values are plain RNA properties, so they are saved and undoable. Pin kind, planted,
weight, orientation weights, falloff and the armature's influence are animatable (the solver
reads them on every solve); stiffness and limits are not, because the live handler reads them
only when the armature itself changes. Names shown in the UI speak an animator's words; the RNA identifiers are the
public interface and stay as docs/INTERFACE.md names them.
"""

import array
import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

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

from ...solver import SolverSettings, presets
from ...solver.kusudama import cone_direction
from ...solver.pins import AIM_AXES
from ...solver.settings import MAX_SOFT_REACH
from ...solver.stretch import MAX_STRETCH
from ...solver.validation import MAX_ANGLE
from ..com import active, messages, stored_settings
from ..com.pin_kinds import DEFAULT_PIN_KIND, pin_kind_items
from ..com.stored_settings import batched_updates, bone_target, settings_changed
from ..limits import body_angles
from ..rigs import production_rigs

SHOWN_AS_ZERO = math.radians(0.005)  # below half the panels' last shown digit of a degree


def _angle_getter(which: int) -> Callable[[bpy.types.PropertyGroup], float]:
    """Flex or abduct as the panel shows it: an angle that rounds to zero degrees is 0, so a
    float32 axis a hair off reads "0°", never "-0°"."""

    def get(cone: bpy.types.PropertyGroup) -> float:
        if cone_direction(cone.direction) is None:
            return 0.0
        angle = body_angles.flex_abduct(body_angles.cone_bone(cone), cone.direction)[which]
        return 0.0 if abs(angle) < SHOWN_AS_ZERO else angle

    return get


def _angle_setter(which: int) -> Callable[[bpy.types.PropertyGroup, float], None]:
    def set_angle(cone: bpy.types.PropertyGroup, value: float) -> None:
        bone = body_angles.cone_bone(cone)
        angles = (
            list(body_angles.flex_abduct(bone, cone.direction))
            if cone_direction(cone.direction) is not None
            else [0.0, 0.0]
        )
        angles[which] = value
        cone.direction = body_angles.direction_from(bone, *angles)

    return set_angle


REST_DIRECTION = (0.0, 1.0, 0.0)
_SOLVER_DEFAULTS = {field.name: field.default for field in dataclasses.fields(SolverSettings)}


def _kept_direction(
    cone: bpy.types.PropertyGroup, direction: Sequence[float], stored: Sequence[float], _is_set: bool
) -> Sequence[float]:
    """Blender 5's `set_transform`: an axis without a direction is refused, the stored one stays."""
    return direction if cone_direction(direction) is not None else stored


def _direction(cone: bpy.types.PropertyGroup) -> tuple[float, ...]:
    """Blender 4's getter: the stored axis (where Blender 4 keeps the property itself)."""
    stored = cone.get("direction")
    return REST_DIRECTION if stored is None else tuple(stored)


def _set_direction(cone: bpy.types.PropertyGroup, direction: Sequence[float]) -> None:
    """Blender 4's setter: an axis without a direction is refused, the stored one stays; stored
    as float32, as Blender stores the property."""
    stored = array.array("f", direction)
    if cone_direction(stored) is not None:
        cone["direction"] = stored


def _direction_property(**options: Any) -> Any:
    """The cone axis, refusing (0, 0, 0) without storing a last good axis per cone (a value beside
    every cone that nothing else reads). Blender 5 transforms the value it stores; Blender 4 only
    has a getter and setter, which store it where it would."""
    if bpy.app.version >= (5, 0, 0):
        return FloatVectorProperty(set_transform=_kept_direction, **options)
    return FloatVectorProperty(get=_direction, set=_set_direction, **options)


def _twist_min_changed(self: bpy.types.PropertyGroup, context: bpy.types.Context) -> None:
    """Typing a Min above Max drags Max along, so the range is never inverted."""
    if self.twist_min > self.twist_max:
        self.twist_max = self.twist_min
    settings_changed(self, context)


def _twist_max_changed(self: bpy.types.PropertyGroup, context: bpy.types.Context) -> None:
    """Typing a Max below Min drags Min along, so the range is never inverted."""
    if self.twist_max < self.twist_min:
        self.twist_min = self.twist_max
    settings_changed(self, context)


class EWBIK_PG_limit_cone(bpy.types.PropertyGroup):
    """One cone of a Kusudama, in the bone's rest frame (+Y is the rest direction)."""

    direction: _direction_property(
        name="Direction",
        description="Axis of the cone in the bone's rest frame (normalized when solving; (0, 0, 0) is "
        "refused)",
        size=3,
        subtype="DIRECTION",
        default=REST_DIRECTION,
        options=set(),
        update=settings_changed,
    )
    radius: FloatProperty(
        name="Radius",
        description="Half-angle of the cone: how far the bone may swing from its axis",
        subtype="ANGLE",
        min=0.0,
        max=math.pi,
        default=math.radians(45.0),
        options=set(),
        update=settings_changed,
    )
    flex: FloatProperty(
        name="Flex",
        description="How far the cone's direction is swung forward from the bone's rest direction "
        "(negative: back; a view of Direction)",
        subtype="ANGLE",
        soft_min=-math.pi,
        soft_max=math.pi,
        options=set(),
        get=_angle_getter(0),
        set=_angle_setter(0),
    )
    abduct: FloatProperty(
        name="Abduct",
        description="How far the cone's direction is swung out from the bone's rest direction, away "
        "from the body's midline, or up for a bone pointing out (negative: in; a view of Direction)",
        subtype="ANGLE",
        min=-math.pi / 2.0,
        max=math.pi / 2.0,
        options=set(),
        get=_angle_getter(1),
        set=_angle_setter(1),
    )


def _role_items() -> list[tuple[str, str, str]]:
    return [(production_rigs.NO_ROLE, "None", "Leave this bone out of the presets")] + [
        (role, role, f"The bone is the body's {role}") for role in presets.body_roles()
    ]


class EWBIK_PG_role_row(bpy.types.PropertyGroup):
    """One row of an armature's name mapping: a bone and the body role presets give it."""

    bone: StringProperty(
        name="Bone", description="Bone of the armature", options=set(), update=settings_changed
    )
    role: EnumProperty(
        name="Role",
        description="Body role the presets treat this bone as, whatever its name says",
        items=_role_items(),
        options=set(),
        update=settings_changed,
    )


AIM_AXIS_ITEMS = tuple((axis, axis, f"The bone's {axis} axis points at the target") for axis in AIM_AXES)


class EWBIK_PG_bone(bpy.types.PropertyGroup):
    """Pin of one pose bone, and how freely the solver turns and stretches the bone."""

    target: PointerProperty(
        name="Target",
        description="Object the bone is pinned to (an empty, or an armature with a Target Bone); "
        "the bone is pinned while this is set",
        type=bpy.types.Object,
        update=settings_changed,
    )
    target_bone: StringProperty(
        name="Target Bone",
        description="When the target is an armature: the bone of it to follow (another rig's bone, or a "
        "control bone of this rig), so posing stays in Pose Mode",
        update=settings_changed,
    )
    pole: PointerProperty(
        name="Pole",
        description="Object the limb above the pinned bone bends toward, as Blender's IK pole: the elbow or "
        "knee lies in the plane through the limb's root joint, the target and this object, as far as the "
        "joint limits allow",
        type=bpy.types.Object,
        update=settings_changed,
    )
    pin_kind: EnumProperty(
        name="Pin",
        description="What the pin holds: position, rotation, both, or where the bone points (Aim)",
        items=pin_kind_items(),
        default=DEFAULT_PIN_KIND,
        update=settings_changed,
    )
    aim_axis: EnumProperty(
        name="Aim Axis",
        description="With an Aim pin: the bone's axis that points at the target (Y runs head to tail)",
        items=AIM_AXIS_ITEMS,
        default="Y",
        update=settings_changed,
    )
    planted: BoolProperty(
        name="Planted",
        description="This pin wins over the ordinary ones: it counts one priority higher, so a foot on "
        "the floor stays put while the hands are dragged out of reach",
        default=False,
        update=settings_changed,
    )
    priority: FloatProperty(
        name="Priority",
        description="Where the pins cannot all be reached, pins of lower priority stop short first so "
        "that these are reached (a planted pin counts one higher)",
        soft_min=-10.0,
        soft_max=10.0,
        default=0.0,
        update=settings_changed,
    )
    weight: FloatProperty(
        name="Weight",
        description="How strongly this pin pulls compared with the others",
        min=0.0,
        soft_max=10.0,
        default=1.0,
        update=settings_changed,
    )
    orientation_weights: FloatVectorProperty(
        name="Axis Weights",
        description="How strongly the bone's X, Y and Z axes follow the target's turn (0 = that axis is free)",
        size=3,
        min=0.0,
        soft_max=10.0,
        default=(1.0, 1.0, 1.0),
        update=settings_changed,
    )
    falloff: FloatProperty(
        name="Falloff",
        description="How much bones beyond another pinned bone still feel this pin (0 = not at all)",
        min=0.0,
        max=1.0,
        default=0.0,
        update=settings_changed,
    )
    stiffness: FloatProperty(
        name="Stiffness",
        description="Resistance to rotation by the solver (1 = never rotated)",
        min=0.0,
        max=1.0,
        default=0.0,
        options=set(),
        update=settings_changed,
    )
    stretch: FloatProperty(
        name="Stretch",
        description="The most the solver may lengthen this bone by (its Y scale) to reach a pin beyond "
        "reach of a straight chain (1 = never; 1.2 = up to 20 % longer)",
        min=1.0,
        max=MAX_STRETCH,
        soft_max=2.0,
        default=1.0,
        options=set(),
        update=settings_changed,
    )


class EWBIK_PG_bone_limits(bpy.types.PropertyGroup):
    """Joint limits of one bone of the armature data: the kusudama cones, twist range and comfort."""

    cones: CollectionProperty(
        type=EWBIK_PG_limit_cone,
        name="Cones",
        description="Cones the bone may swing inside; neighbouring cones are joined by a smooth bridge",
    )
    active_cone_index: IntProperty(name="Active Cone", description="The cone shown for editing", default=0)
    use_twist_limit: BoolProperty(
        name="Limit Twist",
        description="Limit the rotation about the bone's own axis",
        default=False,
        options=set(),
        update=settings_changed,
    )
    twist_min: FloatProperty(
        name="Twist Min",
        description="Furthest the bone may twist one way about its own axis (typing a Min above Max moves "
        "Max along)",
        subtype="ANGLE",
        min=-MAX_ANGLE,
        max=MAX_ANGLE,
        soft_min=-math.pi,
        soft_max=math.pi,
        default=math.radians(-45.0),
        options=set(),
        update=_twist_min_changed,
    )
    twist_max: FloatProperty(
        name="Twist Max",
        description="Furthest the bone may twist the other way about its own axis (typing a Max below Min "
        "moves Min along)",
        subtype="ANGLE",
        min=-MAX_ANGLE,
        max=MAX_ANGLE,
        soft_min=-math.pi,
        soft_max=math.pi,
        default=math.radians(45.0),
        options=set(),
        update=_twist_max_changed,
    )
    comfort: FloatProperty(
        name="Comfort",
        description="Gentle pull back toward the middle of the allowed region (0 = off)",
        min=0.0,
        max=1.0,
        default=0.0,
        options=set(),
        update=settings_changed,
    )


def _get_active_pin(self: bpy.types.PropertyGroup) -> int:
    """The pin list's highlighted row: the pin the panel shows (-1, no row, when none is)."""
    pose_bone = active.shown_pin(bpy.context, self.id_data)
    return -1 if pose_bone is None else self.id_data.pose.bones.find(pose_bone.name)


def _set_active_pin(self: bpy.types.PropertyGroup, index: int) -> None:
    """A click on a row selects that pinned bone (the list has no state of its own to drift)."""
    bones = self.id_data.pose.bones
    if 0 <= index < len(bones) and bone_target(bones[index]) is not None:
        active.show_pin(bpy.context, self.id_data, bones[index])


class EWBIK_PG_armature(bpy.types.PropertyGroup):
    """Solver settings of one armature object."""

    live: BoolProperty(
        name="Live",
        description="Solve whenever a target or the armature changes, and on frame change",
        default=True,
        update=settings_changed,
    )
    iterations: IntProperty(
        name="Iterations",
        description="At most this many solver iterations per live update and per baked frame",
        min=1,
        soft_max=200,
        max=10000,
        default=_SOLVER_DEFAULTS["iterations"],
        update=settings_changed,
    )
    time_budget_ms: FloatProperty(
        name="Time Budget (ms)",
        description="Milliseconds a live update may spend before showing the pose; it keeps refining "
        "afterwards (0 = no limit)",
        min=0.0,
        soft_max=50.0,
        default=10.0,
        update=settings_changed,
    )
    tolerance: FloatProperty(
        name="Tolerance",
        description="Stop early when every pin is this close to its target (a distance in the scene, "
        "whatever the armature's scale)",
        subtype="DISTANCE",
        unit="LENGTH",
        min=0.0,
        default=_SOLVER_DEFAULTS["tolerance"],
        precision=6,
        update=settings_changed,
    )
    dampening: FloatProperty(
        name="Max Turn per Step",
        description="Dampening: the most one bone turns in one solver step; smaller is smoother and "
        "spreads motion along the chain, larger reaches far targets in fewer steps",
        subtype="ANGLE",
        min=math.radians(0.1),
        max=math.pi,
        default=_SOLVER_DEFAULTS["dampening"],
        update=settings_changed,
    )
    stabilization_passes: IntProperty(
        name="Stabilization Passes",
        description="Checks per step that undo a bone's turn when it makes the pose worse, which stops "
        "jitter (0 = off)",
        min=0,
        max=4,
        default=_SOLVER_DEFAULTS["stabilization_passes"],
        update=settings_changed,
    )
    translate_root: BoolProperty(
        name="Move Root",
        description="Let the solver move the root bone (hips) as well as rotate it, so the body can "
        "crouch, squat and lean toward its targets; off, the hips only turn in place (the first Pin "
        "on a standing body turns this on, see Stand on Pin)",
        default=_SOLVER_DEFAULTS["translate_root"],
        update=settings_changed,
    )
    balance: BoolProperty(
        name="Balance",
        description="Keep the body's centre of mass over its planted feet: the hips shift and the "
        "spine leans back as a hand reaches (needs Move Root and pinned feet; the viewport draws "
        "the centre of mass and the support polygon)",
        default=_SOLVER_DEFAULTS["balance"],
        update=settings_changed,
    )
    strict_limits: BoolProperty(
        name="Strict Limits",
        description="Joint limits always hold. Off, a pin that only a bend past a joint limit reaches is "
        "reached and the limit yields by the least angle (the bone shows red and the status names it)",
        default=_SOLVER_DEFAULTS["strict_limits"],
        update=settings_changed,
    )
    soft_reach: FloatProperty(
        name="Soft Reach",
        description="Share of an arm's or leg's length near full reach within which the limb straightens "
        "gradually instead of snapping straight; a pin in that zone stops a little short (0 = off)",
        min=0.0,
        max=MAX_SOFT_REACH,
        soft_max=0.1,
        subtype="FACTOR",
        default=_SOLVER_DEFAULTS["soft_reach"],
        update=settings_changed,
    )
    show_limits: BoolProperty(
        name="Show Limits",
        description="Draw joint-limit cones in the viewport",
        default=True,
    )
    limits_scope: EnumProperty(
        name="Limits Shown",
        description="Whose joint limits the viewport draws",
        items=(
            ("ACTIVE", "Active", "Only the active bone's limits"),
            ("SELECTED", "Selected", "The limits of the active and the selected bones"),
            ("ALL", "All", "The limits of every limited bone (also in Object Mode)"),
        ),
        default="ACTIVE",
    )
    limits_see_through: BoolProperty(
        name="See Through",
        description="Draw the limits over the rig instead of hidden behind it",
        default=False,
    )
    auto_limits: BoolProperty(
        name="Humanoid Limits on Pin",
        description="When pinning bones of an armature that has no joint limits yet, set the humanoid "
        "preset on the bones it recognises (arms or legs needed), so knees and elbows bend the right way",
        default=True,
    )
    stand_on_pin: BoolProperty(
        name="Stand on Pin",
        description="When the first bones of a standing body are pinned: turn Move Root on and pin the "
        "feet that touch the floor where they stand, planted, so the body crouches and leans on its "
        "legs instead of lifting its feet (not on animated or Rigify-generated rigs)",
        default=True,
    )
    influence: FloatProperty(
        name="Influence",
        description="Blend of the solved pose over the animation underneath, like a constraint's "
        "Influence (0 = the keyed animation plays untouched)",
        subtype="FACTOR",
        min=0.0,
        max=1.0,
        default=1.0,
        update=settings_changed,
    )
    target_follow: EnumProperty(
        name="Targets Follow",
        description="What the target empties made by Pin move with",
        items=(
            (
                "WORLD",
                "World",
                "Targets stay put in the scene: moving the armature object leaves them behind, "
                "so the body reaches back for them",
            ),
            (
                "OBJECT",
                "Armature Object",
                "Targets are children of the armature object: move, turn or scale the "
                "character and they come along, the pose unchanged",
            ),
            (
                "ROOT_BONE",
                "Root Bone",
                "Targets are children of the armature's root bone, which must be locked "
                "so the solver does not move it: move the root bone and they come along",
            ),
        ),
        default="WORLD",
    )
    active_pin_index: IntProperty(
        name="Active Pin",
        description="The pin shown for editing: the active bone's, or the active target's",
        get=_get_active_pin,
        set=_set_active_pin,
    )
    role_mapping: CollectionProperty(
        type=EWBIK_PG_role_row,
        name="Body Roles",
        description="Bones mapped to body roles by hand, for presets where the names are not recognised",
    )
    active_role_index: IntProperty(
        name="Active Mapping Row", description="The mapping row being edited", default=0
    )
    status: StringProperty(name="Status", description="Outcome of the last solve")
    status_is_error: BoolProperty(name="Status Is an Error", description="The last solve failed")


# The SolverSettings fields an armature stores (as EWBIK_PG_armature properties of the same name).
CLASSES = (EWBIK_PG_limit_cone, EWBIK_PG_bone, EWBIK_PG_bone_limits, EWBIK_PG_role_row, EWBIK_PG_armature)


@bpy.app.handlers.persistent
def move_limits_to_bones(_file_path: str) -> None:
    """load_post: a file saved by an earlier version stores joint limits on the pose bones; they
    are moved to the armature's bones, and those that cannot be are reported (and kept)."""
    problems = []
    for obj in bpy.data.objects:
        if obj.type == "ARMATURE" and obj.pose is not None:
            try:
                with batched_updates(obj.data):
                    problems += stored_settings.move_limits_to_bones(obj)
            except Exception as error:  # a handler must never raise: report, the pose bones keep them
                problems.append(f"{obj.name}: {error}")
    if problems:
        bpy.app.timers.register(functools.partial(_report_unmoved, problems), first_interval=0.0)


def _report_unmoved(problems: list[str]) -> None:
    """Timer body (a load handler cannot report): the limits a loaded file keeps on pose bones."""
    for problem in problems:
        messages.report_problem(f"Joint limits left on the pose bone, unused: {problem}")


def register() -> None:
    for cls in CLASSES:
        bpy.utils.register_class(cls)
    bpy.types.Object.ewbik = PointerProperty(type=EWBIK_PG_armature)
    bpy.types.PoseBone.ewbik = PointerProperty(type=EWBIK_PG_bone)
    bpy.types.Bone.ewbik = PointerProperty(type=EWBIK_PG_bone_limits)
    if move_limits_to_bones not in bpy.app.handlers.load_post:
        bpy.app.handlers.load_post.append(move_limits_to_bones)


def unregister() -> None:
    while move_limits_to_bones in bpy.app.handlers.load_post:
        bpy.app.handlers.load_post.remove(move_limits_to_bones)
    del bpy.types.Bone.ewbik
    del bpy.types.PoseBone.ewbik
    del bpy.types.Object.ewbik
    for cls in reversed(CLASSES):
        bpy.utils.unregister_class(cls)
