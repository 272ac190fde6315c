"""Aim pins: the head looks at an empty while hands and feet hold, live and by Solve alike, on the
Rigify metarig and on a motion-capture rig; scene documents keep the aim."""

import json
import math

import bpy
import pytest
from mathutils import Vector

from tests.support.blender_helpers import bone_world, pin, solve_fully_on_update, update

METARIG_HOLDS = ("hand.L", "hand.R", "foot.L", "foot.R")
MOCAP_HOLDS = ("LeftWrist", "RightWrist", "LeftAnkle", "RightAnkle")
MOVES = (
    Vector((0.0, 0.0, 0.0)),
    Vector((0.3, 0.0, 0.1)),
    Vector((-0.4, 0.2, -0.2)),
    Vector((0.1, -0.5, 0.3)),
)


def aim_error_deg(obj, bone):
    """Degrees between the bone's Aim Axis (as Blender evaluated it) and the way to its target."""
    props = obj.pose.bones[bone].ewbik
    matrix = bone_world(obj, bone)
    column = "XYZ".index(props.aim_axis[-1])
    axis = matrix.to_3x3().normalized().col[column] * (-1.0 if props.aim_axis.startswith("-") else 1.0)
    return math.degrees(axis.angle(props.target.matrix_world.translation - matrix.translation))


def hold_error(obj, bone):
    return (
        bone_world(obj, bone).translation - obj.pose.bones[bone].ewbik.target.matrix_world.translation
    ).length


def aim_the_head(obj, head, holds, axis):
    """Pin the holds and the head, make the head an aim pin at an empty 1 m in front of it (-Y)."""
    solve_fully_on_update(obj)
    targets = pin(obj, *holds, head)
    props = obj.pose.bones[head].ewbik
    props.pin_kind, props.aim_axis = "AIM", axis
    bpy.ops.object.mode_set(mode="OBJECT")
    looked_at = targets[head]
    looked_at.location = bone_world(obj, head).translation + Vector((0.0, -1.0, 0.0))
    update()
    return looked_at


def forward_axis(obj, bone):
    """The bone's axis that points most nearly forward (-Y) in the rest pose: where a face looks."""
    basis = (obj.matrix_world @ obj.data.bones[bone].matrix_local).to_3x3().normalized()
    column = min(range(3), key=lambda k: -abs(basis.col[k].y))
    return ("-" if basis.col[column].y > 0.0 else "") + "XYZ"[column]


@pytest.mark.parametrize(
    "rig, head, holds", [("metarig", "spine.006", METARIG_HOLDS), ("mocap_rig", "Head", MOCAP_HOLDS)]
)
def test_the_head_looks_at_the_empty_while_hands_and_feet_hold(request, rig, head, holds):
    obj = request.getfixturevalue(rig)
    looked_at = aim_the_head(obj, head, holds, forward_axis(obj, head))
    start = looked_at.location.copy()
    heads = []
    for move in MOVES:
        looked_at.location = start + move
        update()
        live = aim_error_deg(obj, head), [hold_error(obj, bone) for bone in holds]
        assert live[0] <= 0.5, move
        assert max(live[1]) <= 1e-4, move
        heads.append(bone_world(obj, head).translation.copy())
        assert bpy.ops.ewbik.solve() == {"FINISHED"}
        assert aim_error_deg(obj, head) <= 0.5
        assert max(hold_error(obj, bone) for bone in holds) <= 1e-4
        assert (bone_world(obj, head).translation - heads[-1]).length <= 1e-4  # Solve gives the live pose
    assert (heads[0] - start).length > 0.5  # the head is not pulled to the empty


def test_the_y_axis_aims_and_the_status_reports_the_angle(metarig):
    looked_at = aim_the_head(metarig, "spine.006", METARIG_HOLDS, "Y")
    looked_at.location += Vector((0.0, 0.0, 1.5))  # above and in front: the head tilts forward
    update()
    assert aim_error_deg(metarig, "spine.006") <= 0.5
    assert "off its aim" not in metarig.ewbik.status
    assert "spine.006" not in metarig.ewbik.status


def test_scene_documents_keep_the_aim(metarig, tmp_path):
    aim_the_head(metarig, "spine.006", METARIG_HOLDS, "-Z")
    path = tmp_path / "aim.json"
    assert bpy.ops.ewbik.export_scene(filepath=str(path)) == {"FINISHED"}
    document = json.loads(path.read_text())
    aims = {entry["bone"]: entry["aim"] for entry in document["pins"]}
    assert aims["spine.006"] == "-Z" and aims["hand.L"] is None
    props = metarig.pose.bones["spine.006"].ewbik
    props.pin_kind, props.aim_axis = "BOTH", "Y"
    assert bpy.ops.ewbik.import_scene(filepath=str(path)) == {"FINISHED"}
    assert (props.pin_kind, props.aim_axis) == ("AIM", "-Z")


def test_an_aim_the_limits_forbid_is_reported_by_its_angle(metarig):
    """The trunk held stiff and the limits strict: only the neck and head turn, and no neck turns
    to look behind and below."""
    metarig.ewbik.strict_limits = True
    for bone in ("spine", "spine.001", "spine.002", "spine.003", "spine.004"):
        metarig.pose.bones[bone].ewbik.stiffness = 1.0
    looked_at = aim_the_head(metarig, "spine.006", METARIG_HOLDS, forward_axis(metarig, "spine.006"))
    looked_at.location += Vector((0.0, 2.0, -1.5))
    update()
    missed = aim_error_deg(metarig, "spine.006")
    assert missed > 10.0, metarig.ewbik.status
    assert "spine.006" in metarig.ewbik.status and "off its aim" in metarig.ewbik.status
    assert bpy.ops.ewbik.solve() == {"FINISHED"}
    assert "off its aim" in metarig.ewbik.status
