"""Generated scene documents (valid, near-valid mutations, junk) through both loops.

Every document is either refused with a `SceneError` naming a field, or solved to a finite pose
of unit quaternions whose "converged" the reported pin errors confirm. Any other exception, a
NaN, or a false "converged" fails. The short run here takes a few seconds per loop; `make fuzz`
runs many more documents (EWBIK_FUZZ_DOCUMENTS) and some through the CLI (EWBIK_FUZZ_CLI_DOCUMENTS),
and prints the counts.
"""

import collections
import copy
import dataclasses
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from solver import native
from solver.scene import ROTATION_MODES, parse_scene, pose_document
from solver.solve import solve
from solver.validation import MAX_COORDINATE, MAX_WEIGHT, MIN_WEIGHT, SceneError
from tests.solver.conftest import REPO, frame

pytestmark = pytest.mark.compares_backends

NASTY = [
    float("nan"),
    float("inf"),
    -float("inf"),
    1e308,
    -1e308,
    1.34e154,
    9e307,
    1e-320,
    1e-200,
    0,
    -0.0,
    -1,
    10**400,
    2**63,
    2**31,
    True,
    False,
    None,
    "0",
    "",
    "\x00",
    "hand",
    "b\ud800",  # a lone surrogate: JSON can spell it, UTF-8 (and so Blender) cannot
    "é" * 32,  # 64 bytes: one more than a Blender name holds (the import refuses it, the solver not)
    [],
    {},
    [1, 2, 3],
    [[[]]],
    [0, 0, 0],
    [0, 0, 0, 0],
    [1e300, 1e300, 1e300, 1e300],
    {"format": "ewbik-scene"},
    1e7,
    1e7 + 1,
    1e6,
    1e-6,
    math.pi,
    4 * math.pi + 1e-9,
]


def backends():
    return ("native", "numpy") if native.available() else ("numpy",)


# ------------------------------------------------------------------ documents


def random_rotation(rng):
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    w, x, y, z = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def log_uniform(rng, low, high):
    return float(math.exp(rng.uniform(math.log(low), math.log(high))))


def valid_document(rng):
    """A random rig (1..10 bones, any size from 1e-4 to 1e4), pose, limits, pins and settings."""
    scale = log_uniform(rng, 1e-4, 1e4)
    n = int(rng.integers(1, 11))
    bones, rests = [], []
    for i in range(n):
        parent = None if i == 0 else int(rng.integers(0, i))
        length = scale * log_uniform(rng, 0.05, 1.0)
        rotation = random_rotation(rng)
        if parent is None:
            head = rng.normal(size=3) * scale
        else:
            p = np.array(rests[parent])
            head = p[:3, 3] + p[:3, 1] * bones[parent]["length"] * float(rng.random() < 0.8)
        rests.append(frame(rotation, head).tolist())
        bone = {
            "name": f"bone{i}",
            "parent": None if parent is None else f"bone{parent}",
            "rest": rests[-1],
            "length": length,
        }
        _random_pose(rng, bone, scale)
        bones.append(bone)
    pins = [
        _random_pin(rng, f"bone{i}", scale) for i in rng.permutation(n)[: int(rng.integers(0, min(n, 4) + 1))]
    ]
    return {
        "format": "ewbik-scene",
        "version": 1,
        "bones": bones,
        "pins": pins,
        "settings": _random_settings(rng, scale),
    }


def _random_pose(rng, bone, scale):
    if rng.random() < 0.7:
        bone["rotation"] = rng.normal(size=4).tolist()
    if rng.random() < 0.3:
        bone["location"] = (rng.normal(size=3) * scale * 0.1).tolist()
    if rng.random() < 0.3:
        bone["stiffness"] = float(rng.choice([0.0, 1.0, rng.random()]))
    if rng.random() < 0.4:
        cones = []
        for _ in range(int(rng.integers(0, 4))):
            d = rng.normal(size=3)
            cones.append(
                {"direction": (d / np.linalg.norm(d)).tolist(), "radius": float(rng.uniform(0, math.pi))}
            )
        bone["limits"] = {"cones": cones}
        if rng.random() < 0.5:
            low = float(rng.uniform(-math.pi, math.pi))
            bone["limits"]["twist"] = {"min": low, "max": low + float(rng.uniform(0, 2 * math.pi))}
        if rng.random() < 0.3:
            bone["limits"]["comfort"] = float(rng.random())
    if rng.random() < 0.2:
        bone["blender"] = {
            "rotation_mode": str(rng.choice(ROTATION_MODES)),
            "lock_rotation": [bool(b) for b in rng.random(3) < 0.3],
        }


def _random_pin(rng, bone, scale):
    pin = {"bone": bone, "target": frame(random_rotation(rng), rng.normal(size=3) * scale * 2).tolist()}
    if rng.random() < 0.5:
        pin["weight"] = float(
            rng.choice([0.0, MIN_WEIGHT, MAX_WEIGHT, log_uniform(rng, MIN_WEIGHT, MAX_WEIGHT)])
        )
    if rng.random() < 0.5:
        pin["orientation_weights"] = [
            float(rng.choice([0.0, 1.0, log_uniform(rng, MIN_WEIGHT, MAX_WEIGHT)])) for _ in range(3)
        ]
    if rng.random() < 0.3:
        pin["falloff"] = float(rng.random())
    return pin


def _random_settings(rng, scale):
    settings = {
        "iterations": int(rng.integers(1, 40)),
        "tolerance": float(rng.choice([0.0, scale * log_uniform(rng, 1e-9, 1.0)])),
    }
    optional = {
        "time_budget_ms": lambda: float(rng.choice([0.0, 1.0, 20.0])) if rng.random() < 0.8 else None,
        "dampening": lambda: float(rng.uniform(1e-3, math.pi)),
        "stabilization_passes": lambda: int(rng.integers(0, 3)),
        "translate_root": lambda: bool(rng.random() < 0.5),
        "exact": lambda: bool(rng.random() < 0.7),
        "relaxation": lambda: float(rng.uniform(0.05, 1.95)),
        "acceleration": lambda: int(rng.integers(0, 6)),
        "analytic_limbs": lambda: bool(rng.random() < 0.7),
    }
    for key, draw in optional.items():
        if rng.random() < 0.4:
            settings[key] = draw()
    return settings


def _slots(value, path=()):
    """Every (container, key) pair inside a document, depth first."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        yield value, key
        yield from _slots(child, path + (key,))


def mutate(rng, doc):
    """The document with 1..3 values replaced by nasty ones, scaled far, removed, or joined by an unknown key."""
    doc = copy.deepcopy(doc)
    for _ in range(int(rng.integers(1, 4))):
        slots = list(_slots(doc))
        if not slots:
            break
        container, key = slots[int(rng.integers(0, len(slots)))]
        action = rng.random()
        value = container[key]
        if action < 0.45:
            container[key] = copy.deepcopy(NASTY[int(rng.integers(0, len(NASTY)))])
        elif action < 0.75 and isinstance(value, (int, float)) and not isinstance(value, bool):
            factor = float(rng.choice([1e-300, 1e-12, -1.0, 1e6, 1e12, 1e150, 1e300]))
            container[key] = value * factor if abs(value) < 1e300 else -value  # 10**400 has no float
        elif action < 0.9 and isinstance(container, dict):
            del container[key]
        elif isinstance(container, dict):
            container[str(rng.choice(["extra", "Weight", "", "\x00", "bones"]))] = 1
        elif isinstance(container, list):
            container.append(copy.deepcopy(container[key]))
    return doc


def junk(rng, depth=0):
    """Random JSON-like values, mostly objects with the document's own key names."""
    kind = rng.integers(0, 6 if depth < 4 else 3)
    if kind == 0:
        return copy.deepcopy(NASTY[int(rng.integers(0, len(NASTY)))])
    if kind == 1:
        return float(rng.normal() * 10.0 ** int(rng.integers(-5, 5)))
    if kind == 2:
        return str(rng.choice(["ewbik-scene", "bone0", "root", ""]))
    if kind == 3:
        return [junk(rng, depth + 1) for _ in range(int(rng.integers(0, 5)))]
    keys = [
        "format",
        "version",
        "bones",
        "pins",
        "settings",
        "name",
        "parent",
        "rest",
        "length",
        "target",
        "limits",
        "cones",
        "direction",
        "radius",
        "twist",
        "weight",
    ]
    doc = {str(rng.choice(keys)): junk(rng, depth + 1) for _ in range(int(rng.integers(0, 6)))}
    if depth == 0 and rng.random() < 0.7:
        doc.update(format="ewbik-scene", version=1)
    return doc


def document(seed):
    """Document number `seed`: half valid, a third near-valid mutations, the rest junk."""
    rng = np.random.default_rng(seed)
    kind = rng.random()
    if kind < 0.5:
        return "valid", valid_document(rng)
    if kind < 0.85:
        return "mutated", mutate(rng, valid_document(rng))
    return "junk", junk(rng)


# ------------------------------------------------------------------ the oracle


def outcome(doc, backend):
    """ "refused" (a SceneError naming a field) or "solved" (checked); anything else raises."""
    try:
        scene = parse_scene(doc)
    except SceneError as error:
        assert isinstance(error.field, str) and "\n" not in str(error)
        return "refused"
    for name in scene.skeleton.names:
        name.encode("utf-8")  # every accepted name can be written out and imported into Blender
    budget = scene.settings.time_budget_ms
    # A document may ask for a million iterations; the fuzzer gives each solve at most a second.
    config = dataclasses.replace(scene.settings, backend=backend, time_budget_ms=min(budget or 1e3, 1e3))
    result = solve(
        scene.skeleton,
        scene.pins,
        scene.rotations,
        scene.locations,
        config,
        limits=scene.limits,
        stiffness=scene.stiffness,
    )
    pose = pose_document(scene, result)
    json.dumps(pose, allow_nan=False)  # raises on NaN or infinity anywhere in the pose or stats
    norms = np.linalg.norm([b["rotation"] for b in pose["bones"].values()], axis=-1)
    assert np.all(np.abs(norms - 1.0) < 1e-9), norms
    if pose["stats"]["converged"]:
        assert_reached(scene, pose["stats"]["pins"], config.tolerance)
    return "solved"


def assert_reached(scene, errors, tolerance):
    """A "converged" solve has every weighted pin within tolerance by its reported errors.

    Positions are within the tolerance (armature units). Axes are unit vectors of the rig measured
    in its own size, so their chords meet the tolerance in rig sizes: tolerance / unit. The reported
    orientation error is the full angle over three axes each within that chord (at most
    2 asin(sqrt(3/8) tol)), or one axis' angle.
    """
    unit = scene.skeleton.unit
    axis_tolerance = min(tolerance / unit, MAX_COORDINATE)
    for pin in scene.pins:
        if pin.weight == 0.0:
            continue
        reported = errors[pin.bone]
        assert reported["position_error"] <= tolerance * (1 + 1e-9) + 1e-12 * unit, (
            pin.bone,
            reported,
            tolerance,
        )
        if any(pin.orientation_weights):
            bound = 2 * math.asin(min(1.0, math.sqrt(3 / 8) * axis_tolerance)) * (1 + 1e-9) + 1e-12
            assert math.radians(reported["orientation_error_deg"]) <= bound, (
                pin.bone,
                reported,
                tolerance,
                unit,
            )


# ------------------------------------------------------------------ runs


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(seed=st.integers(0, 2**32 - 1))
@example(seed=0)
@example(seed=1)
@example(seed=7)
def test_generated_documents_are_refused_or_solved_honestly(seed):
    _kind, doc = document(seed)
    results = {outcome(copy.deepcopy(doc), backend) for backend in backends()}
    assert len(results) == 1  # both loops see the same parse


@pytest.mark.parametrize("kind", ["valid", "mutated", "junk"])
def test_the_generator_makes_every_kind(kind):
    kinds = collections.Counter(document(seed)[0] for seed in range(200))
    assert kinds[kind] >= 20
    if kind == "valid":
        assert all(
            outcome(document(seed)[1], backends()[0]) == "solved"
            for seed in range(200)
            if document(seed)[0] == "valid"
        )


def number_paths(value, path=""):
    """(path in scene-document terms, container, key) of every number in a document."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        where = f"{path}.{key}" if isinstance(key, str) else f"{path}[{key}]"
        if isinstance(child, (int, float)) and not isinstance(child, bool):
            yield where.lstrip("."), value, key
        else:
            yield from number_paths(child, where)


@pytest.mark.parametrize("seed", [3, 8, 21])
def test_nan_in_any_number_is_refused_naming_its_field(seed):
    """Every number a Blender property hands over may be NaN (typed in, or keyed on an F-curve): each
    one of a document, made NaN in turn, is refused with its own field (or the vector holding it)."""
    doc = valid_document(np.random.default_rng(seed))
    paths = list(number_paths(doc))
    assert len(paths) > 20
    for where, container, key in paths:
        if where == "version":
            continue
        kept, container[key] = container[key], float("nan")
        with pytest.raises(SceneError) as refused:
            parse_scene(doc)
        assert where.startswith(refused.value.field), (where, refused.value.field)
        container[key] = kept


@pytest.mark.parametrize(
    "name", ["b\ud800", "\udfff", "a\udc80b"], ids=["high surrogate", "low surrogate", "inside"]
)
def test_a_bone_name_utf8_cannot_write_is_refused_naming_the_bone(name):
    doc = valid_document(np.random.default_rng(5))
    last = len(doc["bones"]) - 1
    old = doc["bones"][last]["name"]
    doc["bones"][last]["name"] = name
    for pin in doc["pins"]:
        pin["bone"] = name if pin["bone"] == old else pin["bone"]
    with pytest.raises(SceneError) as refused:
        parse_scene(doc)
    assert refused.value.field == f"bones[{last}].name"


def cli_outcome(doc, path):
    """The CLI on a document: exit 0 with a finite pose document, or 2 with one line; never a traceback."""
    path.write_text(json.dumps(doc), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "solver", "solve", str(path)],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    if proc.returncode == 2:
        assert len(proc.stderr.splitlines()) == 1 and proc.stdout == "", proc.stderr
        return "refused"
    assert proc.returncode == 0, proc.stderr
    json.loads(proc.stdout, parse_constant=lambda name: pytest.fail(f"{name} in the pose document"))
    return "solved"


def quick(doc):
    """The document with a small iteration cap, so a CLI run (without the fuzzer's time cap) stays short."""
    if isinstance(doc, dict) and isinstance(doc.get("settings"), dict):
        doc = {**doc, "settings": {**doc["settings"], "iterations": 5}}
    return doc


def test_the_cli_answers_generated_documents_with_a_pose_or_one_line(tmp_path):
    seeds = [s for s in range(40) if document(s)[0] != "valid"][:4] + [0]
    for seed in seeds:
        doc = quick(document(seed)[1])
        assert cli_outcome(doc, tmp_path / f"{seed}.json") == outcome(copy.deepcopy(doc), backends()[0])


@pytest.mark.skipif(not os.environ.get("EWBIK_FUZZ_DOCUMENTS"), reason="the long run: make fuzz")
def test_long_fuzz_run(tmp_path):
    count = int(os.environ["EWBIK_FUZZ_DOCUMENTS"])
    first = int(os.environ.get("EWBIK_FUZZ_FIRST_SEED", "1000000"))
    tally = collections.Counter()
    for seed in range(first, first + count):
        kind, doc = document(seed)
        for backend in backends():
            try:
                tally[backend, kind, outcome(copy.deepcopy(doc), backend)] += 1
            except Exception as error:
                raise AssertionError(f"document seed {seed} on {backend}: {error!r}") from error
    cli = collections.Counter()
    for seed in range(first, first + int(os.environ.get("EWBIK_FUZZ_CLI_DOCUMENTS", "300"))):
        try:
            cli[cli_outcome(quick(document(seed)[1]), tmp_path / "scene.json")] += 1
        except AssertionError as error:
            raise AssertionError(f"document seed {seed} through the CLI: {error}") from error
    print(
        f"CLI: {sum(cli.values())} documents, {cli['refused']} refused with one line and status 2, "
        f"{cli['solved']} solved, 0 tracebacks"
    )
    for (backend, kind, result), n in sorted(tally.items()):
        print(f"{backend:7s} {kind:8s} {result:8s} {n}")
    for backend in backends():
        print(
            f"{backend}: {sum(n for (b, _, _), n in tally.items() if b == backend)} documents, "
            f"{sum(n for (b, _, r), n in tally.items() if b == backend and r == 'refused')} refused, "
            f"{sum(n for (b, _, r), n in tally.items() if b == backend and r == 'solved')} solved, "
            "0 non-finite, 0 other exceptions"
        )


@pytest.mark.parametrize("scale", [1e-4, 1.0, 1e6])
@pytest.mark.parametrize("weight", [MIN_WEIGHT, 1.0, MAX_WEIGHT])
def test_both_loops_solve_at_the_bounds_of_accepted_magnitudes(scale, weight):
    """At the smallest and largest accepted weights, on tiny and huge rigs, both loops reach a
    reachable target: the bounds refuse only what the arithmetic cannot carry (the compiled loop
    did nothing with weights below ~1e-150 or above ~1e153; those are refused now)."""
    doc = {
        "format": "ewbik-scene",
        "version": 1,
        "bones": [
            {
                "name": f"b{i}",
                "parent": None if i == 0 else f"b{i - 1}",
                "rest": frame(np.eye(3), (0.0, i * scale, 0.0)).tolist(),
                "length": scale,
            }
            for i in range(3)
        ],
        "pins": [
            {
                "bone": "b2",
                "target": frame(np.eye(3), (1.2 * scale, 0.9 * scale, 0.0)).tolist(),
                "weight": weight,
                "orientation_weights": [0.0, 0.0, 0.0],
            }
        ],
        "settings": {"iterations": 200, "tolerance": 1e-7 * scale},
    }
    for backend in backends():
        scene = parse_scene(doc)
        result = solve(
            scene.skeleton,
            scene.pins,
            scene.rotations,
            scene.locations,
            dataclasses.replace(scene.settings, backend=backend),
        )
        assert result.converged and result.position_errors[0] <= 1e-7 * scale, (
            backend,
            result.position_errors,
        )
