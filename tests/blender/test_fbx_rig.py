"""A character laid out as an imported Mixamo FBX: 'mixamorig:' names, bones in centimetres with
Y up, the armature object turned 90 degrees about X and scaled 0.01, leaf '_End' bones. Pin, drag,
preset, messages and bake behave as on a rig in metres."""

import math
import re

import bpy
import pytest
from mathutils import Matrix, Vector

from tests.support.blender_helpers import (
    addon_module,
    build_armature,
    make_active,
    pin,
    select_pose_bones,
    solve_fully_on_update,
    update,
)

# Joint positions in metres, Z up, facing -Y: name -> (parent, head, tail).
CENTRE = {
    "Hips": (None, (0.0, 0.0, 1.0), (0.0, 0.0, 1.1)),
    "Spine": ("Hips", (0.0, 0.0, 1.1), (0.0, 0.0, 1.22)),
    "Spine1": ("Spine", (0.0, 0.0, 1.22), (0.0, 0.0, 1.34)),
    "Spine2": ("Spine1", (0.0, 0.0, 1.34), (0.0, 0.0, 1.45)),
    "Neck": ("Spine2", (0.0, 0.0, 1.45), (0.0, 0.0, 1.55)),
    "Head": ("Neck", (0.0, 0.0, 1.55), (0.0, 0.0, 1.72)),
    "HeadTop_End": ("Head", (0.0, 0.0, 1.72), (0.0, 0.0, 1.8)),
}
LEFT = {
    "Shoulder": ("Spine2", (0.02, 0.0, 1.45), (0.17, 0.0, 1.46)),
    "Arm": ("Shoulder", (0.17, 0.0, 1.46), (0.45, 0.0, 1.46)),
    "ForeArm": ("Arm", (0.45, 0.0, 1.46), (0.70, 0.0, 1.46)),
    "Hand": ("ForeArm", (0.70, 0.0, 1.46), (0.80, 0.0, 1.46)),
    "UpLeg": ("Hips", (0.10, 0.0, 0.95), (0.10, -0.01, 0.52)),
    "Leg": ("UpLeg", (0.10, -0.01, 0.52), (0.10, 0.0, 0.08)),
    "Foot": ("Leg", (0.10, 0.0, 0.08), (0.10, -0.13, 0.02)),
    "ToeBase": ("Foot", (0.10, -0.13, 0.02), (0.10, -0.19, 0.02)),
    "Toe_End": ("ToeBase", (0.10, -0.19, 0.02), (0.10, -0.23, 0.02)),
}
TO_ARMATURE = Matrix.Rotation(-math.pi / 2, 4, "X") @ Matrix.Scale(100.0, 4)  # metres Z up -> cm Y up
PINNED = (
    "mixamorig:LeftHand",
    "mixamorig:RightHand",
    "mixamorig:LeftFoot",
    "mixamorig:RightFoot",
    "mixamorig:Head",
)


def mixamo_bones():
    bones = {
        f"mixamorig:{name}": (parent and f"mixamorig:{parent}", head, tail)
        for name, (parent, head, tail) in CENTRE.items()
    }
    for side, mirror in (("Left", 1.0), ("Right", -1.0)):
        for name, (parent, head, tail) in LEFT.items():
            parent = f"mixamorig:{parent}" if parent in CENTRE else f"mixamorig:{side}{parent}"
            flip = Vector((mirror, 1.0, 1.0))
            bones[f"mixamorig:{side}{name}"] = (parent, Vector(head) * flip, Vector(tail) * flip)
    return bones


@pytest.fixture
def character():
    bones = [
        (name, parent, TO_ARMATURE @ Vector(head), TO_ARMATURE @ Vector(tail), 0.0)
        for name, (parent, head, tail) in mixamo_bones().items()
    ]
    obj = build_armature("Armature", bones, connect_touching=True)
    obj.rotation_euler = (math.pi / 2, 0.0, 0.0)
    obj.scale = (0.01, 0.01, 0.01)
    solve_fully_on_update(obj, 60)
    update()
    return obj


def world_head(obj, name):
    update()
    return (obj.matrix_world @ obj.pose.bones[name].matrix).translation


def test_pins_sit_on_the_bones_sized_in_metres_and_the_preset_limits_the_limbs(character):
    targets = pin(character, *PINNED)
    for name, target in targets.items():
        assert (target.matrix_world.translation - world_head(character, name)).length < 1e-5, name
        assert 0.005 < target.empty_display_size < 0.3, name  # metres, not centimetres
        assert max(abs(s) for s in target.matrix_world.to_scale()) == pytest.approx(1.0)
    limited = {name for name, pose_bone in character.pose.bones.items() if len(pose_bone.bone.ewbik.cones)}
    assert {"mixamorig:LeftForeArm", "mixamorig:RightLeg", "mixamorig:LeftUpLeg", "mixamorig:Neck"} <= limited
    assert not [name for name in limited if name.endswith("_End")]


def test_a_dragged_foot_is_reached_in_scene_units_and_messages_speak_them(character):
    targets = pin(character, *PINNED)
    bpy.ops.object.mode_set(mode="OBJECT")
    foot = targets["mixamorig:LeftFoot"]
    foot.location += Vector((0.0, -0.1, 0.2))
    update()
    assert (world_head(character, "mixamorig:LeftFoot") - foot.matrix_world.translation).length < 1e-3
    hand = targets["mixamorig:LeftHand"]
    hand.location += Vector((2.0, 0.0, 0.0))
    update()
    make_active(character)
    assert bpy.ops.ewbik.solve() == {"FINISHED"}
    missed = (world_head(character, "mixamorig:LeftHand") - hand.matrix_world.translation).length
    assert 1.0 < missed < 2.01  # the arm lies along the drag already; the hand gives way to the other pins
    reported = re.search(r"mixamorig:LeftHand ([0-9.]+) (\w+)", character.ewbik.status)
    assert reported.group(2) == "m" and float(reported.group(1)) == pytest.approx(missed, rel=1e-2)


def test_bake_keys_the_rotations_that_play_back_the_solved_feet(character):
    targets = pin(character, *PINNED)
    bpy.ops.object.mode_set(mode="OBJECT")
    foot = targets["mixamorig:LeftFoot"]
    foot.keyframe_insert("location", frame=1)
    foot.location += Vector((0.0, -0.15, 0.25))
    foot.keyframe_insert("location", frame=4)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 4
    scene.frame_set(1)
    make_active(character)
    assert bpy.ops.ewbik.bake() == {"FINISHED"}
    fcurve_keys = addon_module("ewbik_addon.bake.fcurve_keys")
    keyed = {fcurve.data_path for fcurve in fcurve_keys.action_fcurves(character.animation_data)}
    assert 'pose.bones["mixamorig:LeftUpLeg"].rotation_quaternion' in keyed
    assert 'pose.bones["mixamorig:LeftLeg"].rotation_quaternion' in keyed
    assert character.ewbik.translate_root  # the first Pin on a standing body turns Move Root on
    root_location = 'pose.bones["mixamorig:Hips"].location'
    assert not [
        path for path in keyed if (path.endswith("location") and path != root_location) or "_End" in path
    ]
    character.ewbik.live = False
    for frame in (1, 2, 4):
        scene.frame_set(frame)
        assert (world_head(character, "mixamorig:LeftFoot") - foot.matrix_world.translation).length < 1e-3, (
            frame
        )


def test_a_bone_mapped_by_hand_gets_its_role_and_the_mapping_is_saved(character, tmp_path):
    character.data.bones["mixamorig:LeftForeArm"].name = "Bone.007"
    make_active(character)
    bpy.ops.object.mode_set(mode="POSE")
    select_pose_bones(character, ["Bone.007", "mixamorig:Neck"])
    assert bpy.ops.ewbik.role_mapping_add() == {"FINISHED"}
    rows = {row.bone: row for row in character.ewbik.role_mapping}
    assert rows["Bone.007"].role == "NONE" and rows["mixamorig:Neck"].role == "neck"
    rows["Bone.007"].role = "forearm.L"
    rows["mixamorig:Neck"].role = "NONE"
    assert bpy.ops.ewbik.apply_limit_preset(preset="humanoid", only_selected=False) == {"FINISHED"}
    assert len(character.pose.bones["Bone.007"].bone.ewbik.cones)
    assert not len(character.pose.bones["mixamorig:Neck"].bone.ewbik.cones)
    mirrored = [cone.radius for cone in character.pose.bones["mixamorig:RightForeArm"].bone.ewbik.cones]
    assert [cone.radius for cone in character.pose.bones["Bone.007"].bone.ewbik.cones] == pytest.approx(
        mirrored
    )
    path = tmp_path / "mapped.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    bpy.ops.wm.open_mainfile(filepath=str(path))
    saved = bpy.data.objects["Armature"].ewbik.role_mapping
    assert {row.bone: row.role for row in saved} == {"Bone.007": "forearm.L", "mixamorig:Neck": "NONE"}
