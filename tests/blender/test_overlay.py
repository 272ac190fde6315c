"""The limits overlay: the shaded region against the solver's own membership test, which bones
are shown, the bones at/beyond their limits, the batch cache, and (when the GPU works headless)
real pixels of the filled region."""

import math
import subprocess
import sys
import textwrap

import bpy
import numpy as np
import pytest
from mathutils import Quaternion, Vector

from tests.support.blender_helpers import (
    addon_module,
    disable_extension,
    enable_extension,
    make_active,
    select_pose_bones,
    stored_properties,
)
from tests.support.kusudamas import fibonacci_sphere
from tests.support.limit_rigs import (
    Y,
    build_mixamo_rig,
    look_at,
    perspective,
    pose_rotation,
    rest_under_parent,
    set_cones,
)

SHOULDER = (
    ((0.0, 1.0, 0.0), math.radians(35.0)),
    ((0.8, 0.2, 0.0), math.radians(25.0)),
    ((0.2, 0.3, -0.9), math.radians(15.0)),
)


@pytest.fixture
def overlay():
    return addon_module("ewbik_addon.viewport.overlay")


@pytest.fixture
def kusudama():
    return addon_module("solver.kusudama")


@pytest.fixture
def posed_rig(metarig):
    """The metarig moved, turned and posed, so world, parent pose and rest frames all differ."""
    metarig.location = (1.0, -2.0, 0.5)
    metarig.rotation_euler = (0.2, -0.1, 0.7)
    make_active(metarig)
    bpy.ops.object.mode_set(mode="POSE")
    for name, axis, degrees in (("upper_arm.L", (1.0, 0.0, 0.3), 35.0), ("spine.001", (0.0, 0.0, 1.0), 20.0)):
        pose_rotation(metarig.pose.bones[name], Quaternion(Vector(axis).normalized(), math.radians(degrees)))
    bpy.context.view_layer.update()
    return metarig


def solver_kusudama(kusudama, cones):
    return kusudama.Kusudama([kusudama.LimitCone(tuple(Vector(d).normalized()), r) for d, r in cones])


def test_region_is_placed_in_the_limit_frame_of_the_posed_parent(overlay, kusudama, posed_rig):
    pose_bone = posed_rig.pose.bones["forearm.L"]
    set_cones(pose_bone, *SHOULDER)
    select_pose_bones(posed_rig, ["forearm.L"])
    frame = rest_under_parent(posed_rig, pose_bone)
    parts = overlay.bone_geometry(posed_rig, pose_bone, beyond=False)
    head = frame.to_translation()
    to_local = np.array(frame.inverted().to_3x3())
    limits = solver_kusudama(kusudama, SHOULDER)
    for kind, expected in (("allowed", True), ("forbidden", False)):
        corners = parts[kind].reshape(-1, 3) - np.array(head)
        scale = posed_rig.matrix_world.median_scale
        assert np.linalg.norm(corners, axis=1) == pytest.approx(pose_bone.length * scale, rel=1e-4)
        centroids = parts[kind].mean(axis=1) - np.array(head)
        local = centroids @ to_local.T
        local /= np.linalg.norm(local, axis=1, keepdims=True)
        gap = np.degrees(np.arccos(np.clip(np.sum(local * limits.closest_allowed(local), axis=1), -1.0, 1.0)))
        if expected:
            assert gap.max() < 1.0 and np.mean(gap < 1e-4) > 0.97
        else:
            assert np.mean(gap > 1e-4) > 0.97


def test_scope_shows_the_active_bone_then_the_selected_then_all(overlay, posed_rig):
    for name in ("forearm.L", "shin.R", "spine"):
        set_cones(posed_rig.pose.bones[name], ((0, 1, 0), 0.4))
    select_pose_bones(posed_rig, ["shin.R", "forearm.L"])

    def shown():
        return sorted(pose_bone.name for pose_bone in overlay.shown_bones(posed_rig))

    assert shown() == ["forearm.L"]
    posed_rig.ewbik.limits_scope = "SELECTED"
    assert shown() == ["forearm.L", "shin.R"]
    posed_rig.ewbik.limits_scope = "ALL"
    assert shown() == ["forearm.L", "shin.R", "spine"]
    posed_rig.ewbik.show_limits = False
    assert shown() == [] and overlay.overlay_geometry(posed_rig) == {}
    posed_rig.ewbik.show_limits = True
    bpy.ops.object.mode_set(mode="OBJECT")
    assert shown() == ["forearm.L", "shin.R", "spine"]
    posed_rig.ewbik.limits_scope = "ACTIVE"
    assert shown() == []


def test_bones_at_and_beyond_their_limits_are_found_and_marked(overlay, kusudama, posed_rig):
    status_of = addon_module("ewbik_addon.limits.limit_status").limit_status
    cone = (Vector((0.0, 1.0, 0.0)), math.radians(30.0))
    for name in ("forearm.L", "shin.R", "shin.L"):
        set_cones(posed_rig.pose.bones[name], cone)
    select_pose_bones(posed_rig, ["forearm.L"])
    assert status_of(posed_rig).count == 0

    pose_rotation(posed_rig.pose.bones["forearm.L"], Quaternion((1.0, 0.0, 0.0), math.radians(50.0)))
    pose_rotation(posed_rig.pose.bones["shin.R"], Quaternion((0.0, 0.0, 1.0), math.radians(30.0)))
    pose_rotation(posed_rig.pose.bones["shin.L"], Quaternion((0.0, 0.0, 1.0), math.radians(20.0)))
    status = status_of(posed_rig)
    assert status.beyond == ("forearm.L",) and status.at == ("shin.R",)
    geometry = overlay.overlay_geometry(posed_rig)
    assert "outside" in geometry and "direction" not in geometry
    tail = posed_rig.matrix_world @ posed_rig.pose.bones["forearm.L"].tail
    assert tuple(geometry["outside"][0, 1]) == pytest.approx(tuple(tail), abs=1e-5)
    assert len(geometry["beyond"]) == 1 and len(geometry["at_limit"]) == 1


def test_twist_dial_spans_where_the_x_axis_goes_when_twisted(overlay, posed_rig):
    pose_bone = posed_rig.pose.bones["forearm.L"]
    set_cones(pose_bone, ((0.0, 1.0, 0.0), 0.5), twist=(math.radians(-30.0), math.radians(70.0)))
    dial = overlay.bone_geometry(posed_rig, pose_bone, beyond=False)["twist"]
    head = np.array(rest_under_parent(posed_rig, pose_bone).to_translation())
    for twist, end in ((-30.0, dial[0, 0]), (70.0, dial[-4, 1])):
        pose_rotation(pose_bone, Quaternion(Y, math.radians(twist)))
        x_axis = (posed_rig.matrix_world @ pose_bone.matrix).to_3x3().col[0].normalized()
        assert Vector(end - head).normalized().angle(x_axis) < 1e-4


def test_an_inverted_twist_range_or_a_cone_without_axis_from_an_old_file_is_left_out(overlay, posed_rig):
    pose_bone = posed_rig.pose.bones["forearm.L"]
    set_cones(pose_bone, ((0.0, 1.0, 0.0), 0.5), ((1.0, 0.0, 0.0), 0.3), twist=(-0.5, 0.5))
    (
        stored_properties(pose_bone.bone.ewbik)["twist_min"],
        stored_properties(pose_bone.bone.ewbik)["twist_max"],
    ) = 0.5, -0.5
    stored_properties(pose_bone.bone.ewbik.cones[1])["direction"] = (0.0, 0.0, 0.0)
    assert (pose_bone.bone.ewbik.twist_min, tuple(pose_bone.bone.ewbik.cones[1].direction)) == (
        0.5,
        (0.0, 0.0, 0.0),
    )
    select_pose_bones(posed_rig, ["forearm.L"])
    pose_bone.bone.ewbik.active_cone_index = 1
    geometry = overlay.overlay_geometry(posed_rig)
    assert "twist" not in geometry and "active_cone" not in geometry
    assert len(geometry["allowed"]) > 0 and len(geometry["outline"]) > 0


def test_cached_geometry_key_changes_only_with_limits_or_pose(overlay, posed_rig):
    pose_bone = posed_rig.pose.bones["forearm.L"]
    set_cones(pose_bone, *SHOULDER)
    select_pose_bones(posed_rig, ["forearm.L"])
    key = overlay.geometry_key(posed_rig)
    assert overlay.geometry_key(posed_rig) == key
    pose_bone.bone.ewbik.cones[1].radius += 0.01
    bpy.context.view_layer.update()
    changed = overlay.geometry_key(posed_rig)
    assert changed != key
    pose_rotation(posed_rig.pose.bones["upper_arm.L"], Quaternion((0.0, 0.0, 1.0), 0.3))
    assert overlay.geometry_key(posed_rig) != changed


def test_disabling_removes_the_draw_handler_and_the_gizmo_group(overlay):
    def registered(cls):
        return "bl_rna" in cls.__dict__

    gizmo_group = addon_module("ewbik_addon.viewport.limit_gizmos").EWBIK_GGT_limit_handles
    assert overlay._draw_handle is not None and registered(gizmo_group)
    disable_extension()
    try:
        assert overlay._draw_handle is None
        assert not registered(gizmo_group)
    finally:
        enable_extension()
    assert registered(addon_module("ewbik_addon.viewport.limit_gizmos").EWBIK_GGT_limit_handles)


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
            done = subprocess.run(
                [sys.executable, "-c", GPU_PROBE], capture_output=True, text=True, timeout=120
            )
            _gpu_probe["reason"] = (
                None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["abort"])[-1]
            )
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


def render_overlay(overlay, view, projection, size, background, occluder=None):
    """The overlay drawn offscreen with these matrices: (size, size, 3) float pixels 0..255.

    `occluder`: world-space triangles (k, 3, 3) drawn opaque blue first, writing depth, as the
    rig is in the viewport.
    """
    import gpu
    from gpu_extras.batch import batch_for_shader

    offscreen = gpu.types.GPUOffScreen(size, size)
    try:
        with offscreen.bind():
            framebuffer = gpu.state.active_framebuffer_get()
            framebuffer.clear(color=(*background, 1.0), depth=1.0)
            gpu.state.viewport_set(0, 0, size, size)
            with gpu.matrix.push_pop(), gpu.matrix.push_pop_projection():
                gpu.matrix.load_matrix(view)
                gpu.matrix.load_projection_matrix(projection)
                if occluder is not None:
                    shader = gpu.shader.from_builtin("UNIFORM_COLOR")
                    gpu.state.depth_test_set("LESS_EQUAL")
                    gpu.state.depth_mask_set(True)
                    shader.uniform_float("color", (0.0, 0.0, 1.0, 1.0))
                    batch_for_shader(
                        shader, "TRIS", {"pos": occluder.reshape(-1, 3).astype(np.float32)}
                    ).draw(shader)
                overlay.draw_limits_overlay()
            buffer = framebuffer.read_color(0, 0, size, size, 4, 0, "UBYTE")
    finally:
        offscreen.free()
    buffer.dimensions = size * size * 4
    return np.array(buffer.to_list(), dtype=np.uint8).reshape(size, size, 4)[..., :3].astype(float)


@pytest.mark.parametrize(
    "rig_kind, bone", [("metarig", "upper_arm.L"), ("metarig", "shin.R"), ("mixamo", "mixamorig:LeftForeArm")]
)
def test_filled_pixels_match_the_solver_membership(overlay, kusudama, request, rig_kind, bone):
    reason = gpu_unavailable_reason()
    if reason is not None:
        pytest.skip(f"GPU drawing unavailable headless: {reason}")
    posed_rig = request.getfixturevalue("posed_rig") if rig_kind == "metarig" else build_mixamo_rig()
    pose_bone = posed_rig.pose.bones[bone]
    set_cones(pose_bone, *SHOULDER)
    select_pose_bones(posed_rig, [bone])
    pose_rotation(pose_bone, Quaternion((1.0, 0.0, 0.0), math.radians(15.0)))
    start_gpu()

    size = 240
    frame = rest_under_parent(posed_rig, pose_bone)
    head = frame.to_translation()
    length = pose_bone.length * posed_rig.matrix_world.median_scale
    eye_direction = (frame.to_3x3() @ Vector((0.3, 1.0, 0.2))).normalized()
    view = look_at(head + eye_direction * length * 4.0, head)
    projection = perspective(math.radians(40.0), 1.0, 0.01, 50.0)
    grey = 0.5
    pixels = render_overlay(overlay, view, projection, size, (grey, grey, grey))

    limits = solver_kusudama(kusudama, SHOULDER)
    active_cone = limits.cones[pose_bone.bone.ewbik.active_cone_index]
    lattice = fibonacci_sphere(3000)
    eye = head + eye_direction * length * 4.0
    margin = math.radians(4.0)
    checked = {True: 0, False: 0}

    def pixel_of(point):
        clip = projection @ view @ Vector(point).to_4d()
        return np.array([(clip.y / clip.w * 0.5 + 0.5) * size, (clip.x / clip.w * 0.5 + 0.5) * size])

    bone_start = pixel_of(head)
    bone_along = pixel_of(posed_rig.matrix_world @ pose_bone.tail) - bone_start

    def near_the_bone_line(pixel):
        share = np.clip(np.dot(pixel - bone_start, bone_along) / np.dot(bone_along, bone_along), 0.0, 1.0)
        return np.linalg.norm(pixel - bone_start - share * bone_along) < 6.0

    for direction in lattice:
        world = frame @ (Vector(direction) * pose_bone.length)
        if (world - head).normalized().dot((eye - world).normalized()) < 0.4:
            continue
        ring = [Quaternion(Vector(direction).orthogonal(), margin) @ Vector(direction)]
        ring += [Quaternion(Vector(direction), k * math.pi / 3.0) @ ring[0] for k in range(1, 6)]
        allowed = bool(limits.allows(np.array(direction)[None])[0])
        if any(bool(limits.allows(np.array(r)[None])[0]) != allowed for r in ring):
            continue
        if abs(Vector(direction).angle(active_cone.direction) - active_cone.radius) < margin:
            continue
        pixel = pixel_of(world)
        if near_the_bone_line(pixel):
            continue
        row, column = pixel.astype(int)
        red, green, blue = pixels[row, column]
        if allowed:
            assert green - red > 20 and green > 135, (direction, pixels[row, column])
        else:
            assert 100 < max(red, green, blue) < 122 and abs(green - red) < 12, (
                direction,
                pixels[row, column],
            )
        checked[allowed] += 1
    assert checked[True] > 30 and checked[False] > 30


def test_the_rig_hides_the_region_unless_see_through(overlay, posed_rig):
    reason = gpu_unavailable_reason()
    if reason is not None:
        pytest.skip(f"GPU drawing unavailable headless: {reason}")
    pose_bone = posed_rig.pose.bones["upper_arm.L"]
    set_cones(pose_bone, ((0.0, 1.0, 0.0), math.radians(70.0)))
    select_pose_bones(posed_rig, ["upper_arm.L"])
    pose_rotation(pose_bone, Quaternion())
    start_gpu()
    size = 160
    frame = rest_under_parent(posed_rig, pose_bone)
    head = frame.to_translation()
    length = pose_bone.length * posed_rig.matrix_world.median_scale
    sample = frame @ (Vector((0.6, 0.8, 0.3)).normalized() * pose_bone.length)
    eye = head + (frame.to_3x3() @ Vector((0.0, 0.6, 1.0))).normalized() * length * 4.0
    view = look_at(eye, head)
    projection = perspective(math.radians(40.0), 1.0, 0.01, 50.0)
    toward = (eye - sample).normalized()
    across = toward.orthogonal().normalized() * 0.1 * length
    up = toward.cross(across)
    middle = sample + toward * length
    quad = np.array(
        [
            [middle - across - up, middle + across - up, middle + across + up],
            [middle - across - up, middle + across + up, middle - across + up],
        ]
    )
    clip = projection @ view @ sample.to_4d()
    row, column = int((clip.y / clip.w * 0.5 + 0.5) * size), int((clip.x / clip.w * 0.5 + 0.5) * size)

    hidden = render_overlay(overlay, view, projection, size, (0.0, 0.0, 0.0), quad)[row, column]
    posed_rig.ewbik.limits_see_through = True
    shown = render_overlay(overlay, view, projection, size, (0.0, 0.0, 0.0), quad)[row, column]
    assert hidden[2] > 240 and hidden[1] < 10, hidden
    assert shown[1] > 60 and shown[2] < 225, shown
