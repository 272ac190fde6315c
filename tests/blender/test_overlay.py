"""The limits overlay: world-space geometry checked against Blender's own pose evaluation,
the gizmo's drag mapping, registration, and (when the GPU works headless) real pixels."""

import math
import subprocess
import sys
import textwrap

import bpy
import numpy as np
import pytest
from mathutils import Matrix, Quaternion, Vector

from tests.blender.blender_helpers import (
    addon_module,
    disable_extension,
    enable_extension,
    make_active,
    select_pose_bones,
)

Y = Vector((0.0, 1.0, 0.0))


@pytest.fixture
def overlay():
    return addon_module("ewbik_addon.overlay")


@pytest.fixture
def posed_rig(metarig):
    """The metarig moved, turned and posed, so world, parent pose and rest frames all differ."""
    metarig.location = (1.0, -2.0, 0.5)
    metarig.rotation_euler = (0.2, -0.1, 0.7)
    make_active(metarig)
    bpy.ops.object.mode_set(mode="POSE")
    for name, axis, degrees in (("upper_arm.L", (1.0, 0.0, 0.3), 35.0), ("spine.001", (0.0, 0.0, 1.0), 20.0)):
        pose_bone = metarig.pose.bones[name]
        pose_bone.rotation_mode = "QUATERNION"
        pose_bone.rotation_quaternion = Quaternion(Vector(axis).normalized(), math.radians(degrees))
    metarig.pose.bones["spine"].location = (0.02, 0.05, -0.03)
    metarig.pose.bones["thigh.R"].location = (0.0, 0.04, 0.01)
    bpy.context.view_layer.update()
    return metarig


def set_cones(pose_bone, *cones):
    settings = pose_bone.ewbik
    settings.cones.clear()
    for direction, radius in cones:
        cone = settings.cones.add()
        cone.direction = Vector(direction).normalized()
        cone.radius = radius


def posed_along(obj, pose_bone, rotation):
    """World head and world Y axis of the bone when Blender poses it with this local rotation."""
    pose_bone.rotation_mode = "QUATERNION"
    pose_bone.rotation_quaternion = rotation
    bpy.context.view_layer.update()
    world = obj.matrix_world @ pose_bone.matrix
    return world.to_translation(), (world.to_3x3() @ Y).normalized(), (world.to_3x3() @ Vector((1, 0, 0))).normalized()


def polylines_of(polylines, kind):
    return [points for line_kind, points in polylines if line_kind == kind]


@pytest.mark.parametrize("bone", ["forearm.L", "thigh.R", "spine"])
def test_cone_circle_lies_at_the_cone_radius_around_the_world_axis(overlay, posed_rig, bone):
    pose_bone = posed_rig.pose.bones[bone]
    direction = Vector((0.4, 0.8, -0.3)).normalized()
    radius = math.radians(25.0)
    set_cones(pose_bone, (direction, radius))

    polylines = overlay.bone_limit_polylines(posed_rig, pose_bone)
    circles = polylines_of(polylines, "cone")
    assert len(circles) == 1 and len(circles[0]) > 16
    head, axis, _x = posed_along(posed_rig, pose_bone, Y.rotation_difference(direction))
    for point in circles[0]:
        offset = point - head
        assert offset.length == pytest.approx(pose_bone.length, rel=1e-5)
        assert offset.angle(axis) == pytest.approx(radius, abs=1e-5)
    ring = np.array([tuple(point - head) for point in circles[0][:-1]])
    assert np.ptp(ring @ np.array(axis.orthogonal().normalized())) > pose_bone.length * math.sin(radius)


def test_active_cone_is_marked(overlay, posed_rig):
    pose_bone = posed_rig.pose.bones["forearm.L"]
    set_cones(pose_bone, ((0, 1, 0), 0.4), ((1, 0, 0), 0.3))
    kinds = [kind for kind, _points in overlay.bone_limit_polylines(posed_rig, pose_bone, active_cone=1)]
    assert kinds.count("cone") == 1 and kinds.count("active_cone") == 1
    assert kinds.index("active_cone") == 1


def test_tangent_arcs_touch_both_cones(overlay, posed_rig):
    pose_bone = posed_rig.pose.bones["shin.R"]
    a, radius_a = Vector((0.0, 1.0, 0.0)), math.radians(30.0)
    b, radius_b = Vector((0.0, 0.3, 1.0)).normalized(), math.radians(15.0)
    set_cones(pose_bone, (a, radius_a), (b, radius_b))

    polylines = overlay.bone_limit_polylines(posed_rig, pose_bone)
    arcs = polylines_of(polylines, "tangent")
    assert len(arcs) == 2
    head, world_a, _x = posed_along(posed_rig, pose_bone, Y.rotation_difference(a))
    _head, world_b, _x = posed_along(posed_rig, pose_bone, Y.rotation_difference(b))
    for arc in arcs:
        directions = [(point - head).normalized() for point in arc]
        assert directions[0].angle(world_a) == pytest.approx(radius_a, abs=1e-5)
        assert directions[-1].angle(world_b) == pytest.approx(radius_b, abs=1e-5)
        for direction in directions:
            assert direction.angle(world_a) >= radius_a - 1e-6
            assert direction.angle(world_b) >= radius_b - 1e-6
    middles = [(arc[len(arc) // 2] - head).normalized() for arc in arcs]
    normal = world_a.cross(world_b)
    assert middles[0].dot(normal) * middles[1].dot(normal) < 0.0, "one arc on each side of the cones"


def test_bridges_match_the_reference_tangent_cones(overlay):
    kusudama = addon_module("solver.kusudama")
    cones = [
        kusudama.LimitCone((1.0, 0.0, 0.0), math.radians(30.0)),
        kusudama.LimitCone((0.0, 1.0, 0.0), math.radians(20.0)),
    ]
    bridges = overlay.bridges(cones)
    assert len(bridges) == 2
    found = sorted((tuple(round(c, 6) for c in tangent), radius) for _a, _b, tangent, radius in bridges)
    assert found[0][0] == pytest.approx((-0.087156, 0.087156, -0.992375), abs=1e-6)
    assert found[1][0] == pytest.approx((-0.087156, 0.087156, 0.992375), abs=1e-6)
    assert found[0][1] == pytest.approx(1.134464014, abs=1e-8)


def test_twist_arc_spans_where_the_x_axis_goes_when_twisted(overlay, posed_rig):
    pose_bone = posed_rig.pose.bones["forearm.L"]
    settings = pose_bone.ewbik
    settings.use_twist_limit = True
    settings.twist_min, settings.twist_max = math.radians(-30.0), math.radians(70.0)
    set_cones(pose_bone, ((0.0, 1.0, 0.0), 0.5))

    arcs = polylines_of(overlay.bone_limit_polylines(posed_rig, pose_bone), "twist")
    assert len(arcs) == 1
    head, _axis, x_min = posed_along(posed_rig, pose_bone, Quaternion(Y, settings.twist_min))
    _head, _axis, x_max = posed_along(posed_rig, pose_bone, Quaternion(Y, settings.twist_max))
    arc = arcs[0]
    assert arc[0] == arc[-1] and (arc[0] - head).length < 1e-6
    assert (arc[1] - head).normalized().angle(x_min) < 1e-5
    assert (arc[-2] - head).normalized().angle(x_max) < 1e-5
    assert (arc[1] - head).length == pytest.approx(overlay.TWIST_ARC_SCALE * pose_bone.length, rel=1e-5)


def test_inverted_twist_range_is_not_drawn(overlay, posed_rig):
    settings = posed_rig.pose.bones["forearm.L"].ewbik
    settings.use_twist_limit = True
    # The panel keeps min <= max; an older file may still hold an inverted range.
    stored = settings.bl_system_properties_get() if hasattr(settings, "bl_system_properties_get") else settings
    stored["twist_min"], stored["twist_max"] = 0.5, -0.5
    assert (settings.twist_min, settings.twist_max) == (0.5, -0.5)
    assert polylines_of(overlay.bone_limit_polylines(posed_rig, posed_rig.pose.bones["forearm.L"]), "twist") == []


def test_dragging_the_gizmo_to_the_posed_tail_gives_the_posed_direction(overlay, posed_rig):
    pose_bone = posed_rig.pose.bones["hand.L"]
    rotation = Quaternion(Vector((0.3, 0.2, 1.0)).normalized(), math.radians(50.0))
    posed_along(posed_rig, pose_bone, rotation)
    tail = posed_rig.matrix_world @ pose_bone.tail
    frame = overlay.limit_frame(posed_rig, pose_bone)

    direction = overlay.direction_from_point(frame, tail)
    assert tuple(direction) == pytest.approx(tuple(rotation @ Y), abs=1e-5)
    handle = overlay.cone_handle_point(frame, direction, pose_bone.length)
    assert (handle - tail).length < 1e-5
    assert overlay.direction_from_point(frame, frame.to_translation()) is None


def test_gizmo_drag_writes_the_active_cone(overlay, posed_rig):
    pose_bone = posed_rig.pose.bones["forearm.L"]
    set_cones(pose_bone, ((0, 1, 0), 0.4), ((1, 0, 0), 0.3))
    pose_bone.ewbik.active_cone_index = 1
    select_pose_bones(posed_rig, ["forearm.L"])
    found = overlay.active_cone(bpy.context)
    assert found is not None and found[2] == pose_bone.ewbik.cones[1]
    frame = overlay.limit_frame(posed_rig, pose_bone)
    handle = frame @ (Vector((1.0, 0.0, 0.0)) * pose_bone.length)
    assert overlay.gizmo_offset() == pytest.approx(tuple(handle - frame.to_translation()), abs=1e-6)

    wanted = Vector((0.0, 0.6, -0.8))
    overlay.set_gizmo_offset(frame.to_3x3() @ (wanted * 3.0))
    assert tuple(pose_bone.ewbik.cones[1].direction) == pytest.approx(tuple(wanted), abs=1e-5)
    assert tuple(pose_bone.ewbik.cones[0].direction) == pytest.approx((0.0, 1.0, 0.0), abs=1e-6)
    overlay.set_gizmo_offset((0.0, 0.0, 0.0))
    assert tuple(pose_bone.ewbik.cones[1].direction) == pytest.approx(tuple(wanted), abs=1e-5)

    posed_rig.ewbik.show_limits = False
    assert overlay.active_cone(bpy.context) is None
    assert overlay.gizmo_offset() == (0.0, 0.0, 0.0)


def test_show_limits_draws_all_limited_bones_else_only_the_selected(overlay, posed_rig):
    for name in ("forearm.L", "shin.R"):
        set_cones(posed_rig.pose.bones[name], ((0, 1, 0), 0.4))
    select_pose_bones(posed_rig, ["forearm.L"])

    emphasised = {}
    for _kind, strong, points in overlay.armature_limit_polylines(posed_rig):
        emphasised.setdefault(strong, 0)
        emphasised[strong] += 1
    assert emphasised == {True: 1, False: 1}

    posed_rig.ewbik.show_limits = False
    shown = overlay.armature_limit_polylines(posed_rig)
    assert len(shown) == 1 and shown[0][1] is True
    bpy.ops.object.mode_set(mode="OBJECT")
    assert overlay.armature_limit_polylines(posed_rig) == []


def test_disabling_removes_the_draw_handler_and_the_gizmo_group(overlay):
    def registered(cls):
        return "bl_rna" in cls.__dict__

    gizmo_group = overlay.EWBIK_GGT_cone_direction
    assert overlay._draw_handle is not None and registered(gizmo_group)
    disable_extension()
    try:
        assert overlay._draw_handle is None
        assert not registered(gizmo_group)
    finally:
        enable_extension()
    assert registered(addon_module("ewbik_addon.overlay").EWBIK_GGT_cone_direction)


GPU_PROBE = textwrap.dedent(
    """
    import os, tempfile
    os.environ["BLENDER_USER_RESOURCES"] = tempfile.mkdtemp()
    import bpy, gpu
    scene = bpy.context.scene
    scene.render.engine = "BLENDER_WORKBENCH"
    scene.render.resolution_x = scene.render.resolution_y = 8
    bpy.ops.render.render()
    offscreen = gpu.types.GPUOffScreen(8, 8)
    with offscreen.bind():
        gpu.state.active_framebuffer_get().clear(color=(0.0, 0.0, 0.0, 1.0))
    offscreen.free()
    """
)
_gpu_probe = {}


def gpu_unavailable_reason():
    """Why the GPU cannot draw headless here (probed in a subprocess: a missing driver aborts it)."""
    if "reason" not in _gpu_probe:
        try:
            done = subprocess.run([sys.executable, "-c", GPU_PROBE], capture_output=True, text=True, timeout=120)
            _gpu_probe["reason"] = None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["abort"])[-1]
        except subprocess.TimeoutExpired:
            _gpu_probe["reason"] = "GPU probe timed out"
    return _gpu_probe["reason"]


def start_gpu():
    """One tiny Workbench render: the `gpu` module refuses to work headless before it."""
    scene = bpy.context.scene
    if scene.camera is None:
        camera = bpy.data.objects.new("probe camera", bpy.data.cameras.new("probe camera"))
        scene.collection.objects.link(camera)
        scene.camera = camera
    scene.render.engine = "BLENDER_WORKBENCH"
    scene.render.resolution_x = scene.render.resolution_y = 8
    bpy.ops.render.render()


def look_at(eye, target):
    """View matrix of a camera at `eye` looking at `target`."""
    forward = (Vector(target) - Vector(eye)).normalized()
    right = forward.cross(forward.orthogonal()).normalized()
    up = right.cross(forward)
    rotation = Matrix((right, up, -forward)).to_4x4()
    return rotation @ Matrix.Translation(-Vector(eye))


def perspective(fov, aspect, near, far):
    f = 1.0 / math.tan(fov / 2.0)
    return Matrix(
        (
            (f / aspect, 0.0, 0.0, 0.0),
            (0.0, f, 0.0, 0.0),
            (0.0, 0.0, (far + near) / (near - far), 2.0 * far * near / (near - far)),
            (0.0, 0.0, -1.0, 0.0),
        )
    )


def test_overlay_draws_the_cones_where_they_project(overlay, posed_rig):
    reason = gpu_unavailable_reason()
    if reason is not None:
        pytest.skip(f"GPU drawing unavailable headless: {reason}")
    import gpu

    pose_bone = posed_rig.pose.bones["forearm.L"]
    set_cones(pose_bone, ((0.0, 1.0, 0.0), math.radians(40.0)))
    select_pose_bones(posed_rig, ["forearm.L"])
    start_gpu()

    size = 200
    frame = overlay.limit_frame(posed_rig, pose_bone)
    head = frame.to_translation()
    axis = (frame.to_3x3() @ Y).normalized()
    view = look_at(head + axis * (pose_bone.length + 1.0), head)
    projection = perspective(math.radians(40.0), 1.0, 0.05, 50.0)
    polylines = overlay.armature_limit_polylines(posed_rig)
    offscreen = gpu.types.GPUOffScreen(size, size)
    try:
        with offscreen.bind():
            framebuffer = gpu.state.active_framebuffer_get()
            framebuffer.clear(color=(0.0, 0.0, 0.0, 1.0))
            gpu.state.viewport_set(0, 0, size, size)
            with gpu.matrix.push_pop(), gpu.matrix.push_pop_projection():
                gpu.matrix.load_matrix(view)
                gpu.matrix.load_projection_matrix(projection)
                overlay.draw_limits_overlay()
            buffer = framebuffer.read_color(0, 0, size, size, 4, 0, "UBYTE")
    finally:
        offscreen.free()
    buffer.dimensions = size * size * 4
    pixels = np.array(buffer.to_list(), dtype=np.uint8).reshape(size, size, 4)[..., :3].astype(float)
    lit = pixels.max(axis=-1) > 40

    def pixel_of(point):
        clip = projection @ view @ point.to_4d()
        return int((clip.y / clip.w * 0.5 + 0.5) * size), int((clip.x / clip.w * 0.5 + 0.5) * size)

    hue = np.array(overlay.COLORS["active_cone"][:3])
    hue = hue / hue.max()
    (circle,) = [points for kind, _strong, points in polylines if kind.endswith("cone")]
    hits = 0
    for point in circle:
        row, column = pixel_of(point)
        patch = pixels[max(row - 2, 0) : row + 3, max(column - 2, 0) : column + 3].reshape(-1, 3)
        bright = patch[patch.max(axis=-1) > 40]
        if len(bright) and np.any(np.abs(bright / bright.max(axis=-1, keepdims=True) - hue).max(axis=-1) < 0.15):
            hits += 1
    assert hits >= 0.9 * len(circle)
    row, column = pixel_of(head + axis * pose_bone.length)
    assert (row, column) == (size // 2, size // 2) or abs(row - size // 2) + abs(column - size // 2) <= 2
    assert not lit[row - 5 : row + 6, column - 5 : column + 6].any(), "only outlines are drawn"
    assert 100 < lit.sum() < 0.2 * size * size
