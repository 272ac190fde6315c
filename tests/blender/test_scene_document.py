"""The armature as a scene document: valid for the standalone solver, which reaches the same pose."""

import json

import bpy
import numpy as np
from mathutils import Quaternion, Vector

from tests.support.blender_helpers import addon_module, pin, solve_fully_on_update, update


def prepared_rig(metarig):
    metarig.ewbik.stand_on_pin = False  # only the bones asked for: no feet planted by the first Pin
    metarig.ewbik.live = False
    solve_fully_on_update(metarig, 40)
    metarig.pose.bones["forearm.L"].rotation_mode = "XYZ"
    metarig.pose.bones["forearm.L"].rotation_euler = (0.4, 0.0, 0.2)
    metarig.pose.bones["upper_arm.R"].lock_rotation = (True, True, True)
    limits = metarig.data.bones["shin.L"].ewbik
    cone = limits.cones.add()
    cone.direction = (0.0, 2.0, 0.0)  # not unit: the document carries it normalized
    cone.radius = 0.8
    limits.use_twist_limit = True
    targets = pin(metarig, "hand.L", "hand.R", "foot.L")
    targets["hand.L"].location += Vector((0.05, -0.1, 0.1))
    targets["foot.L"].location += Vector((0.0, -0.05, 0.05))
    bpy.ops.object.mode_set(mode="OBJECT")
    update()
    return targets


def test_scene_document_describes_the_rig(metarig):
    scene_export = addon_module("ewbik_addon.documents.scene_export")
    prepared_rig(metarig)
    doc = json.loads(json.dumps(scene_export.scene_document(metarig)))
    assert doc["format"] == "ewbik-scene" and doc["version"] == 1
    bones = {bone["name"]: bone for bone in doc["bones"]}
    assert len(bones) == 159
    assert bones["forearm.L"]["parent"] == "upper_arm.L" and bones["spine"]["parent"] is None
    rest = np.array(bones["hand.L"]["rest"])
    assert np.allclose(rest, np.array(metarig.data.bones["hand.L"].matrix_local), atol=1e-6)
    assert bones["hand.L"]["length"] == metarig.data.bones["hand.L"].length
    expected = metarig.pose.bones["forearm.L"].rotation_euler.to_quaternion()
    assert Quaternion(bones["forearm.L"]["rotation"]).rotation_difference(expected).angle < 1e-6
    assert bones["upper_arm.R"]["stiffness"] == 1.0
    assert bones["shin.L"]["limits"]["cones"] == [{"direction": [0.0, 1.0, 0.0], "radius": 0.800000011920929}]
    assert {pin["bone"] for pin in doc["pins"]} == {"hand.L", "hand.R", "foot.L"}
    hand_pin = next(pin for pin in doc["pins"] if pin["bone"] == "hand.L")
    target = metarig.matrix_world.inverted() @ metarig.pose.bones["hand.L"].ewbik.target.matrix_world
    assert np.allclose(np.array(hand_pin["target"]), np.array(target), atol=1e-6)
    assert doc["settings"]["iterations"] == 40 and doc["settings"]["time_budget_ms"] is None


def test_standalone_solver_reaches_the_same_pose_as_blender(metarig):
    scene_export = addon_module("ewbik_addon.documents.scene_export")
    solver = addon_module("solver")
    prepared_rig(metarig)
    pose = solver.solve_scene(scene_export.scene_document(metarig))
    assert bpy.ops.ewbik.solve() == {"FINISHED"}
    for name, values in pose["bones"].items():
        pose_bone = metarig.pose.bones[name]
        if pose_bone.rotation_mode == "QUATERNION":
            blender = pose_bone.rotation_quaternion
        else:
            blender = pose_bone.rotation_euler.to_quaternion()
        assert Quaternion(values["rotation"]).rotation_difference(blender).angle < 1e-4, name


def test_scene_document_holds_the_bones_the_solve_holds(metarig, monkeypatch):
    """A chest that a constraint poses is held, and so are the bones above it on the hands'
    chains: the document gives them the stiffness the solve gives them."""
    scene_export = addon_module("ewbik_addon.documents.scene_export")
    armature_solve = addon_module("ewbik_addon.solve.armature_solve")
    chest = metarig.pose.bones["spine.003"].constraints.new("COPY_ROTATION")
    chest.target = bpy.data.objects.new("turn", None)
    bpy.context.scene.collection.objects.link(chest.target)
    metarig.pose.bones["upper_arm.L"].lock_rotation = (True, True, True)
    prepared_rig(metarig)
    solved = {}

    def recording_solve(skeleton, pins, rotations, locations, settings, limits, stiffness, *rest):
        solved.update(zip(skeleton.names, stiffness.tolist()))
        return solve(skeleton, pins, rotations, locations, settings, limits, stiffness, *rest)

    solve = armature_solve.solve
    monkeypatch.setattr(armature_solve, "solve", recording_solve)
    assert bpy.ops.ewbik.solve() == {"FINISHED"}, metarig.ewbik.status
    exported = {bone["name"]: bone["stiffness"] for bone in scene_export.scene_document(metarig)["bones"]}
    assert {name for name, stiffness in solved.items() if stiffness == 1.0} >= {
        "spine.003",
        "spine.002",
        "spine.001",
        "spine",
        "upper_arm.L",
        "upper_arm.R",
    }
    assert {name: exported[name] for name in solved} == solved
