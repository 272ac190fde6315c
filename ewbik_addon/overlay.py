"""Joint-limit cones in the 3D viewport, and a gizmo to drag the active cone's axis.

Blender never runs draw handlers or gizmo setup without a window, so everything
that decides *what* is drawn lives in plain functions returning world-space
polylines; the draw handler and the gizmo only feed them the context. Limits live
in a bone's rest frame as placed by its parent's current pose (INTERFACE.md), so
that frame is where the cones are drawn: on a sphere around the bone's head whose
radius is the bone's length, i.e. exactly where the bone's tail may go.
"""

import math

import bpy
import gpu
from gpu_extras.batch import batch_for_shader
from mathutils import Matrix, Vector

from .active import is_selected
from .active import active_armature
from ..solver.kusudama import Kusudama, LimitCone, TwistLimit

SEGMENTS = 64
TWIST_ARC_SCALE = 0.3
LINE_WIDTH = 2.0
ACTIVE_LINE_WIDTH = 3.0
COLORS = {
    "cone": (0.25, 0.75, 1.0, 0.9),
    "active_cone": (1.0, 0.65, 0.1, 1.0),
    "tangent": (0.3, 1.0, 0.55, 0.9),
    "twist": (1.0, 0.35, 0.6, 0.9),
}
DIM = 0.45
HEAD_TOLERANCE = 1e-5
_EPS = 1e-9

_draw_handle = None


def limit_frame(obj, pose_bone):
    """World matrix of the frame the bone's limits live in: its rest frame under the parent's pose.

    Placed at the bone's posed head, which its own location (unless connected) moves too.
    """
    bone = pose_bone.bone
    if pose_bone.parent is None:
        local = bone.matrix_local.copy()
    else:
        local = pose_bone.parent.matrix @ bone.parent.matrix_local.inverted() @ bone.matrix_local
    local.translation = pose_bone.head
    return obj.matrix_world @ local


def _perpendicular_basis(axis):
    """Two unit vectors completing `axis` to a right-handed orthonormal basis."""
    helper = Vector((1.0, 0.0, 0.0)) if abs(axis.x) < 0.9 else Vector((0.0, 0.0, 1.0))
    u = axis.cross(helper).normalized()
    return u, axis.cross(u)


def circle_directions(axis, radius, segments=SEGMENTS):
    """Unit directions at angle `radius` from `axis`, one closed loop (first point repeated)."""
    axis = Vector(axis).normalized()
    u, v = _perpendicular_basis(axis)
    ring = []
    for i in range(segments + 1):
        phi = 2.0 * math.pi * i / segments
        ring.append(math.cos(radius) * axis + math.sin(radius) * (math.cos(phi) * u + math.sin(phi) * v))
    return ring


def kusudama(settings):
    """The solver's Kusudama for a bone's stored limits; an inverted twist range is left out."""
    cones = [
        LimitCone(tuple(Vector(cone.direction).normalized()), cone.radius)
        for cone in settings.cones
        if Vector(cone.direction).length > _EPS
    ]
    twist = None
    if settings.use_twist_limit and settings.twist_min <= settings.twist_max:
        twist = TwistLimit(settings.twist_min, settings.twist_max)
    return Kusudama(cones, twist)


def bridges(cones):
    """[(a, b, tangent direction, tangent radius)] for each tangent cone joining consecutive cones."""
    result = []
    for first, second in zip(cones, cones[1:]):
        directions, radii = Kusudama([first, second]).tangent_cones()
        for direction, radius in zip(directions, radii):
            result.append((Vector(first.direction), Vector(second.direction), Vector(direction), float(radius)))
    return result


def _slerp_unit(u, w, s):
    """Point `s` of the way along the shorter great-circle arc from unit `u` to unit `w`."""
    angle = u.angle(w)
    if angle < _EPS:
        return u.copy()
    return (math.sin((1.0 - s) * angle) * u + math.sin(s * angle) * w) / math.sin(angle)


def tangent_arc_directions(tangent, radius, a, b, segments=SEGMENTS // 2):
    """The part of a tangent cone's circle that outlines the bridge between cones `a` and `b`.

    The tangent circle touches cone `a` where it is crossed by the great circle
    from the tangent axis to `a` (same for `b`); the outline runs between those
    two touch points on the side facing the bridged region.
    """
    tangent = Vector(tangent).normalized()
    toward_a = (Vector(a) - Vector(a).dot(tangent) * tangent).normalized()
    toward_b = (Vector(b) - Vector(b).dot(tangent) * tangent).normalized()
    return [
        math.cos(radius) * tangent + math.sin(radius) * _slerp_unit(toward_a, toward_b, i / segments)
        for i in range(segments + 1)
    ]


def twist_arc_directions(twist_min, twist_max, centre, segments=SEGMENTS // 2):
    """Where the bone's X axis may point under the twist limit when it swings to `centre`.

    The solver measures twist in a frame whose Y axis is the centre of the allowed
    region (the rest +Y turned there by the shortest arc); twisting by angle t about
    +Y takes +X to (cos t, 0, -sin t).
    """
    frame = Vector((0.0, 1.0, 0.0)).rotation_difference(Vector(centre))
    return [
        frame @ Vector((math.cos(t), 0.0, -math.sin(t)))
        for t in (twist_min + (twist_max - twist_min) * i / segments for i in range(segments + 1))
    ]


def bone_limit_polylines(obj, pose_bone, active_cone=-1):
    """World-space polylines [(kind, [Vector, ...]), ...] outlining one bone's joint limits.

    Kinds: "cone" (or "active_cone") boundary circles, "tangent" arcs bridging
    consecutive cones (the kusudama's outline between them), "twist" (the twist
    range as an arc at the head, with spokes to its ends).
    """
    frame = limit_frame(obj, pose_bone)
    length = pose_bone.length
    head = frame.to_translation()
    limits = kusudama(pose_bone.ewbik)

    def on_sphere(directions, scale=length):
        return [frame @ (d * scale) for d in directions]

    polylines = []
    for index, cone in enumerate(limits.cones):
        kind = "active_cone" if index == active_cone else "cone"
        polylines.append((kind, on_sphere(circle_directions(cone.direction, cone.radius))))
    for a, b, tangent, radius in bridges(limits.cones):
        polylines.append(("tangent", on_sphere(tangent_arc_directions(tangent, radius, a, b))))
    if limits.twist is not None:
        twist = limits.twist
        arc = twist_arc_directions(twist.min, twist.max, limits.centre)
        polylines.append(("twist", [head, *on_sphere(arc, TWIST_ARC_SCALE * length), head]))
    return polylines


def bones_to_draw(obj, selected_only):
    """Visible pose bones whose limits the overlay shows: all limited ones, or only the selected ones."""
    for pose_bone in obj.pose.bones:
        settings = pose_bone.ewbik
        if not (len(settings.cones) or settings.use_twist_limit) or pose_bone.bone.hide:
            continue
        if selected_only and not is_selected(pose_bone):
            continue
        yield pose_bone


def armature_limit_polylines(obj):
    """[(kind, emphasised, points)] for the armature: selected bones emphasised, active cone marked.

    With `show_limits` off only the selected bones are drawn (while in pose mode),
    so the limits being edited stay visible.
    """
    show_all = obj.ewbik.show_limits
    if obj.mode == "EDIT" or (not show_all and obj.mode != "POSE"):
        return []
    active = obj.pose.bones.get(obj.data.bones.active.name) if obj.data.bones.active else None
    result = []
    for pose_bone in bones_to_draw(obj, selected_only=not show_all):
        emphasised = obj.mode == "POSE" and (is_selected(pose_bone) or pose_bone == active)
        active_cone = pose_bone.ewbik.active_cone_index if pose_bone == active else -1
        for kind, points in bone_limit_polylines(obj, pose_bone, active_cone):
            result.append((kind, emphasised, points))
    return result


def draw_polylines(polylines, viewport_size):
    """Draw [(kind, emphasised, points)] with the current view and projection matrices."""
    segments = {}
    for kind, emphasised, points in polylines:
        segments.setdefault((kind, emphasised), []).extend(p for a, b in zip(points, points[1:]) for p in (a, b))
    shader = gpu.shader.from_builtin("POLYLINE_UNIFORM_COLOR")
    gpu.state.blend_set("ALPHA")
    gpu.state.depth_test_set("NONE")
    shader.bind()
    shader.uniform_float("viewportSize", viewport_size)
    for (kind, emphasised), positions in segments.items():
        color = COLORS[kind] if emphasised else (*COLORS[kind][:3], COLORS[kind][3] * DIM)
        shader.uniform_float("color", color)
        shader.uniform_float("lineWidth", ACTIVE_LINE_WIDTH if emphasised else LINE_WIDTH)
        batch_for_shader(shader, "LINES", {"pos": positions}).draw(shader)
    gpu.state.blend_set("NONE")


def draw_limits_overlay():
    """SpaceView3D POST_VIEW callback: the active armature's limits, unless overlays are hidden."""
    space = bpy.context.space_data
    if space is not None and not space.overlay.show_overlays:
        return
    obj = active_armature(bpy.context)
    if obj is None:
        return
    polylines = armature_limit_polylines(obj)
    if polylines:
        draw_polylines(polylines, gpu.state.viewport_get()[2:])


def cone_handle_point(frame, direction, length):
    """World position of the gizmo that drags a cone: its axis, one bone length from the head."""
    return frame @ (Vector(direction).normalized() * length)


def direction_from_point(frame, point):
    """Cone axis in the bone's rest frame pointing from the head at a dragged world point.

    Returns None when the point sits on the head (no direction to take).
    """
    local = frame.inverted() @ Vector(point)
    if local.length < HEAD_TOLERANCE:
        return None
    return local.normalized()


def active_cone(context):
    """(armature, pose bone, cone) of the cone the gizmo edits, or None."""
    obj = active_armature(context)
    if obj is None or obj.mode != "POSE" or not obj.ewbik.show_limits:
        return None
    pose_bone = context.active_pose_bone
    if pose_bone is None or pose_bone.id_data != obj:
        return None
    cones = pose_bone.ewbik.cones
    index = pose_bone.ewbik.active_cone_index
    if not 0 <= index < len(cones):
        return None
    return obj, pose_bone, cones[index]


def gizmo_offset():
    """Where the drag gizmo sits, relative to the active bone's head (world axes)."""
    found = active_cone(bpy.context)
    if found is None:
        return (0.0, 0.0, 0.0)
    obj, pose_bone, cone = found
    frame = limit_frame(obj, pose_bone)
    return tuple(cone_handle_point(frame, cone.direction, pose_bone.length) - frame.to_translation())


def set_gizmo_offset(offset):
    """Point the active cone at the gizmo dragged to `offset` from the bone's head."""
    found = active_cone(bpy.context)
    if found is None:
        return
    obj, pose_bone, cone = found
    frame = limit_frame(obj, pose_bone)
    direction = direction_from_point(frame, frame.to_translation() + Vector(offset))
    if direction is not None:
        cone.direction = direction


class EWBIK_GGT_cone_direction(bpy.types.GizmoGroup):
    """Drag the active cone's axis of the active pose bone in the viewport."""

    bl_idname = "EWBIK_GGT_cone_direction"
    bl_label = "EWBIK Cone Direction"
    bl_space_type = "VIEW_3D"
    bl_region_type = "WINDOW"
    bl_options = {"3D", "PERSISTENT"}

    @classmethod
    def poll(cls, context):
        return active_cone(context) is not None

    def setup(self, context):
        gizmo = self.gizmos.new("GIZMO_GT_move_3d")
        gizmo.draw_options = {"FILL", "ALIGN_VIEW"}
        gizmo.color = COLORS["active_cone"][:3]
        gizmo.alpha = 0.6
        gizmo.color_highlight = (1.0, 1.0, 1.0)
        gizmo.alpha_highlight = 1.0
        gizmo.scale_basis = 0.12
        gizmo.target_set_handler("offset", get=gizmo_offset, set=set_gizmo_offset)
        self.direction_gizmo = gizmo

    def draw_prepare(self, context):
        found = active_cone(context)
        if found is not None:
            obj, pose_bone, _cone = found
            self.direction_gizmo.matrix_basis = Matrix.Translation(limit_frame(obj, pose_bone).to_translation())


def register():
    global _draw_handle
    bpy.utils.register_class(EWBIK_GGT_cone_direction)
    _draw_handle = bpy.types.SpaceView3D.draw_handler_add(draw_limits_overlay, (), "WINDOW", "POST_VIEW")


def unregister():
    global _draw_handle
    if _draw_handle is not None:
        bpy.types.SpaceView3D.draw_handler_remove(_draw_handle, "WINDOW")
        _draw_handle = None
    bpy.utils.unregister_class(EWBIK_GGT_cone_direction)
