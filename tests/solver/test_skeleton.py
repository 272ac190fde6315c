"""Skeleton: forward kinematics against a plain 4x4 product of Blender's rule, and input checks."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial.transform import Rotation

from solver import Skeleton
from solver.validation import SceneError
from tests.solver.conftest import (
    frame,
    pose_matrices,
    random_tree,
    random_unit_quaternions,
    same_rotation,
    scipy_rotation,
    translation,
    wxyz,
)


def shuffled(rng, names, parents, rest, lengths):
    order = rng.permutation(len(names))
    return [names[i] for i in order], [parents[i] for i in order], rest[order], lengths[order]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 25))
def test_forward_matches_per_bone_matrix_products(seed, n_bones):
    rng = np.random.default_rng(seed)
    names, parents, rest, lengths = shuffled(rng, *random_tree(rng, n_bones))
    rotations = random_unit_quaternions(rng, n_bones)
    locations = rng.normal(scale=0.3, size=(n_bones, 3)) * (rng.random((n_bones, 1)) < 0.5)
    expected = pose_matrices(names, parents, rest, rotations, locations)

    skeleton = Skeleton(names, parents, rest, lengths)
    order = [names.index(n) for n in skeleton.names]
    world_rot, world_head = skeleton.forward(rotations[order], locations[order])
    np.testing.assert_allclose(world_head, expected[order, :3, 3], atol=1e-10)
    np.testing.assert_allclose(scipy_rotation(world_rot).as_matrix(), expected[order, :3, :3], atol=1e-10)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 30))
def test_bones_are_sorted_parents_first_in_any_input_order(seed, n_bones):
    rng = np.random.default_rng(seed)
    names, parents, rest, lengths = shuffled(rng, *random_tree(rng, n_bones))
    skeleton = Skeleton(names, parents, rest, lengths)
    assert sorted(skeleton.names) == sorted(names)
    for i, name in enumerate(skeleton.names):
        assert skeleton.index[name] == i
        parent = parents[names.index(name)]
        if parent is None:
            assert skeleton.parents[i] == -1
        else:
            assert skeleton.names[skeleton.parents[i]] == parent
            assert skeleton.parents[i] < i
        assert skeleton.lengths[i] == lengths[names.index(name)]
        np.testing.assert_allclose(skeleton.rest[i], rest[names.index(name)], atol=1e-12)


def test_rest_pose_reproduces_rest_frames():
    rng = np.random.default_rng(3)
    names, parents, rest, lengths = random_tree(rng, 12)
    skeleton = Skeleton(names, parents, rest, lengths)
    world_rot, world_head = skeleton.forward(np.tile([1.0, 0, 0, 0], (12, 1)), np.zeros((12, 3)))
    order = [names.index(n) for n in skeleton.names]
    np.testing.assert_allclose(world_head, rest[order, :3, 3], atol=1e-12)
    assert same_rotation(world_rot, wxyz(Rotation.from_matrix(rest[order, :3, :3])), atol=1e-12)


def test_forward_does_not_modify_its_inputs():
    rng = np.random.default_rng(4)
    skeleton = Skeleton(*random_tree(rng, 6))
    rotations = random_unit_quaternions(rng, 6)
    locations = rng.normal(size=(6, 3))
    r0, l0 = rotations.copy(), locations.copy()
    skeleton.forward(rotations, locations)
    assert np.array_equal(rotations, r0) and np.array_equal(locations, l0)


def test_a_hand_built_arm_bends_at_the_elbow():
    """Upper arm along +X, forearm continuing: turning the upper arm 90 deg about Z lifts the hand."""
    down_x = Rotation.from_rotvec([0, 0, -math.pi / 2]).as_matrix()  # bone Y axis -> +X
    rest = [frame(down_x, (0, 0, 0)), frame(down_x, (0.3, 0, 0)), frame(down_x, (0.55, 0, 0))]
    skeleton = Skeleton(["upper", "fore", "hand"], [None, "upper", "fore"], rest, [0.3, 0.25, 0.1])
    rotations = np.tile([1.0, 0, 0, 0], (3, 1))
    rotations[0] = [math.cos(math.pi / 4), 0, 0, math.sin(math.pi / 4)]  # about the bone's own Z
    _, heads = skeleton.forward(rotations, np.zeros((3, 3)))
    np.testing.assert_allclose(heads, [[0, 0, 0], [0, 0.3, 0], [0, 0.55, 0]], atol=1e-12)


def test_scaled_rest_matrices_are_treated_as_rigid():
    rest = [frame(Rotation.from_rotvec([0.2, 0.1, 0]).as_matrix() * 2.5, (1, 2, 3))]
    skeleton = Skeleton(["a"], [None], rest, [1.0])
    np.testing.assert_allclose(skeleton.rest[0][:3, :3], rest[0][:3, :3] / 2.5, atol=1e-12)


def test_ancestors_and_levels():
    names = ["hips", "spine", "head", "thigh", "shin"]
    parents = [None, "hips", "spine", "hips", "thigh"]
    rest = [translation((0, i, 0)) for i in range(5)]
    skeleton = Skeleton(names, parents, rest, [1.0] * 5)
    chain = [skeleton.names[i] for i in skeleton.ancestors(skeleton.index["shin"])]
    assert chain == ["shin", "thigh", "hips"]
    assert [sorted(skeleton.names[i] for i in level) for level in skeleton.levels] == [
        ["hips"],
        ["spine", "thigh"],
        ["head", "shin"],
    ]


# ------------------------------------------------------------------ validation


def chain(n=3):
    names = [f"b{i}" for i in range(n)]
    return names, [None] + names[:-1], [translation((0, i, 0)) for i in range(n)], [1.0] * n


def expect_error(field, names, parents, rest, lengths):
    with pytest.raises(SceneError) as err:
        Skeleton(names, parents, rest, lengths)
    assert err.value.field == field
    return err.value


def test_unknown_parent_names_the_bone():
    names, parents, rest, lengths = chain()
    parents[2] = "nope"
    assert "'b2'" in str(expect_error("bones[2].parent", names, parents, rest, lengths))


@pytest.mark.parametrize(
    "parents, field",
    [
        (["b2", "b0", "b1"], "bones[0].parent"),
        ([None, "b2", "b1"], "bones[1].parent"),
        ([None, "b1", "b1"], "bones[1].parent"),
    ],
)
def test_cycles_are_rejected_naming_a_bone(parents, field):
    names, _, rest, lengths = chain()
    expect_error(field, names, parents, rest, lengths)


def test_cycle_message_names_a_bone_on_the_cycle():
    names, _, rest, lengths = chain(4)
    error = expect_error("bones[1].parent", names, [None, "b3", "b1", "b2"], rest, lengths)
    assert "'b1'" in str(error) and "cycle" in str(error)


def test_duplicate_names_are_rejected():
    names, parents, rest, lengths = chain()
    names[2] = "b1"
    parents[2] = "b0"
    expect_error("bones[2].name", names, parents, rest, lengths)


@pytest.mark.parametrize("length", [0.0, -1.0, float("nan"), float("inf"), 1e-9, 1e300, True, "1"])
def test_bad_lengths_name_the_bone(length):
    names, parents, rest, lengths = chain()
    lengths[1] = length
    expect_error("bones[1].length", names, parents, rest, lengths)


def test_nan_rest_names_the_bone():
    names, parents, rest, lengths = chain()
    rest[2] = rest[2].copy()
    rest[2][0, 3] = float("nan")
    expect_error("bones[2].rest[0][3]", names, parents, rest, lengths)


@pytest.mark.parametrize(
    "basis",
    [
        np.array([[1.0, 0.5, 0], [0, 1, 0], [0, 0, 1]]),  # sheared
        np.diag([1.0, 1.0, -1.0]),  # mirrored
        np.diag([1.0, 0.0, 1.0]),  # collapsed axis
    ],
)
def test_non_rigid_rest_names_the_bone(basis):
    names, parents, rest, lengths = chain()
    rest[1] = frame(basis, (0, 1, 0))
    expect_error("bones[1].rest", names, parents, rest, lengths)


def test_per_axis_scale_of_an_orthogonal_rest_is_removed():
    names, parents, rest, lengths = chain()
    rest[1] = frame(np.diag([1.0, 2.0, 1.0]), (0, 1, 0))
    skeleton = Skeleton(names, parents, rest, lengths)
    np.testing.assert_allclose(skeleton.rest[1][:3, :3], np.eye(3), atol=1e-12)


def test_rest_must_be_4x4():
    names, parents, rest, lengths = chain()
    rest = list(rest)
    rest[0] = np.eye(3)
    expect_error("bones[0].rest", names, parents, rest, lengths)


@pytest.mark.parametrize(
    "names, field",
    [([], "bones"), (["b0", 3, "b2"], "bones[1].name"), (["b0", "b\x001", "b2"], "bones[1].name")],
)
def test_empty_skeletons_and_bad_names_are_refused(names, field):
    _, _, rest, lengths = chain(len(names))
    expect_error(field, names, [None] * len(names), rest, lengths)


def test_counts_must_agree():
    names, parents, rest, lengths = chain()
    expect_error("bones", names, parents, rest, lengths[:2])


# ------------------------------------------------------------------ stacked arrays (the bridge's form)


def as_arrays(rest, lengths):
    return np.array([np.asarray(m, dtype=float) for m in rest]), np.array(lengths, dtype=float)


def test_stacked_arrays_give_the_skeleton_bone_by_bone_input_gives():
    rng = np.random.default_rng(7)
    names, parents, rest, lengths = shuffled(rng, *random_tree(rng, 30))
    rest = rest * rng.uniform(0.5, 2.0, size=(30, 1, 4))  # per-axis scale, removed by both paths
    rest[:, 3] = (0.0, 0.0, 0.0, 1.0)
    stacked = Skeleton(names, parents, *as_arrays(rest, lengths))
    listed = Skeleton(names, parents, [m.tolist() for m in rest], [float(x) for x in lengths])
    assert stacked.names == listed.names
    np.testing.assert_array_equal(stacked.rest, listed.rest)
    np.testing.assert_array_equal(stacked.lengths, listed.lengths)
    np.testing.assert_array_equal(stacked.local_offset, listed.local_offset)


@pytest.mark.parametrize(
    "bone, basis, field",
    [
        (1, np.array([[1.0, 0.5, 0], [0, 1, 0], [0, 0, 1]]), "bones[1].rest"),
        (2, np.diag([1.0, 1.0, -1.0]), "bones[2].rest"),
        (1, np.diag([1.0, 0.0, 1.0]), "bones[1].rest"),
    ],
)
def test_stacked_arrays_name_the_non_rigid_bone(bone, basis, field):
    names, parents, rest, lengths = chain(4)
    rest[bone] = frame(basis, (0, bone, 0))
    assert f"(bone 'b{bone}')" in str(expect_error(field, names, parents, *as_arrays(rest, lengths)))


@pytest.mark.parametrize("where, value", [("length", float("nan")), ("length", 0.0), ("rest", float("inf"))])
def test_stacked_arrays_name_the_bone_of_a_bad_number(where, value):
    names, parents, rest, lengths = chain(4)
    rest, lengths = as_arrays(rest, lengths)
    if where == "length":
        lengths[2] = value
        expect_error("bones[2].length", names, parents, rest, lengths)
    else:
        rest[2, 1, 3] = value
        expect_error("bones[2].rest[1][3]", names, parents, rest, lengths)


def test_stacked_arrays_report_the_first_bad_bone_parents_first():
    names, parents, rest, lengths = chain(4)
    names, parents, rest, lengths = names[::-1], parents[::-1], rest[::-1], lengths[::-1]  # b3 given first
    rest[0] = frame(np.diag([1.0, 1.0, -1.0]), (0, 3, 0))  # b3, solved after b1
    rest[2] = frame(np.diag([1.0, 1.0, -1.0]), (0, 1, 0))  # b1
    expect_error("bones[2].rest", names, parents, *as_arrays(rest, lengths))


def test_the_whole_skeletons_pass_survives_many_partial_ones():
    """Forward passes over many subsets of bones (a crowd's limbs) are packed and dropped oldest
    first; the pass over every bone stays as it was."""
    rng = np.random.default_rng(3)
    names, parents, rest, lengths = random_tree(rng, 40)
    skeleton = Skeleton(names, parents, rest, lengths)
    rotations, locations = random_unit_quaternions(rng, 40), rng.normal(size=(40, 3)) * 0.1
    world, head = np.empty((40, 3, 3)), np.empty((40, 3))
    skeleton.forward_into(rotations, locations, world, head)
    expected = world.copy(), head.copy()
    for bone in range(300):
        roots, steps = skeleton.kinematic_levels([bone % 40, (bone * 7) % 40])
        skeleton.forward_into(rotations, locations, world, head, (roots.copy(), list(steps)))
    skeleton.forward_into(rotations, locations, world, head)
    np.testing.assert_allclose(world, expected[0], atol=1e-12)
    np.testing.assert_allclose(head, expected[1], atol=1e-12)
