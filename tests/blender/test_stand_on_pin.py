"""Stand on Pin: the first Pin on a standing body turns Move Root on and plants the feet on the floor.

What the moves themselves then look like (crouch, squat, reaches, a lone hand with the feet
kept) is tests/blender/test_natural_moves.py's "default" configuration.
"""

import bpy
from mathutils import Matrix, Vector

from tests.support.blender_helpers import bone_world, pin, select_pose_bones, update

FEET = ("foot.L", "foot.R")


def planted_feet(obj):
    return [foot for foot in FEET if obj.pose.bones[foot].ewbik.target and obj.pose.bones[foot].ewbik.planted]


def test_the_first_pin_on_a_standing_body_moves_the_root_and_plants_the_feet(metarig, capfd):
    assert not metarig.ewbik.translate_root and metarig.ewbik.stand_on_pin
    feet_before = {foot: bone_world(metarig, foot).copy() for foot in FEET}
    pin(metarig, "hand.R")
    out = capfd.readouterr().out
    assert "Pinned 1 bone, 1 new target" in out
    assert "Move Root on, foot.L and foot.R planted where they stand (2 new targets, Stand on Pin)" in out
    assert metarig.ewbik.translate_root and planted_feet(metarig) == list(FEET)
    for foot, matrix in feet_before.items():
        target = metarig.pose.bones[foot].ewbik.target.matrix_world
        assert (target.translation - matrix.translation).length < 1e-5


def test_feet_pinned_with_the_first_pin_are_planted_without_new_targets(metarig, capfd):
    pin(metarig, "hand.L", "hand.R", "foot.L", "foot.R", "spine.006")
    assert "Move Root on, foot.L and foot.R planted where they stand (Stand on Pin)" in capfd.readouterr().out
    assert planted_feet(metarig) == list(FEET)


def test_later_pins_leave_the_users_choices_alone(metarig):
    pin(metarig, "hand.R")
    metarig.ewbik.translate_root = False
    select_pose_bones(metarig, ["foot.L"])
    assert bpy.ops.ewbik.unpin() == {"FINISHED"}
    pin(metarig, "spine.006")
    assert not metarig.ewbik.translate_root
    assert metarig.pose.bones["foot.L"].ewbik.target is None


def test_a_lifted_foot_is_not_planted(metarig):
    shin = metarig.pose.bones["shin.L"]
    knee = shin.head.copy()
    shin.matrix = (
        Matrix.Translation(knee) @ Matrix.Rotation(-1.0, 4, "X") @ Matrix.Translation(-knee) @ shin.matrix
    )
    update()
    pin(metarig, "hand.R")
    assert planted_feet(metarig) == ["foot.R"]
    assert metarig.pose.bones["foot.L"].ewbik.target is None


def test_stand_on_pin_off_pins_only_what_is_asked(metarig):
    metarig.ewbik.stand_on_pin = False
    pin(metarig, "hand.R")
    assert not metarig.ewbik.translate_root and planted_feet(metarig) == []


def test_an_animated_rig_keeps_its_settings(metarig):
    metarig.pose.bones["spine"].keyframe_insert("location", frame=1)
    pin(metarig, "hand.R")
    assert not metarig.ewbik.translate_root and planted_feet(metarig) == []


def test_a_rig_without_a_body_keeps_its_settings():
    bpy.ops.object.armature_add()
    obj = bpy.context.object
    pin(obj, "Bone")
    assert not obj.ewbik.translate_root


def test_a_lone_hand_dragged_far_leaves_the_feet_on_the_floor(metarig):
    feet_before = {foot: bone_world(metarig, foot).translation.copy() for foot in FEET}
    target = pin(metarig, "hand.R")["hand.R"]
    bpy.ops.object.mode_set(mode="OBJECT")
    target.location += Vector((0.0, -0.4, 0.1))
    update()
    assert bpy.ops.ewbik.solve() == {"FINISHED"}
    update()
    assert max((bone_world(metarig, f).translation - p).length for f, p in feet_before.items()) < 1e-3
    assert (bone_world(metarig, "hand.R").translation - target.matrix_world.translation).length < 1e-3


def test_the_move_root_tooltip_speaks_of_crouching():
    prop = bpy.types.Object.bl_rna.properties["ewbik"].fixed_type.properties["translate_root"]
    assert "crouch" in prop.description and prop.default is False
