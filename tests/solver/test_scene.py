"""Scene and pose documents: the example scenes solve, and every kind of bad input is named."""

import copy
import importlib.util
import json
import math

import numpy as np
import pytest

import solver
from solver.scene import parse_scene, solve_scene
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
    """INTERFACE.md: `solver.solve_scene(scene: dict) -> dict`."""
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
    assert isinstance(stats["iterations"], int) and 1 <= stats["iterations"] <= doc["settings"]["iterations"]
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
    np.testing.assert_allclose(scene.rotations[i], np.array([0.9, 0.1, 0.3, -0.2]) / np.linalg.norm([0.9, 0.1, 0.3, -0.2]))
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
    "not an object": ([1, 2], r"scene"),
    "wrong format": (edit(lambda d: d.update(format="ewbik-pose")), r"format"),
    "missing format": (edit(lambda d: d.pop("format")), r"format"),
    "wrong version": (edit(lambda d: d.update(version=2)), r"version"),
    "version as text": (edit(lambda d: d.update(version="1")), r"version"),
    "no bones": (edit(lambda d: d.update(bones=[])), r"bones"),
    "bones not a list": (edit(lambda d: d.update(bones={"root": {}})), r"bones"),
    "bone not an object": (edit(lambda d: d["bones"].append("b4")), r"bones\[4\]"),
    "bone without name": (edit(lambda d: d["bones"][1].pop("name")), r"bones\[1\]\.name"),
    "unknown parent": (edit(lambda d: bone_named(d, "b2").update(parent="b9")), r"bone 'b2'.*'b9'"),
    "parent not a string": (edit(lambda d: bone_named(d, "b2").update(parent=1)), r"bone 'b2'.*parent"),
    "cycle": (edit(lambda d: bone_named(d, "root").update(parent="b3")), r"bone '(root|b1|b2|b3)'.*cycle"),
    "duplicate name": (edit(lambda d: bone_named(d, "b3").update(name="b2")), r"bone 'b2'"),
    "missing rest": (edit(lambda d: bone_named(d, "b1").pop("rest")), r"bone 'b1': rest"),
    "rest 3x3": (edit(lambda d: bone_named(d, "b1").update(rest=[[1, 0, 0], [0, 1, 0], [0, 0, 1]])),
                 r"bone 'b1': rest"),
    "NaN in rest": (edit(lambda d: bone_named(d, "b1")["rest"][0].__setitem__(3, float("nan"))), r"bone 'b1': rest"),
    "sheared rest": (edit(lambda d: bone_named(d, "b1")["rest"][0].__setitem__(1, 0.5)), r"bone 'b1': rest"),
    "text in rest": (edit(lambda d: bone_named(d, "b1")["rest"][0].__setitem__(0, "1")), r"bone 'b1': rest"),
    "missing length": (edit(lambda d: bone_named(d, "b1").pop("length")), r"bone 'b1': length"),
    "zero length": (edit(lambda d: bone_named(d, "b1").update(length=0)), r"bone 'b1'.*length"),
    "negative length": (edit(lambda d: bone_named(d, "b1").update(length=-1.0)), r"bone 'b1'.*length"),
    "boolean length": (edit(lambda d: bone_named(d, "b1").update(length=True)), r"bone 'b1': length"),
    "NaN rotation": (edit(lambda d: bone_named(d, "b2").update(rotation=[float("nan"), 0, 0, 0])),
                     r"bone 'b2': rotation"),
    "zero quaternion": (edit(lambda d: bone_named(d, "b2").update(rotation=[0, 0, 0, 0])), r"bone 'b2': rotation"),
    "short rotation": (edit(lambda d: bone_named(d, "b2").update(rotation=[1, 0, 0])), r"bone 'b2': rotation"),
    "infinite location": (edit(lambda d: bone_named(d, "b2").update(location=[0, float("inf"), 0])),
                          r"bone 'b2': location"),
    "stiffness above one": (edit(lambda d: bone_named(d, "b2").update(stiffness=1.5)), r"bone 'b2': stiffness"),
    "unknown bone field": (edit(lambda d: bone_named(d, "b2").update(roll=0.3)), r"bone 'b2'.*'roll'"),
    "pins not a list": (edit(lambda d: d.update(pins={"b3": {}})), r"pins"),
    "pin without bone": (edit(lambda d: d["pins"][1].pop("bone")), r"pins\[1\]\.bone"),
    "pin on unknown bone": (edit(lambda d: d["pins"][1].update(bone="hand")), r"pin 'hand'"),
    "pin twice on a bone": (edit(lambda d: d["pins"].append(copy.deepcopy(d["pins"][1]))), r"pin 'b3'"),
    "pin without target": (edit(lambda d: d["pins"][1].pop("target")), r"pin 'b3': target"),
    "non-4x4 target": (edit(lambda d: d["pins"][1].update(target=[[1, 0, 0, 0]] * 3)), r"pin 'b3': target"),
    "NaN target": (edit(lambda d: d["pins"][1]["target"][1].__setitem__(3, float("nan"))), r"pin 'b3': target"),
    "degenerate target": (edit(lambda d: d["pins"][1].update(target=[[0] * 4] * 3 + [[0, 0, 0, 1]])),
                          r"pin 'b3': target"),
    "negative weight": (edit(lambda d: d["pins"][1].update(weight=-0.5)), r"pin 'b3': weight"),
    "negative orientation weight": (edit(lambda d: d["pins"][1].update(orientation_weights=[1, -1, 1])),
                                    r"pin 'b3': orientation_weights"),
    "two orientation weights": (edit(lambda d: d["pins"][1].update(orientation_weights=[1, 1])),
                                r"pin 'b3': orientation_weights"),
    "falloff above one": (edit(lambda d: d["pins"][1].update(falloff=2.0)), r"pin 'b3': falloff"),
    "unknown pin field": (edit(lambda d: d["pins"][1].update(position=[0, 0, 0])), r"pin 'b3'.*'position'"),
    "settings not an object": (edit(lambda d: d.update(settings=[15])), r"settings"),
    "zero iterations": (edit(lambda d: d["settings"].update(iterations=0)), r"settings: iterations"),
    "fractional iterations": (edit(lambda d: d["settings"].update(iterations=2.5)), r"settings: iterations"),
    "iterations as text": (edit(lambda d: d["settings"].update(iterations="15")), r"settings: iterations"),
    "negative budget": (edit(lambda d: d["settings"].update(time_budget_ms=-1)), r"settings: time_budget_ms"),
    "negative tolerance": (edit(lambda d: d["settings"].update(tolerance=-1e-3)), r"settings: tolerance"),
    "zero dampening": (edit(lambda d: d["settings"].update(dampening=0)), r"settings: dampening"),
    "NaN dampening": (edit(lambda d: d["settings"].update(dampening=float("nan"))), r"settings: dampening"),
    "negative passes": (edit(lambda d: d["settings"].update(stabilization_passes=-1)),
                        r"settings: stabilization_passes"),
    "translate_root as text": (edit(lambda d: d["settings"].update(translate_root="yes")),
                               r"settings: translate_root"),
    "unknown setting": (edit(lambda d: d["settings"].update(iteration=15)), r"settings.*'iteration'"),
    "unknown top-level field": (edit(lambda d: d.update(pin=d.pop("pins"))), r"'pin'"),
}


@pytest.mark.parametrize("case", list(BAD_DOCUMENTS))
def test_bad_documents_raise_value_error_naming_the_culprit(case):
    doc, message = BAD_DOCUMENTS[case]
    with pytest.raises(ValueError, match=message):
        solve_scene(doc)


@pytest.mark.parametrize("limits", [
    {"cones": [{"direction": [0, 0, 0], "radius": 0.5}]},
    {"cones": [{"direction": [0, 1, 0], "radius": -0.5}]},
    {"cones": "wide"},
    {"cones": [{"direction": [0, 1, 0], "radius": 0.5}], "twist": {"min": 0.5}},
    "stiff",
])
def test_bad_limits_raise_value_error_naming_the_bone(limits):
    doc = chain_doc()
    bone_named(doc, "b2")["limits"] = limits
    with pytest.raises(ValueError, match="'b2'"):
        solve_scene(doc)
