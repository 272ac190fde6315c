"""Scene and pose documents: the example scenes solve, and every kind of bad input is named."""

import copy
import dataclasses
import importlib.util
import json
import math

import numpy as np
import pytest

import solver
from solver import Pin, Skeleton, SolverSettings, solve
from solver.kusudama import JointLimits, Kusudama, LimitCone, TwistLimit
from solver.scene import (
    SETTINGS_FIELDS,
    Scene,
    parse_scene,
    pose_document,
    scene_bone,
    scene_document,
    scene_pin,
    scene_settings,
    solve_scene,
)
from solver.validation import SceneError
from tests.solver.conftest import EXAMPLES, REPO, load_example, pose_matrices

EXAMPLE_FILES = sorted(p.name for p in EXAMPLES.glob("*.json"))


def world_pose(doc, pose):
    """Armature-space 4x4 of every bone of `doc` posed by `pose`, via the independent matrix oracle."""
    names = [b["name"] for b in doc["bones"]]
    parents = [b["parent"] for b in doc["bones"]]
    rest = np.array([b["rest"] for b in doc["bones"]], dtype=float)
    rest[:, :3, :3] /= np.linalg.norm(rest[:, :3, :3], axis=1, keepdims=True)
    rotations = np.array([pose["bones"][n]["rotation"] for n in names])
    locations = np.array([pose["bones"][n]["location"] for n in names])
    return dict(zip(names, pose_matrices(names, parents, rest, rotations, locations)))


def warm_start(doc, pose):
    """The scene document with the pose document's rotations and locations as its current pose."""
    doc = copy.deepcopy(doc)
    for bone in doc["bones"]:
        bone["rotation"] = pose["bones"][bone["name"]]["rotation"]
        bone["location"] = pose["bones"][bone["name"]]["location"]
    return doc


def test_examples_exist():
    assert {"whole_chain_reference.json", "humanoid_reach.json", "two_arms.json"} <= set(EXAMPLE_FILES)


def test_examples_match_their_generator():
    spec = importlib.util.spec_from_file_location("make_examples", REPO / "tools" / "make_examples.py")
    make_examples = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_examples)
    for filename, build in make_examples.SCENES.items():
        assert json.loads(json.dumps(build())) == load_example(filename), filename


def test_solve_scene_is_exported_by_the_package():
    """docs/INTERFACE.md: `solver.solve_scene(scene: dict) -> dict`."""
    assert solver.solve_scene is solve_scene


@pytest.mark.parametrize("filename", EXAMPLE_FILES)
def test_example_scene_gives_a_complete_pose_document(filename):
    doc = load_example(filename)
    pose = solve_scene(doc)
    json.loads(json.dumps(pose, allow_nan=False))
    assert pose["format"] == "ewbik-pose" and pose["version"] == 1
    assert set(pose["bones"]) == {b["name"] for b in doc["bones"]}
    for entry in pose["bones"].values():
        assert len(entry["rotation"]) == 4 and len(entry["location"]) == 3
        assert math.isclose(np.linalg.norm(entry["rotation"]), 1.0, abs_tol=1e-9)
    stats = pose["stats"]
    rounds = len(doc["pins"]) + 1  # a solve per pin that gives way, and the last
    assert (
        isinstance(stats["iterations"], int)
        and 1 <= stats["iterations"] <= doc["settings"]["iterations"] * rounds
    )
    assert isinstance(stats["converged"], bool)
    assert stats["ms"] >= 0
    assert set(stats["pins"]) == {p["bone"] for p in doc["pins"]}
    for err in stats["pins"].values():
        assert set(err) == {"position_error", "orientation_error_deg"}
        assert err["position_error"] >= 0 and err["orientation_error_deg"] >= 0


@pytest.mark.parametrize("filename", EXAMPLE_FILES)
def test_reported_errors_agree_with_the_posed_skeleton(filename):
    doc = load_example(filename)
    pose = solve_scene(doc)
    world = world_pose(doc, pose)
    for pin in doc["pins"]:
        reached = world[pin["bone"]][:3, 3]
        gap = np.linalg.norm(reached - np.array(pin["target"])[:3, 3])
        assert gap == pytest.approx(pose["stats"]["pins"][pin["bone"]]["position_error"], abs=1e-9)


def test_warm_starting_through_documents_matches_the_library():
    """Feeding each pose document back as the next scene's pose is the same as solve() warm-started."""
    doc = load_example("whole_chain_reference.json")
    scene = parse_scene(doc)
    rotations, locations = scene.rotations, scene.locations
    for _ in range(20):
        pose = solve_scene(doc)
        doc = warm_start(doc, pose)
        result = solver.solve(scene.skeleton, scene.pins, rotations, locations, scene.settings)
        rotations, locations = result.rotations, result.locations
    for name, i in scene.skeleton.index.items():
        np.testing.assert_allclose(pose["bones"][name]["rotation"], rotations[i], atol=1e-12)
        np.testing.assert_allclose(pose["bones"][name]["location"], locations[i], atol=1e-12)
    world = world_pose(doc, pose)
    assert np.linalg.norm(world["b3"][:3, 3] - [1.2, 2.5, 0.7]) < 0.06


def test_humanoid_reach_moves_the_arm_and_leaves_the_head_alone():
    doc = load_example("humanoid_reach.json")
    pose = solve_scene(doc)
    assert pose["stats"]["converged"]
    world = world_pose(doc, pose)
    for pin in doc["pins"]:
        np.testing.assert_allclose(world[pin["bone"]], pin["target"], atol=2e-4)
    for name in ("neck", "head"):
        assert pose["bones"][name] == {"rotation": [1.0, 0.0, 0.0, 0.0], "location": [0.0, 0.0, 0.0]}
    assert pose["bones"]["upper_arm.L"]["rotation"] != [1.0, 0.0, 0.0, 0.0]


def test_two_arms_reach_both_targets():
    doc = load_example("two_arms.json")
    pose = solve_scene(doc)
    world = world_pose(doc, pose)
    for pin in doc["pins"]:
        assert pose["stats"]["pins"][pin["bone"]]["position_error"] < 1e-3
        np.testing.assert_allclose(world[pin["bone"]][:3, 3], np.array(pin["target"])[:3, 3], atol=1e-3)


def test_bones_in_any_order_and_defaults():
    doc = load_example("whole_chain_reference.json")
    reordered = copy.deepcopy(doc)
    reordered["bones"].reverse()
    del reordered["settings"]
    for pin in reordered["pins"]:
        pin.pop("orientation_weights", None)
    scene = parse_scene(reordered)
    assert scene.skeleton.names == ("root", "b1", "b2", "b3")
    np.testing.assert_array_equal(scene.rotations, np.tile([1.0, 0, 0, 0], (4, 1)))
    np.testing.assert_array_equal(scene.locations, np.zeros((4, 3)))
    np.testing.assert_array_equal(scene.stiffness, np.zeros(4))
    assert scene.settings == solver.SolverSettings()
    assert [p.weight for p in scene.pins] == [1.0, 1.0]
    assert [p.orientation_weights for p in scene.pins] == [(1.0, 1.0, 1.0)] * 2
    assert parse_scene(reordered).limits is None


def test_scene_without_pins_returns_the_pose_unchanged():
    doc = load_example("humanoid_reach.json")
    doc["pins"] = []
    doc["bones"][3]["rotation"] = [0.0, 0.0, 0.0, 2.0]
    pose = solve_scene(doc)
    assert pose["stats"]["pins"] == {} and pose["stats"]["converged"]
    assert pose["bones"][doc["bones"][3]["name"]]["rotation"] == [0.0, 0.0, 0.0, 1.0]


def test_rotation_and_location_of_the_document_are_the_warm_start():
    doc = load_example("two_arms.json")
    doc["pins"] = doc["pins"][:1]
    doc["bones"][-1]["rotation"] = [0.9, 0.1, 0.3, -0.2]
    doc["bones"][0]["location"] = [0.1, 0.0, 0.0]
    scene = parse_scene(doc)
    i = scene.skeleton.index[doc["bones"][-1]["name"]]
    np.testing.assert_allclose(
        scene.rotations[i], np.array([0.9, 0.1, 0.3, -0.2]) / np.linalg.norm([0.9, 0.1, 0.3, -0.2])
    )
    np.testing.assert_allclose(scene.locations[scene.skeleton.index[doc["bones"][0]["name"]]], [0.1, 0, 0])


# ------------------------------------------------------------------ bad documents


def chain_doc():
    return load_example("whole_chain_reference.json")


def bone_named(doc, name):
    return next(b for b in doc["bones"] if b["name"] == name)


def edit(change):
    doc = chain_doc()
    change(doc)
    return doc


BAD_DOCUMENTS = {
    "not an object": ([1, 2], ""),
    "wrong format": (edit(lambda d: d.update(format="ewbik-pose")), "format"),
    "missing format": (edit(lambda d: d.pop("format")), "format"),
    "wrong version": (edit(lambda d: d.update(version=2)), "version"),
    "version as text": (edit(lambda d: d.update(version="1")), "version"),
    "version as true": (edit(lambda d: d.update(version=True)), "version"),
    "no bones": (edit(lambda d: d.update(bones=[])), "bones"),
    "bones not a list": (edit(lambda d: d.update(bones={"root": {}})), "bones"),
    "bone not an object": (edit(lambda d: d["bones"].append("b4")), "bones[4]"),
    "bone without name": (edit(lambda d: d["bones"][1].pop("name")), "bones[1].name"),
    "name with NUL": (edit(lambda d: d["bones"][1].update(name="b\x001")), "bones[1].name"),
    "unknown parent": (edit(lambda d: bone_named(d, "b2").update(parent="b9")), "bones[2].parent"),
    "parent not a string": (edit(lambda d: bone_named(d, "b2").update(parent=1)), "bones[2].parent"),
    "cycle": (edit(lambda d: bone_named(d, "root").update(parent="b3")), "bones[0].parent"),
    "duplicate name": (edit(lambda d: bone_named(d, "b3").update(name="b2")), "bones[3].name"),
    "missing rest": (edit(lambda d: bone_named(d, "b1").pop("rest")), "bones[1].rest"),
    "rest 3x3": (
        edit(lambda d: bone_named(d, "b1").update(rest=[[1, 0, 0], [0, 1, 0], [0, 0, 1]])),
        "bones[1].rest",
    ),
    "NaN in rest": (
        edit(lambda d: bone_named(d, "b1")["rest"][0].__setitem__(3, float("nan"))),
        "bones[1].rest[0][3]",
    ),
    "huge rest": (
        edit(lambda d: bone_named(d, "b1")["rest"][0].__setitem__(3, 1e200)),
        "bones[1].rest[0][3]",
    ),
    "sheared rest": (edit(lambda d: bone_named(d, "b1")["rest"][0].__setitem__(1, 0.5)), "bones[1].rest"),
    "text in rest": (
        edit(lambda d: bone_named(d, "b1")["rest"][0].__setitem__(0, "1")),
        "bones[1].rest[0][0]",
    ),
    "missing length": (edit(lambda d: bone_named(d, "b1").pop("length")), "bones[1].length"),
    "zero length": (edit(lambda d: bone_named(d, "b1").update(length=0)), "bones[1].length"),
    "negative length": (edit(lambda d: bone_named(d, "b1").update(length=-1.0)), "bones[1].length"),
    "boolean length": (edit(lambda d: bone_named(d, "b1").update(length=True)), "bones[1].length"),
    "400-digit length": (edit(lambda d: bone_named(d, "b1").update(length=10**400)), "bones[1].length"),
    "NaN rotation": (
        edit(lambda d: bone_named(d, "b2").update(rotation=[float("nan"), 0, 0, 0])),
        "bones[2].rotation[0]",
    ),
    "zero quaternion": (
        edit(lambda d: bone_named(d, "b2").update(rotation=[0, 0, 0, 0])),
        "bones[2].rotation",
    ),
    "overflowing quaternion": (
        edit(lambda d: bone_named(d, "b2").update(rotation=[1e300, 1e300, 0, 0])),
        "bones[2].rotation[0]",
    ),
    "short rotation": (edit(lambda d: bone_named(d, "b2").update(rotation=[1, 0, 0])), "bones[2].rotation"),
    "infinite location": (
        edit(lambda d: bone_named(d, "b2").update(location=[0, float("inf"), 0])),
        "bones[2].location[1]",
    ),
    "stiffness above one": (edit(lambda d: bone_named(d, "b2").update(stiffness=1.5)), "bones[2].stiffness"),
    "unknown bone field": (edit(lambda d: bone_named(d, "b2").update(roll=0.3)), "bones[2].roll"),
    "unknown rotation mode": (
        edit(lambda d: bone_named(d, "b2").update(blender={"rotation_mode": "XXY"})),
        "bones[2].blender.rotation_mode",
    ),
    "lock as a number": (
        edit(lambda d: bone_named(d, "b2").update(blender={"lock_rotation": [0, 1, 0]})),
        "bones[2].blender.lock_rotation[0]",
    ),
    "pins not a list": (edit(lambda d: d.update(pins={"b3": {}})), "pins"),
    "pin without bone": (edit(lambda d: d["pins"][1].pop("bone")), "pins[1].bone"),
    "pin on unknown bone": (edit(lambda d: d["pins"][1].update(bone="hand")), "pins[1].bone"),
    "pin twice on a bone": (edit(lambda d: d["pins"].append(copy.deepcopy(d["pins"][1]))), "pins[2].bone"),
    "pin without target": (edit(lambda d: d["pins"][1].pop("target")), "pins[1].target"),
    "non-4x4 target": (edit(lambda d: d["pins"][1].update(target=[[1, 0, 0, 0]] * 3)), "pins[1].target"),
    "NaN target": (
        edit(lambda d: d["pins"][1]["target"][1].__setitem__(3, float("nan"))),
        "pins[1].target[1][3]",
    ),
    "far target": (
        edit(lambda d: d["pins"][1]["target"][1].__setitem__(3, 1.34e154)),
        "pins[1].target[1][3]",
    ),
    "degenerate target": (
        edit(lambda d: d["pins"][1].update(target=[[0] * 4] * 3 + [[0, 0, 0, 1]])),
        "pins[1].target",
    ),
    "negative weight": (edit(lambda d: d["pins"][1].update(weight=-0.5)), "pins[1].weight"),
    "huge weight": (edit(lambda d: d["pins"][1].update(weight=9e307)), "pins[1].weight"),
    "tiny weight": (edit(lambda d: d["pins"][1].update(weight=1e-200)), "pins[1].weight"),
    "negative orientation weight": (
        edit(lambda d: d["pins"][1].update(orientation_weights=[1, -1, 1])),
        "pins[1].orientation_weights[1]",
    ),
    "two orientation weights": (
        edit(lambda d: d["pins"][1].update(orientation_weights=[1, 1])),
        "pins[1].orientation_weights",
    ),
    "falloff above one": (edit(lambda d: d["pins"][1].update(falloff=2.0)), "pins[1].falloff"),
    "unknown pin field": (edit(lambda d: d["pins"][1].update(position=[0, 0, 0])), "pins[1].position"),
    "settings not an object": (edit(lambda d: d.update(settings=[15])), "settings"),
    "zero iterations": (edit(lambda d: d["settings"].update(iterations=0)), "settings.iterations"),
    "fractional iterations": (edit(lambda d: d["settings"].update(iterations=2.5)), "settings.iterations"),
    "iterations as text": (edit(lambda d: d["settings"].update(iterations="15")), "settings.iterations"),
    "400-digit iterations": (edit(lambda d: d["settings"].update(iterations=10**400)), "settings.iterations"),
    "negative budget": (edit(lambda d: d["settings"].update(time_budget_ms=-1)), "settings.time_budget_ms"),
    "negative tolerance": (edit(lambda d: d["settings"].update(tolerance=-1e-3)), "settings.tolerance"),
    "huge tolerance": (edit(lambda d: d["settings"].update(tolerance=1.35e154)), "settings.tolerance"),
    "zero dampening": (edit(lambda d: d["settings"].update(dampening=0)), "settings.dampening"),
    "NaN dampening": (edit(lambda d: d["settings"].update(dampening=float("nan"))), "settings.dampening"),
    "negative passes": (
        edit(lambda d: d["settings"].update(stabilization_passes=-1)),
        "settings.stabilization_passes",
    ),
    "translate_root as text": (
        edit(lambda d: d["settings"].update(translate_root="yes")),
        "settings.translate_root",
    ),
    "exact as text": (edit(lambda d: d["settings"].update(exact="no")), "settings.exact"),
    "relaxation of two": (edit(lambda d: d["settings"].update(relaxation=2)), "settings.relaxation"),
    "backend in a document": (edit(lambda d: d["settings"].update(backend="numpy")), "settings.backend"),
    "unknown setting": (edit(lambda d: d["settings"].update(iteration=15)), "settings.iteration"),
    "unknown top-level field": (edit(lambda d: d.update(pin=d.pop("pins"))), "pin"),
}


@pytest.mark.parametrize("case", list(BAD_DOCUMENTS))
def test_bad_documents_raise_scene_error_naming_the_field(case):
    doc, field = BAD_DOCUMENTS[case]
    with pytest.raises(SceneError) as err:
        solve_scene(doc)
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}: " if field else "the document must be an object")


@pytest.mark.parametrize(
    "limits, field",
    [
        ({"cones": [{"direction": [0, 0, 0], "radius": 0.5}]}, "bones[2].limits.cones[0].direction"),
        ({"cones": [{"direction": [0, 1, 0], "radius": -0.5}]}, "bones[2].limits.cones[0].radius"),
        ({"cones": "wide"}, "bones[2].limits.cones"),
        (
            {"cones": [{"direction": [0, 1, 0], "radius": 0.5}], "twist": {"min": 0.5}},
            "bones[2].limits.twist.max",
        ),
        ("stiff", "bones[2].limits"),
    ],
)
def test_bad_limits_raise_scene_error_naming_the_bone_and_field(limits, field):
    doc = chain_doc()
    bone_named(doc, "b2")["limits"] = limits
    with pytest.raises(SceneError) as err:
        solve_scene(doc)
    assert err.value.field == field
    assert "'b2'" in str(err.value)


def test_every_solver_setting_travels_in_a_document():
    """The document's settings are SolverSettings' fields (less the choice of loop), all of them parsed."""
    changed = {
        "iterations": 7,
        "time_budget_ms": 50.0,
        "tolerance": 1e-4,
        "dampening": 0.2,
        "stabilization_passes": 2,
        "translate_root": True,
        "exact": False,
        "relaxation": 1.3,
        "acceleration": 0,
        "analytic_limbs": False,
        "stage_targets": False,
        "pins_give_way": False,
        "strict_limits": True,
        "soft_reach": 0.03,
        "balance": True,
    }
    fields = {f.name for f in dataclasses.fields(solver.SolverSettings)} - {"backend"}
    assert set(changed) == set(SETTINGS_FIELDS) == fields
    doc = edit(lambda d: d.update(settings=changed))
    assert dataclasses.asdict(parse_scene(doc).settings) == {**changed, "backend": "auto"}


def test_blender_fields_are_accepted_and_ignored_by_the_solver():
    plain = chain_doc()
    marked = edit(
        lambda d: bone_named(d, "b2").update(
            blender={
                "rotation_mode": "YZX",
                "lock_rotation": [True, False, False],
                "lock_rotation_w": False,
                "lock_rotations_4d": False,
                "lock_location": [True, True, True],
                "connected": True,
                "collections": ["Arms", "IK"],
            }
        )
    )
    assert solve_scene(marked)["bones"] == solve_scene(plain)["bones"]


def written(scene):
    """The document of a `Scene`, every field written by `scene_document` and its parts."""
    skeleton = scene.skeleton
    kusudamas = scene.limits.kusudamas if scene.limits is not None else {}
    bones = [
        scene_bone(
            name,
            None if parent < 0 else skeleton.names[parent],
            skeleton.rest[i],
            skeleton.lengths[i],
            rotation=scene.rotations[i],
            location=scene.locations[i],
            stiffness=scene.stiffness[i],
            stretch=scene.stretch[i],
            limits=kusudamas[i].to_dict() if i in kusudamas else None,
        )
        for i, (name, parent) in enumerate(zip(skeleton.names, skeleton.parents))
    ]
    return scene_document(bones, [scene_pin(pin) for pin in scene.pins], scene_settings(scene.settings))


def solver_inputs():
    """A Scene of every kind of input, in numbers a document carries exactly (rest frames and
    turns that parsing normalizes to themselves)."""
    bones = [
        ("hips", None, (0.0, 0.0, 1.0), 0.2, False),
        ("chest", "hips", (0.0, 0.2, 1.0), 0.4, False),
        ("arm.L", "chest", (0.2, 0.5, 1.0), 0.3, False),
        ("hand.L", "arm.L", (0.2, 0.8, 1.0), 0.1, False),
        ("arm.R", "chest", (-0.2, 0.5, 1.0), 0.3, False),
        ("hand.R", "arm.R", (-0.2, 0.8, 1.0), 0.1, False),
        ("leg.L", "hips", (0.1, 0.0, 1.0), 0.5, True),
        ("foot.L", "leg.L", (0.1, -0.5, 1.0), 0.4, True),
    ]
    rest = []
    for _, _, head, _, down in bones:
        matrix = np.diag([-1.0, -1.0, 1.0, 1.0]) if down else np.eye(4)
        matrix[:3, 3] = head
        rest.append(matrix)
    skeleton = Skeleton([b[0] for b in bones], [b[1] for b in bones], rest, [b[3] for b in bones])
    n, index = len(skeleton), skeleton.index
    rotations = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
    rotations[index["arm.L"]] = (0.96, 0.0, 0.28, 0.0)
    rotations[index["leg.L"]] = (0.9, 0.3, -0.3, 0.1)
    locations = np.zeros((n, 3))
    locations[index["hips"]] = (0.01, -0.02, 0.03)
    stiffness, stretch = np.zeros(n), np.ones(n)
    stiffness[index["chest"]] = 0.4
    stretch[index["arm.R"]] = 1.5
    elbow = Kusudama(
        [LimitCone((1.0, 0.0, 0.0), 0.7), LimitCone((0.0, 1.0, 0.0), 0.4)], TwistLimit(-0.3, 0.5), 0.2
    )
    targets = [np.eye(4) for _ in range(3)]
    for target, place in zip(targets, ((0.5, 0.9, 1.2), (-0.3, 1.0, 0.9), (0.1, -0.9, 1.0))):
        target[:3, 3] = place
    pins = [
        Pin("hand.L", targets[0], 2.0, (0.5, 1.0, 0.0), 0.2, 1.0, (0.4, 0.3, 0.0)),
        Pin("hand.R", targets[1], aim="Y"),
        Pin("foot.L", targets[2]),
    ]
    limits = JointLimits({index["arm.L"]: elbow}, n)
    settings = SolverSettings(iterations=40, tolerance=1e-6, time_budget_ms=None)
    return Scene(skeleton, pins, rotations, locations, stiffness, limits, settings, stretch)


def test_a_written_document_reads_back_as_what_it_was_written_from():
    """`scene_document` writes what `parse_scene` reads: the parsed document writes the same
    document again, and solves as the inputs it was written from do."""
    inputs = solver_inputs()
    document = json.loads(json.dumps(written(inputs)))
    assert written(parse_scene(document)) == document
    solved = solve_scene(document)
    expected = pose_document(inputs, solve(**vars(inputs)))
    assert solved["bones"] == expected["bones"]
    assert solved["stats"]["pins"] == expected["stats"]["pins"]
    assert solved["stats"]["iterations"] == expected["stats"]["iterations"]


def test_scene_document_writes_only_the_fields_given():
    bone = scene_bone("b", None, np.eye(4), np.float64(0.5), stiffness=np.float64(0.25))
    assert bone == {"name": "b", "parent": None, "rest": np.eye(4).tolist(), "length": 0.5, "stiffness": 0.25}
    assert type(bone["length"]) is float and type(bone["stiffness"]) is float
    assert scene_document([bone]) == {"format": "ewbik-scene", "version": 1, "bones": [bone], "pins": []}
    assert parse_scene(scene_document([bone], settings={"iterations": 3})).settings.iterations == 3
