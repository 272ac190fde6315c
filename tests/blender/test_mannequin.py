"""tools/mannequin.py, the body in the pictures: a skin that follows the rig's pose."""

import importlib.util
import math

import bpy
import pytest
from mathutils import Quaternion

from tests.support.blender_helpers import REPO_ROOT, pin, update


@pytest.fixture
def mannequin(monkeypatch):
    monkeypatch.syspath_prepend(str(REPO_ROOT))  # the tool imports the solver as a top-level package
    spec = importlib.util.spec_from_file_location("ewbik_mannequin", REPO_ROOT / "tools" / "mannequin.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def evaluated_points(shape):
    mesh = shape.evaluated_get(bpy.context.evaluated_depsgraph_get()).to_mesh()
    points = [shape.matrix_world @ vertex.co for vertex in mesh.vertices]
    shape.evaluated_get(bpy.context.evaluated_depsgraph_get()).to_mesh_clear()
    return points


def test_the_mannequin_is_skinned_to_the_body_bones_and_follows_a_pose(metarig, mannequin):
    targets = pin(metarig, "hand.L")
    body, pinned = mannequin.add(metarig, {"hand.L"})
    mannequin.add_target_rings(metarig, targets)
    groups = {group.name for shape in (body, pinned) for group in shape.vertex_groups}
    assert {"upper_arm.L", "forearm.L", "hand.L", "thigh.R", "spine.006"} <= groups
    assert all(metarig.data.bones[name].use_deform for name in groups)
    assert not any(name.startswith(("face", "nose", "lip", "brow")) for name in groups)
    for vertex in pinned.data.vertices:
        assert sum(group.weight for group in vertex.groups) == pytest.approx(1.0)

    hand = metarig.pose.bones["hand.L"]
    rest = evaluated_points(pinned)
    before = metarig.matrix_world @ hand.matrix
    forearm = metarig.pose.bones["forearm.L"]
    forearm.rotation_mode = "QUATERNION"
    forearm.rotation_quaternion = Quaternion((1.0, 0.0, 0.0), math.radians(60.0))
    update()
    moved = (metarig.matrix_world @ hand.matrix) @ before.inverted()
    only_hand = [i for i, v in enumerate(pinned.data.vertices) if [g.weight for g in v.groups] == [1.0]]
    assert only_hand
    for index, point in zip(only_hand, (evaluated_points(pinned)[i] for i in only_hand)):
        assert (point - moved @ rest[index]).length < 1e-4
