"""Joint limits in the 3D viewport: each shown bone's Kusudama as a shaded sphere.

Limits live in a bone's rest frame as placed by its parent's current pose (docs/INTERFACE.md), so
that frame is where they are drawn: on a sphere around the bone's head whose radius is the
bone's length, i.e. exactly where the bone's tail may go. The allowed region (cones and the
bridges between them) is filled translucent, the forbidden rest dimmed, the boundary outlined
(`kusudama_mesh`, cut along the solver's own membership test); the bone's current direction is
marked, red when the bone is beyond its limits, and every limited bone at or beyond its limits
is highlighted (`limit_status`).

Blender never runs draw handlers without a window, so deciding *what* is drawn is done by plain
functions returning world-space numpy geometry; the draw handler only turns it into GPU batches,
which are kept until the shown bones, their limits or the pose change.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import bpy
import gpu
import numpy as np
from gpu_extras.batch import batch_for_shader
from mathutils import Matrix, Vector

from ..bridge.rig_cache import rig_for
from ..com.active import active_armature, is_selected
from ..com.limit_settings import has_limits, kusudama_of, limits_key
from ..com.stored_settings import stored_bone_limits
from ..limits import limit_status as status_module
from ..limits.limit_status import limit_status
from ..rigs.balance_body import balance_shape
from .kusudama_mesh import region_mesh

SEGMENTS = 64
TWIST_ARC_SCALE = 0.3
LINE_WIDTH = 2.0
HIGHLIGHT_WIDTH = 5.0
COLORS = {
    "allowed": (0.3, 0.85, 0.45, 0.45),
    "forbidden": (0.05, 0.05, 0.08, 0.12),  # a faint veil: the limb inside stays visible
    "outline": (0.45, 1.0, 0.6, 1.0),
    "active_cone": (1.0, 0.65, 0.1, 1.0),
    "twist": (1.0, 0.35, 0.6, 0.9),
    "direction": (1.0, 1.0, 1.0, 1.0),
    "outside": (1.0, 0.12, 0.08, 1.0),
    "at_limit": (1.0, 0.55, 0.0, 0.9),
    "beyond": (1.0, 0.12, 0.08, 0.9),
    "support": (0.3, 0.7, 1.0, 0.9),
    "centre_of_mass": (1.0, 0.95, 0.2, 1.0),
}
FILLS = ("forbidden", "allowed")
LINES = ("outline", "active_cone", "twist", "direction", "outside", "support", "centre_of_mass")
CROSS_SIZE = 0.04  # half the centre of mass cross's arms, x the rig's size
HIGHLIGHTS = ("at_limit", "beyond")
_MAX_REGIONS = 512
FINE, COARSE = 4, 3
FINE_UP_TO = 4  # bones shown; more get the coarser sphere (a quarter of the triangles)

_draw_handle = None
_regions = {}
_batches = {}


def limit_frame(obj: bpy.types.Object, pose_bone: bpy.types.PoseBone) -> Matrix:
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


def circle_directions(
    axis: Sequence[float] | np.ndarray, radius: float, segments: int = SEGMENTS
) -> np.ndarray:
    """(segments + 1, 3) unit directions at angle `radius` from `axis`, a closed loop."""
    axis = np.asarray(axis, dtype=float)
    axis = axis / np.linalg.norm(axis)
    u = np.array(Vector(axis).orthogonal().normalized())
    v = np.cross(axis, u)
    phi = np.linspace(0.0, 2.0 * math.pi, segments + 1)[:, None]
    return math.cos(radius) * axis + math.sin(radius) * (np.cos(phi) * u + np.sin(phi) * v)


def twist_directions(
    twist_min: float, twist_max: float, centre: np.ndarray, segments: int = SEGMENTS // 2
) -> np.ndarray:
    """Where the bone's X axis may point under the twist limit when it swings to `centre`.

    The solver measures twist in a frame whose Y axis is the centre of the allowed region (the
    rest +Y turned there by the shortest arc); twisting by t about +Y takes +X to (cos t, 0, -sin t).
    """
    frame = np.array(Vector((0.0, 1.0, 0.0)).rotation_difference(Vector(centre)).to_matrix())
    t = np.linspace(twist_min, twist_max, segments + 1)
    return np.stack([np.cos(t), np.zeros_like(t), -np.sin(t)], axis=1) @ frame.T


def local_shapes(settings: bpy.types.PropertyGroup, subdivisions: int = FINE) -> dict[str, np.ndarray]:
    """{kind: array} of a bone's limits in its limit frame on the unit sphere, made once per limits.

    Fills and outline from `region_mesh`; the twist dial's arc at `TWIST_ARC_SCALE`.
    """
    key = (limits_key(settings), subdivisions)
    found = _regions.get(key)
    if found is None:
        if len(_regions) >= _MAX_REGIONS:
            _regions.clear()
        kusudama = kusudama_of(settings)
        found = {}
        if kusudama.cones:
            region = region_mesh(kusudama, subdivisions)
            found = {"allowed": region.allowed, "forbidden": region.forbidden, "outline": region.outline}
        if kusudama.twist is not None:
            arc = TWIST_ARC_SCALE * twist_directions(kusudama.twist.min, kusudama.twist.max, kusudama.centre)
            found["twist"] = np.concatenate([_polyline(arc), [[np.zeros(3), arc[0]], [np.zeros(3), arc[-1]]]])
        _regions[key] = found
    return found


def _polyline(points: np.ndarray) -> np.ndarray:
    """Consecutive points as (k, 2, 3) segments."""
    return np.stack([points[:-1], points[1:]], axis=1)


def shown_bones(obj: bpy.types.Object) -> list[bpy.types.PoseBone]:
    """Pose bones whose limits are drawn: the active bone, the selected ones or all (the scope)."""
    settings = obj.ewbik
    scope = settings.limits_scope
    if not settings.show_limits or obj.mode == "EDIT" or (obj.mode != "POSE" and scope != "ALL"):
        return []
    active = obj.data.bones.active
    active_name = active.name if active is not None else None
    return [
        pose_bone
        for pose_bone in obj.pose.bones
        if has_limits(stored_bone_limits(pose_bone.bone))
        and not pose_bone.bone.hide
        and (
            scope == "ALL"
            or pose_bone.name == active_name
            or (scope == "SELECTED" and is_selected(pose_bone))
        )
    ]


def bone_geometry(
    obj: bpy.types.Object,
    pose_bone: bpy.types.PoseBone,
    beyond: bool,
    active_cone: int = -1,
    subdivisions: int = FINE,
) -> dict[str, np.ndarray]:
    """{kind: array} of one bone's limits in world space: fills (k, 3, 3), lines (k, 2, 3)."""
    frame = np.array(limit_frame(obj, pose_bone))
    scaled = frame[:3, :3] * pose_bone.length
    head = frame[:3, 3]

    def world(directions: np.ndarray) -> np.ndarray:
        return (directions.reshape(-1, 3) @ scaled.T + head).reshape(directions.shape)

    settings = pose_bone.bone.ewbik
    parts = {kind: world(shape) for kind, shape in local_shapes(settings, subdivisions).items()}
    cones = settings.cones
    if 0 <= active_cone < len(cones) and Vector(cones[active_cone].direction).length > 0.0:
        cone = cones[active_cone]
        parts["active_cone"] = _polyline(world(circle_directions(cone.direction, cone.radius)))
    parts["outside" if beyond else "direction"] = np.array(
        [[head, np.array(obj.matrix_world @ pose_bone.tail)]]
    )
    if "twist" in parts:
        x_axis = np.array((obj.matrix_world @ pose_bone.matrix).to_3x3().col[0].normalized())
        current = head + x_axis * TWIST_ARC_SCALE * pose_bone.length * obj.matrix_world.median_scale
        parts["twist"] = np.concatenate([parts["twist"], [[head, current]]])
    return parts


def active_cone_index(bone: bpy.types.Bone | None) -> int:
    """The bone's active limit cone (-1 for no bone or no limits), read without storing limits."""
    limits = stored_bone_limits(bone) if bone is not None else None
    return limits.active_cone_index if limits is not None else -1


def overlay_geometry(obj: bpy.types.Object) -> dict[str, np.ndarray]:
    """{kind: array} for the armature: every shown bone's limits, the bones at/beyond limits, and
    with balance on its centre of mass and support polygon."""
    if obj.mode == "EDIT":
        return {}
    geometry = limits_geometry(obj) if obj.ewbik.show_limits else {}
    if obj.ewbik.balance:
        geometry.update(balance_geometry(obj))
    return geometry


def balance_geometry(obj: bpy.types.Object) -> dict[str, np.ndarray]:
    """{"centre_of_mass": a cross's three segments, "support": the polygon's edges} in world
    space: the centre of mass on the ground is what balance keeps inside the polygon."""
    rig = rig_for(obj, False)
    com, corners = balance_shape(obj, rig)
    size = CROSS_SIZE * rig.skeleton.unit * obj.matrix_world.median_scale
    geometry = {"centre_of_mass": np.array([[com - axis * size, com + axis * size] for axis in np.eye(3)])}
    if corners is not None:
        geometry["support"] = _polyline(np.vstack([corners, corners[:1]]))
    return geometry


def limits_geometry(obj: bpy.types.Object) -> dict[str, np.ndarray]:
    """{kind: array}: every shown bone's limits, and the bones at/beyond limits."""
    shown = shown_bones(obj)
    status = limit_status(obj)
    beyond = set(status.beyond)
    active = obj.data.bones.active
    merged = {}
    subdivisions = FINE if len(shown) <= FINE_UP_TO else COARSE
    for pose_bone in shown:
        active_cone = active_cone_index(pose_bone.bone) if pose_bone.bone == active else -1
        for kind, part in bone_geometry(
            obj, pose_bone, pose_bone.name in beyond, active_cone, subdivisions
        ).items():
            merged.setdefault(kind, []).append(part)
    for kind, names in (("at_limit", status.at), ("beyond", status.beyond)):
        bones = [obj.pose.bones[name] for name in names if not obj.pose.bones[name].bone.hide]
        if bones:
            merged[kind] = [np.array([[obj.matrix_world @ b.head, obj.matrix_world @ b.tail] for b in bones])]
    return {kind: np.concatenate(parts) for kind, parts in merged.items()}


def geometry_key(obj: bpy.types.Object) -> tuple:
    """What the drawn geometry depends on; equal keys mean the cached batches are still right.

    Pose, limits and selection changes reach it through `limit_status.changes()` (Blender
    re-evaluates a changed armature before it redraws); the overlay's own settings, the active
    bone and its active cone (which change nothing in the depsgraph) are read here.
    """
    settings = obj.ewbik
    active = obj.data.bones.active
    return (
        obj.as_pointer(),
        status_module.changes(),
        obj.mode,
        settings.show_limits,
        settings.balance,
        settings.limits_scope,
        active.name if active is not None else None,
        active_cone_index(active),
        tuple(map(tuple, obj.matrix_world)),
        tuple(map(is_selected, obj.pose.bones)) if settings.limits_scope == "SELECTED" else (),
    )


def _build_batches(
    geometry: dict[str, np.ndarray],
) -> list[tuple[str, gpu.types.GPUShader, gpu.types.GPUBatch]]:
    """GPU batches of the geometry, per kind, with the shader each needs."""
    fill_shader = gpu.shader.from_builtin("UNIFORM_COLOR")
    line_shader = gpu.shader.from_builtin("POLYLINE_UNIFORM_COLOR")
    batches = []
    for kind in FILLS + LINES + HIGHLIGHTS:
        if kind not in geometry:
            continue
        shader = fill_shader if kind in FILLS else line_shader
        positions = geometry[kind].reshape(-1, 3).astype(np.float32)
        batches.append(
            (kind, shader, batch_for_shader(shader, "TRIS" if kind in FILLS else "LINES", {"pos": positions}))
        )
    return batches


def armature_batches(obj: bpy.types.Object) -> list[tuple[str, gpu.types.GPUShader, gpu.types.GPUBatch]]:
    """The armature's batches, rebuilt only when `geometry_key` changes."""
    key = geometry_key(obj)
    found = _batches.get(obj.name_full)
    if found is None or found[0] != key:
        found = _batches[obj.name_full] = (key, _build_batches(overlay_geometry(obj)))
    return found[1]


def draw_batches(
    batches: Iterable[tuple[str, gpu.types.GPUShader, gpu.types.GPUBatch]],
    viewport_size: Sequence[int],
    see_through: bool,
) -> None:
    """Fills without writing depth (so both stay translucent), back faces culled, then lines."""
    gpu.state.blend_set("ALPHA")
    gpu.state.depth_test_set("NONE" if see_through else "LESS_EQUAL")
    gpu.state.depth_mask_set(False)
    for kind, shader, batch in batches:
        shader.bind()
        gpu.state.face_culling_set("BACK" if kind in FILLS else "NONE")
        if kind in HIGHLIGHTS:
            gpu.state.depth_test_set("NONE")
        if kind not in FILLS:
            shader.uniform_float("viewportSize", viewport_size)
            shader.uniform_float("lineWidth", HIGHLIGHT_WIDTH if kind in HIGHLIGHTS else LINE_WIDTH)
        shader.uniform_float("color", COLORS[kind])
        batch.draw(shader)
    gpu.state.face_culling_set("NONE")
    gpu.state.depth_test_set("NONE")
    gpu.state.blend_set("NONE")


def draw_limits_overlay() -> None:
    """SpaceView3D POST_VIEW callback: the active armature's limits, unless overlays are hidden.

    Never raises: a draw callback's exception would be printed on every redraw.
    """
    space = bpy.context.space_data
    if space is not None and not space.overlay.show_overlays:
        return
    obj = active_armature(bpy.context)
    if obj is None:
        return
    try:
        batches = armature_batches(obj)
    except (ValueError, ReferenceError) as error:
        print(f"EWBIK overlay: {error}")
        return
    if batches:
        draw_batches(batches, gpu.state.viewport_get()[2:], obj.ewbik.limits_see_through)


def register() -> None:
    global _draw_handle
    for handlers, handler in status_module.HANDLERS:
        handlers.append(handler)
    _draw_handle = bpy.types.SpaceView3D.draw_handler_add(draw_limits_overlay, (), "WINDOW", "POST_VIEW")


def unregister() -> None:
    global _draw_handle
    if _draw_handle is not None:
        bpy.types.SpaceView3D.draw_handler_remove(_draw_handle, "WINDOW")
        _draw_handle = None
    for handlers, handler in status_module.HANDLERS:
        if handler in handlers:
            handlers.remove(handler)
    _batches.clear()
