"""Handles that shape the active bone's Kusudama in the viewport (Blender's Python gizmo API).

Per cone a handle at its centre (drag it over the sphere) and one on its rim (drag it to change
the radius); with a twist limit, handles at both ends of the twist dial. A drag is a `LimitEdit`:
it remembers the limits before, writes every mouse move straight into the bone's properties (so
the overlay and the live solve follow), snaps to 5 degree steps with Ctrl, says in the header what
it is setting, and on release pushes one undo step, or on Esc / right-click puts the limits back.
The gizmo only turns mouse positions into view rays; everything else is in `LimitEdit` and the
plain functions here, which the tests drive directly (no window needed).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import bpy
from bpy_extras import view3d_utils
from mathutils import Matrix, Vector

from ..com.active import active_limit_bone
from ..com.armature_checks import limits_lock
from ..com.limit_settings import has_limits, kusudama_of, limits_dict, set_limits
from ..com.stored_settings import stored_bone_limits
from ..limits import body_angles
from .overlay import COLORS, TWIST_ARC_SCALE, limit_frame, twist_directions

if TYPE_CHECKING:
    import numpy as np

SNAP_STEP = math.radians(5.0)
NEW_CONE_RADIUS = math.radians(20.0)
HANDLE_SIZE = 0.09
HANDLE_COLORS = {
    "centre": COLORS["active_cone"][:3],
    "radius": COLORS["outline"][:3],
    "twist_min": COLORS["twist"][:3],
    "twist_max": COLORS["twist"][:3],
}
UNDO_MESSAGE = "Edit Joint Limit"
_Y = Vector((0.0, 1.0, 0.0))


def snapped(angle: float, snap: bool) -> float:
    return round(angle / SNAP_STEP) * SNAP_STEP if snap else angle


def sphere_direction(
    frame: Matrix, length: float, origin: Vector, vector: Vector, beside: bool = True
) -> Vector | None:
    """Rest-frame direction of where a view ray meets the bone's sphere (nearest hit).

    A ray passing beside the sphere gives the direction of its point closest to the head, so a
    drag carried past the silhouette keeps moving along the rim; with `beside` False it gives
    None (a click that missed the sphere).
    """
    inverse = frame.inverted()
    start = inverse @ Vector(origin)
    along = (inverse.to_3x3() @ Vector(vector)).normalized()
    middle = -start.dot(along)
    closest = start + along * middle
    if closest.length < length:
        closest = start + along * (middle - math.sqrt(length * length - closest.length_squared))
    elif not beside:
        return None
    return closest.normalized() if closest.length > 1e-12 else None


def dial_twist(centre: np.ndarray, frame: Matrix, origin: Vector, vector: Vector) -> float | None:
    """Twist angle where a view ray meets the twist dial's plane (through the head, across `centre`).

    The inverse of `overlay.twist_directions`: the X axis at twist t is Rf (cos t, 0, -sin t),
    Rf the shortest arc from +Y to the centre. None when the ray runs along the plane.
    """
    inverse = frame.inverted()
    start = inverse @ Vector(origin)
    along = inverse.to_3x3() @ Vector(vector)
    normal = Vector(centre).normalized()
    if abs(along.dot(normal)) < 1e-9:
        return None
    point = start - along * (start.dot(normal) / along.dot(normal))
    in_dial = _Y.rotation_difference(normal).to_matrix().transposed() @ point
    return math.atan2(-in_dial.z, in_dial.x)


def handle_points(obj: bpy.types.Object, pose_bone: bpy.types.PoseBone) -> list[tuple[str, int, Vector]]:
    """[(kind, cone index, world position)] of the handles of one bone's limits."""
    frame = limit_frame(obj, pose_bone)
    length = pose_bone.length
    kusudama = kusudama_of(pose_bone.bone.ewbik)
    handles = []
    for index, cone in enumerate(kusudama.cones):
        axis = Vector(cone.direction)
        rim = axis * math.cos(cone.radius) + axis.orthogonal().normalized() * math.sin(cone.radius)
        handles.append(("centre", index, frame @ (axis * length)))
        handles.append(("radius", index, frame @ (rim * length)))
    if kusudama.twist is not None:
        ends = twist_directions(kusudama.twist.min, kusudama.twist.max, kusudama.centre, segments=1)
        for kind, end in zip(("twist_min", "twist_max"), ends):
            handles.append((kind, -1, frame @ (Vector(end) * TWIST_ARC_SCALE * length)))
    return handles


def _nearest_unwrapped(angle: float, near: float) -> float:
    return angle + 2.0 * math.pi * round((near - angle) / (2.0 * math.pi))


class LimitEdit:
    """One drag of one handle: which value it edits, the limits before it, the value shown."""

    def __init__(self, obj: bpy.types.Object, bone_name: str, kind: str, cone_index: int = -1) -> None:
        self.obj, self.bone_name, self.kind, self.cone_index = obj, bone_name, kind, cone_index
        settings = self.settings
        self.before = limits_dict(settings)
        self.before_index = settings.active_cone_index
        if cone_index >= 0:
            settings.active_cone_index = cone_index

    @property
    def pose_bone(self) -> bpy.types.PoseBone:
        return self.obj.pose.bones[self.bone_name]

    @property
    def settings(self) -> bpy.types.PropertyGroup:
        return self.pose_bone.bone.ewbik

    def drag_ray(self, origin: Vector, vector: Vector, snap: bool = False) -> None:
        """Follow the mouse's view ray: the handle goes where the ray meets its sphere or dial."""
        pose_bone = self.pose_bone
        frame = limit_frame(self.obj, pose_bone)
        if self.kind.startswith("twist"):
            twist = dial_twist(kusudama_of(self.settings).centre, frame, origin, vector)
            if twist is not None:
                self.set_twist(twist, snap)
            return
        direction = sphere_direction(frame, pose_bone.length, origin, vector)
        if direction is not None:
            self.set_direction(direction, snap)

    def set_direction(self, direction: Sequence[float], snap: bool = False) -> None:
        """A rest-frame direction the handle was dragged to: the cone's centre, or a point of its rim."""
        cone = self.settings.cones[self.cone_index]
        direction = Vector(direction).normalized()
        if self.kind == "centre":
            bone = self.pose_bone.bone
            flex, abduct = body_angles.flex_abduct(bone, direction)
            cone.direction = body_angles.direction_from(bone, snapped(flex, snap), snapped(abduct, snap))
        else:
            cone.radius = min(math.pi, snapped(Vector(cone.direction).normalized().angle(direction), snap))

    def set_twist(self, twist: float, snap: bool = False) -> None:
        """The dial's end moved to `twist` (radians); min never passes max nor max min."""
        settings = self.settings
        if self.kind == "twist_min":
            value = snapped(_nearest_unwrapped(twist, settings.twist_min), snap)
            settings.twist_min = min(value, settings.twist_max)
        else:
            value = snapped(_nearest_unwrapped(twist, settings.twist_max), snap)
            settings.twist_max = max(value, settings.twist_min)

    def header(self) -> str:
        """What the header shows while dragging."""
        settings = self.settings
        hint = "   Ctrl: 5\u00b0 steps   Esc/Right-click: cancel"
        if self.kind == "centre":
            flex, abduct = body_angles.flex_abduct(
                self.pose_bone.bone, settings.cones[self.cone_index].direction
            )
            return (
                f"Cone {self.cone_index + 1} centre: flex {math.degrees(flex):.1f}\u00b0, abduct {math.degrees(abduct):.1f}\u00b0"
                + hint
            )
        if self.kind == "radius":
            return (
                f"Cone {self.cone_index + 1} radius: {math.degrees(settings.cones[self.cone_index].radius):.1f}\u00b0"
                + hint
            )
        value = settings.twist_min if self.kind == "twist_min" else settings.twist_max
        return f"Twist {self.kind[6:]}: {math.degrees(value):.1f}\u00b0" + hint

    def cancel(self) -> None:
        """Put the bone's limits back as they were when the drag began."""
        settings = self.settings
        set_limits(settings, self.before)
        settings.active_cone_index = self.before_index

    def commit(self) -> None:
        """One undo step for the whole drag."""
        bpy.ops.ed.undo_push(message=UNDO_MESSAGE)


def insertion_index(cones: bpy.types.bpy_prop_collection, direction: Sequence[float]) -> int:
    """Where a new cone at `direction` goes in the stored chain: where it lengthens the chain least."""
    centres = [Vector(cone.direction) for cone in cones]
    new = Vector(direction).normalized()

    def added(position: int) -> float:
        before = centres[position - 1] if position > 0 else None
        after = centres[position] if position < len(centres) else None
        cost = sum(new.angle(c, math.pi) for c in (before, after) if c is not None)
        return cost - (before.angle(after, math.pi) if before is not None and after is not None else 0.0)

    return min(range(len(centres) + 1), key=added)


def add_cone(
    settings: bpy.types.PropertyGroup, direction: Sequence[float], radius: float = NEW_CONE_RADIUS
) -> int:
    """Add a cone centred on `direction` where it fits the chain; it becomes the active cone."""
    index = insertion_index(settings.cones, direction)
    cone = settings.cones.add()
    cone.direction = Vector(direction).normalized()
    cone.radius = radius
    settings.cones.move(len(settings.cones) - 1, index)
    settings.active_cone_index = index
    return index


def remove_cone_at(settings: bpy.types.PropertyGroup, direction: Sequence[float]) -> int | None:
    """Remove the cone whose centre is nearest to `direction`; returns its index or None."""
    if not len(settings.cones):
        return None
    wanted = Vector(direction).normalized()
    index = min(
        range(len(settings.cones)),
        key=lambda i: wanted.angle(Vector(settings.cones[i].direction).normalized(), math.pi),
    )
    settings.cones.remove(index)
    settings.active_cone_index = max(0, min(index, len(settings.cones) - 1))
    return index


def view_ray(context: bpy.types.Context, event: bpy.types.Event) -> tuple[Vector, Vector]:
    """(origin, direction) of the view ray under the mouse."""
    coordinates = (event.mouse_region_x, event.mouse_region_y)
    region, view = context.region, context.region_data
    return (
        view3d_utils.region_2d_to_origin_3d(region, view, coordinates),
        view3d_utils.region_2d_to_vector_3d(region, view, coordinates),
    )


def octahedron() -> list[tuple[float, ...]]:
    """The handles' shape: 8 triangles of a unit octahedron, as a flat list of corners."""
    points = [Vector(p) for p in ((1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1))]
    faces = [(0, 2, 4), (2, 1, 4), (1, 3, 4), (3, 0, 4), (2, 0, 5), (1, 2, 5), (3, 1, 5), (0, 3, 5)]
    return [tuple(points[i]) for face in faces for i in face]


class EWBIK_GT_limit_handle(bpy.types.Gizmo):
    """One draggable handle of a Kusudama (a cone's centre or rim, or an end of the twist dial)."""

    bl_idname = "EWBIK_GT_limit_handle"
    __slots__ = ("cone_index", "edit", "kind", "shape")

    def setup(self) -> None:
        self.shape = self.new_custom_shape("TRIS", octahedron())
        self.edit = None

    def draw(self, context: bpy.types.Context) -> None:
        self.draw_custom_shape(self.shape)

    def draw_select(self, context: bpy.types.Context, select_id: int) -> None:
        self.draw_custom_shape(self.shape, select_id=select_id)

    def invoke(self, context: bpy.types.Context, event: bpy.types.Event) -> set[str]:
        pose_bone = active_limit_bone(context)
        if pose_bone is None:
            return {"CANCELLED"}
        self.edit = LimitEdit(pose_bone.id_data, pose_bone.name, self.kind, self.cone_index)
        context.area.header_text_set(self.edit.header())
        return {"RUNNING_MODAL"}

    def modal(self, context: bpy.types.Context, event: bpy.types.Event, tweak: set[str]) -> set[str]:
        origin, vector = view_ray(context, event)
        self.edit.drag_ray(origin, vector, snap="SNAP" in tweak or event.ctrl)
        context.area.header_text_set(self.edit.header())
        return {"RUNNING_MODAL"}

    def exit(self, context: bpy.types.Context, cancel: bool) -> None:
        context.area.header_text_set(None)
        if self.edit is not None:
            self.edit.cancel() if cancel else self.edit.commit()
            self.edit = None


def editable_bone(context: bpy.types.Context) -> bpy.types.PoseBone | None:
    """The active bone whose handles are shown, or None (limits hidden, not in pose mode, no limits,
    or limits that cannot be changed: `limits_lock`)."""
    pose_bone = active_limit_bone(context)
    if (
        pose_bone is None
        or not pose_bone.id_data.ewbik.show_limits
        or not has_limits(stored_bone_limits(pose_bone.bone))
        or limits_lock(pose_bone.id_data) is not None
    ):
        return None
    return pose_bone


class EWBIK_GGT_limit_handles(bpy.types.GizmoGroup):
    """The active bone's Kusudama handles."""

    bl_idname = "EWBIK_GGT_limit_handles"
    bl_label = "EWBIK Limit Handles"
    bl_space_type = "VIEW_3D"
    bl_region_type = "WINDOW"
    bl_options = {"3D", "PERSISTENT"}

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        return editable_bone(context) is not None

    def setup(self, context: bpy.types.Context) -> None:
        self.refresh(context)

    def refresh(self, context: bpy.types.Context) -> None:
        pose_bone = editable_bone(context)
        if pose_bone is not None:
            self._sync(handle_points(pose_bone.id_data, pose_bone))

    def draw_prepare(self, context: bpy.types.Context) -> None:
        pose_bone = editable_bone(context)
        if pose_bone is not None:
            self._sync(handle_points(pose_bone.id_data, pose_bone))

    def _sync(self, handles: Sequence[tuple[str, int, Vector]]) -> None:
        """One gizmo per handle, placed on it; gizmos are reused, added or dropped at the end only."""
        while len(self.gizmos) > len(handles):
            self.gizmos.remove(self.gizmos[-1])
        while len(self.gizmos) < len(handles):
            gizmo = self.gizmos.new(EWBIK_GT_limit_handle.bl_idname)
            gizmo.alpha, gizmo.alpha_highlight = 0.8, 1.0
            gizmo.color_highlight = (1.0, 1.0, 1.0)
            gizmo.scale_basis = HANDLE_SIZE
        for gizmo, (kind, index, point) in zip(self.gizmos, handles):
            gizmo.kind, gizmo.cone_index = kind, index
            gizmo.color = HANDLE_COLORS[kind]
            gizmo.matrix_basis = Matrix.Translation(point)


CLASSES = (EWBIK_GT_limit_handle, EWBIK_GGT_limit_handles)
register, unregister = bpy.utils.register_classes_factory(CLASSES)
