"""One pose per set of targets: the same targets, settings and pose underneath give the same body
however they were reached (drag away and back, frame jump, playback either way, Solve, bake,
save and reopen)."""

import bpy
import numpy as np
import pytest
from mathutils import Vector

from tests.support.blender_helpers import HANDS_FEET_HEAD, make_active, pin, settle, update

TOLERANCE_M = 1e-3  # every bone head within 1 mm


def heads(obj):
    """Every bone's head in world space as Blender evaluated it once live solving settled, (N, 3)."""
    update()
    settle()
    values = np.empty(len(obj.pose.bones) * 3, np.float32)
    obj.pose.bones.foreach_get("head", values)
    matrix = np.array(obj.matrix_world)
    points = values.reshape(-1, 3).astype(float)
    return points @ matrix[:3, :3].T + matrix[:3, 3]


def largest_gap(a, b):
    return float(np.linalg.norm(a - b, axis=1).max())


def pinned_metarig(metarig):
    targets = pin(metarig, *HANDS_FEET_HEAD)
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    return targets


def drag(target, path):
    """Move the target through these locations, one depsgraph update each, as a slow mouse drag
    does (the refinement timer runs between moves)."""
    for location in path:
        target.location = location
        update()
        settle()


def test_a_hand_dragged_away_and_back_brings_the_body_back(metarig):
    hand = pinned_metarig(metarig)["hand.L"]
    start = Vector(hand.location)
    near = start + Vector((0.05, -0.05, 0.03))
    drag(hand, [near])
    before = heads(metarig)
    knee = metarig.matrix_world @ metarig.pose.bones["shin.L"].head
    path = [near.lerp(knee + Vector((0.0, -0.15, 0.0)), t) for t in np.linspace(0.0, 1.0, 13)[1:]]
    drag(hand, path)
    drag(hand, list(reversed(path))[1:] + [near])
    assert largest_gap(heads(metarig), before) < TOLERANCE_M


def keyed_hand(metarig, hand):
    """The hand target keyed over 40 frames: rest, in front of the knee, up and forward, rest."""
    start = Vector(hand.location)
    knee = metarig.matrix_world @ metarig.pose.bones["shin.L"].head + Vector((0.0, -0.2, 0.05))
    up = start + Vector((0.1, -0.35, 0.35))
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 40
    for frame, location in ((1, start), (14, knee), (27, up), (40, start)):
        hand.location = location
        hand.keyframe_insert("location", frame=frame)


def keyed_rig(metarig):
    """The metarig pinned, hand.L's target keyed (`keyed_hand`), active; returns the scene."""
    keyed_hand(metarig, pinned_metarig(metarig)["hand.L"])
    make_active(metarig)
    return bpy.context.scene


def played(scene, frames):
    """Frame by frame as playback steps; {frame: heads}."""
    return {frame: (scene.frame_set(frame), heads(bpy.context.object))[1] for frame in frames}


def test_a_frame_jumped_to_is_the_frame_played_forward_or_backward(metarig):
    scene = keyed_rig(metarig)
    forward = played(scene, range(1, 41))
    backward = played(scene, range(40, 0, -1))
    for frame in (1, 10, 20, 30, 40):
        assert largest_gap(forward[frame], backward[frame]) < TOLERANCE_M, frame
        jumped = played(scene, [40 if frame < 20 else 1, frame])[frame]
        assert largest_gap(forward[frame], jumped) < TOLERANCE_M, frame


def test_the_bake_keys_what_playback_showed(metarig):
    scene = keyed_rig(metarig)
    shown = played(scene, range(1, 41))
    assert bpy.ops.ewbik.bake(frame_start=1, frame_end=40) == {"FINISHED"}
    assert not metarig.ewbik.live
    for frame in (5, 14, 20, 27, 33):
        scene.frame_set(frame)
        assert largest_gap(heads(metarig), shown[frame]) < TOLERANCE_M, frame


def test_solve_changes_nothing_live_showed(metarig):
    hand = pinned_metarig(metarig)["hand.L"]
    drag(hand, [hand.location + Vector((0.1, -0.2, -0.3)) * (t / 6) for t in range(1, 7)])
    shown = heads(metarig)
    make_active(metarig)
    assert bpy.ops.ewbik.solve() == {"FINISHED"}
    assert largest_gap(heads(metarig), shown) < TOLERANCE_M


def test_save_and_reopen_then_drag_gives_the_pose_an_unbroken_session_gives(metarig, tmp_path):
    hand = pinned_metarig(metarig)["hand.L"]
    drag(hand, [hand.location + Vector((0.05, -0.3, 0.25)) * (t / 5) for t in range(1, 6)])
    path = str(tmp_path / "posed.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    away = Vector(hand.location) + Vector((-0.1, 0.0, -0.4))
    drag(hand, [away])
    unbroken = heads(metarig)
    bpy.ops.wm.open_mainfile(filepath=path)
    metarig = bpy.data.objects["metarig"]
    drag(metarig.pose.bones["hand.L"].ewbik.target, [away])
    assert largest_gap(heads(metarig), unbroken) < TOLERANCE_M


def test_after_an_undo_the_next_drag_gives_the_pose_an_unbroken_session_gives(metarig):
    """Undo puts back the channels the solver wrote; the pose underneath comes back with them (it
    is stored beside them), so the undone drag leaves nothing behind."""
    hand = pinned_metarig(metarig)["hand.L"]
    start = Vector(hand.location)
    away = start + Vector((0.1, -0.3, -0.4))
    drag(hand, [away])
    unbroken = heads(metarig)
    bpy.ops.ed.undo_push(message="dragged")
    drag(hand, [start + Vector((-0.2, 0.1, 0.2))])
    bpy.ops.ed.undo_push(message="dragged again")
    bpy.ops.ed.undo()
    metarig = bpy.data.objects["metarig"]
    hand = metarig.pose.bones["hand.L"].ewbik.target
    drag(hand, [start, away])
    assert largest_gap(heads(metarig), unbroken) < TOLERANCE_M


def test_an_unreachable_hand_stops_short_and_the_other_pins_hold(metarig):
    targets = pinned_metarig(metarig)
    hand = targets["hand.L"]
    drag(hand, [hand.location + Vector((1.4, 0.0, 0.0)) * (t / 8) for t in range(1, 9)])
    for bone in ("hand.R", "foot.L", "foot.R", "spine.006"):
        target = targets[bone].matrix_world.translation
        reached = metarig.matrix_world @ metarig.pose.bones[bone].head
        assert (reached - target).length < TOLERANCE_M, bone
    status = metarig.ewbik.status
    assert (
        status.startswith("4 pins reached; hand.L ") and "out of reach with the other pins held" in status
    ), status


@pytest.mark.parametrize("first", ["hand.L", "hand.R"])
def test_which_target_moved_last_does_not_decide_who_stops_short(metarig, first):
    targets = pinned_metarig(metarig)
    moves = {"hand.L": Vector((1.2, 0.0, 0.0)), "hand.R": Vector((-0.05, -0.05, 0.0))}
    order = [first] + [bone for bone in moves if bone != first]
    for bone in order:
        drag(targets[bone], [targets[bone].location + moves[bone]])
    right = metarig.matrix_world @ metarig.pose.bones["hand.R"].head
    assert (right - targets["hand.R"].matrix_world.translation).length < TOLERANCE_M


def glowing_cube_on(obj, bone):
    """A small emissive cube parented to the bone: where it renders shows where the bone is."""
    bpy.ops.mesh.primitive_cube_add(size=0.1)
    cube = bpy.context.object
    cube.parent, cube.parent_type, cube.parent_bone = obj, "BONE", bone
    cube.matrix_world = obj.matrix_world @ obj.pose.bones[bone].matrix
    material = bpy.data.materials.new("glow")
    if bpy.app.version < (5, 0, 0):  # from 5.0 every material has its node tree
        material.use_nodes = True
    nodes = material.node_tree.nodes
    nodes.clear()
    emission = nodes.new("ShaderNodeEmission")
    emission.inputs["Strength"].default_value = 50.0
    output = nodes.new("ShaderNodeOutputMaterial")
    material.node_tree.links.new(emission.outputs[0], output.inputs[0])
    cube.data.materials.append(material)


def rendering_scene(tmp_path):
    """A camera facing the rig's left side and a 64-pixel Cycles render of one sample."""
    scene = bpy.context.scene
    camera = bpy.data.objects.new("camera", bpy.data.cameras.new("camera"))
    scene.collection.objects.link(camera)
    scene.camera = camera
    camera.location, camera.rotation_euler = (0.6, -4.0, 1.4), (np.pi / 2, 0.0, 0.0)
    scene.render.engine = "CYCLES"
    scene.cycles.samples = 1
    scene.render.resolution_x = scene.render.resolution_y = 64
    scene.render.image_settings.file_format = "PNG"
    scene.render.filepath = str(tmp_path / "frame")
    return scene


def glow_centre(path):
    """(x, y) pixel centre of the bright pixels of a rendered image."""
    image = bpy.data.images.load(str(path))
    red = np.array(image.pixels[:]).reshape(image.size[1], image.size[0], 4)[..., 0]
    ys, xs = np.nonzero(red > 0.5)
    return float(xs.mean()), float(ys.mean())


def test_render_animation_shows_each_frame_as_the_viewport_shows_it(metarig, tmp_path):
    """Render Animation evaluates the frames in a depsgraph of its own, which does not move the
    file's objects: the targets are read as that depsgraph evaluated them."""
    scene = keyed_rig(metarig)
    scene.frame_start, scene.frame_end = 1, 14
    glowing_cube_on(metarig, "hand.L")
    rendering_scene(tmp_path)
    scene.frame_set(1)
    assert bpy.ops.render.render(animation=True) == {"FINISHED"}
    for frame in (1, 14):
        scene.frame_set(frame)
        scene.render.filepath = str(tmp_path / f"still{frame}")
        assert bpy.ops.render.render(write_still=True) == {"FINISHED"}
        animated = glow_centre(tmp_path / f"frame{frame:04d}.png")
        still = glow_centre(tmp_path / f"still{frame}.png")
        assert np.hypot(animated[0] - still[0], animated[1] - still[1]) < 0.5, frame
