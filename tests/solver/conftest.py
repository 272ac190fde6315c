"""Shared helpers for the solver-core tests: matrices, random skeletons and independent oracles.

The oracles here deliberately avoid `solver.quat` and `solver.skeleton` internals: rotations
come from scipy and forward kinematics is a plain product of 4x4 matrices, so a test that
compares the solver against them compares two independent implementations.
"""

import json
import os
import pathlib

import numpy as np
import pytest
from hypothesis import Phase, settings
from scipy.spatial.transform import Rotation

from solver import Pin, Skeleton, native, native_library, quat
from solver.scene import solve_scene
from solver.solve import solve
from tests.support.mocap_frames import EFFECTORS

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
EXPLORE = bool(os.environ.get("EWBIK_EXPLORE"))

# Every run replays the same examples, so a test means the same on every machine and a run is
# judged on the code, not on which rare inputs the random search happened to draw (Hypothesis is
# pinned in constraints.txt, so the replayed draws are the same everywhere). EWBIK_EXPLORE=1 lets
# Hypothesis search for new examples, to be added as explicit ones when they find a bug.
settings.register_profile("replay", derandomize=True)
if not EXPLORE:
    settings.load_profile("replay")

# Tests that must mean the same on every machine run only their explicit examples unless exploring.
EXPLICIT_UNLESS_EXPLORING = (Phase.explicit, Phase.generate, Phase.shrink) if EXPLORE else (Phase.explicit,)

# The loops the solving tests run on; the sanitizer run of tools/run_tests.sh asks for "native" only.
BACKENDS = tuple(os.environ.get("EWBIK_TEST_BACKENDS", "native,numpy").split(","))


POSITION_ONLY = (0.0, 0.0, 0.0)
"""The orientation weights of a pin that holds only its bone's head."""

ONE_ATTEMPT = {"stage_targets": False, "pins_give_way": False, "strict_limits": True}
"""Settings for a solve that is one run of the loop from the start given: the loop's own
properties (per-iteration bounds, monotone misfit, restarts) are tested on it."""


def pytest_configure(config):
    config.addinivalue_line("markers", "compares_backends: the test names both loops itself; run it once")


def pytest_generate_tests(metafunc):
    """Every test of a module that solves in this process runs on both loops (as `solve`'s
    default backend), so the numpy loop that runs wherever the library is missing stays tested."""
    module = metafunc.module
    solves = getattr(module, "solve", None) is solve or getattr(module, "solve_scene", None) is solve_scene
    if solves and not metafunc.definition.get_closest_marker("compares_backends"):
        metafunc.parametrize("default_backend", BACKENDS, indirect=True)


@pytest.fixture(autouse=True)
def default_backend(request, monkeypatch):
    """The loop `SolverSettings(backend="auto")` runs: the compiled one, or numpy as where it is not built."""
    backend = getattr(request, "param", "auto")
    if backend == "numpy":
        monkeypatch.setattr(native, "_LIBRARY", None)
    elif backend == "native" and not native.available():
        if os.environ.get("EWBIK_NATIVE_LIBRARY"):
            pytest.fail(
                f"EWBIK_NATIVE_LIBRARY={os.environ['EWBIK_NATIVE_LIBRARY']} did not load (missing, or "
                "its ABI, sizes or layout differ)"
            )
        pytest.skip("the compiled loop is not built (test_native.py::test_the_native_loop_is_built fails)")
    return backend


def native_library_with(function, argtypes):
    """The compiled library with `function` declared (these arguments, no result); the test fails
    where the library is missing or older than the function."""
    library = native_library.load_library()
    if library is None or not hasattr(library, function):
        pytest.fail(
            "the native library is missing or stale: run `python tools/build_native.py`", pytrace=False
        )
    getattr(library, function).argtypes = argtypes
    getattr(library, function).restype = None
    return library


def scipy_rotation(q):
    """scipy Rotation of (w, x, y, z) quaternions."""
    q = np.asarray(q, dtype=float)
    return Rotation.from_quat(q[..., [1, 2, 3, 0]])


def wxyz(rotation):
    """(w, x, y, z) quaternions of a scipy Rotation."""
    return rotation.as_quat()[..., [3, 0, 1, 2]]


def same_rotation(a, b, atol=1e-9):
    """True when quaternions a and b describe the same rotation (q and -q are equal)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    d = np.abs(np.sum(a * b, axis=-1))
    return bool(np.all(np.abs(d - 1.0) <= atol))


def frame(rotation=None, position=(0.0, 0.0, 0.0)):
    """4x4 rigid matrix from a 3x3 rotation matrix (identity when None) and a translation."""
    m = np.eye(4)
    if rotation is not None:
        m[:3, :3] = rotation
    m[:3, 3] = position
    return m


def translation(position):
    return frame(None, position)


def random_unit_quaternions(rng, count):
    q = rng.normal(size=(count, 4))
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def random_tree(rng, n_bones, chain_bias=0.7):
    """A random armature: names, parents (names or None), rest 4x4s and lengths, parents first.

    Each child's head sits on its parent's tail most of the time (a connected chain), sometimes
    somewhere else, as in real rigs; rest orientations are random.
    """
    names = [f"bone{i}" for i in range(n_bones)]
    parents = [None]
    rest = []
    lengths = rng.uniform(0.2, 1.5, size=n_bones)
    rotations = Rotation.from_quat(rng.normal(size=(n_bones, 4)))
    for i in range(n_bones):
        if i > 0:
            parent = i - 1 if rng.random() < chain_bias else int(rng.integers(0, i))
            parents.append(names[parent])
            p = rest[parent]
            if rng.random() < 0.8:
                head = p[:3, 3] + p[:3, 1] * lengths[parent]
            else:
                head = p[:3, 3] + rng.normal(scale=0.5, size=3)
        else:
            head = rng.normal(size=3)
        rest.append(frame(rotations[i].as_matrix(), head))
    return names, parents, np.array(rest), lengths


def random_pose_targets(skeleton, rng, pinned, orientation=True, spread=1.0):
    """Pins on `pinned` bones at the pose matrices of a random pose: reachable by construction."""
    n = len(skeleton)
    rotations = quat.normalize(np.array([1.0, 0, 0, 0]) + spread * rng.normal(size=(n, 4)) * 0.5)
    world_rot, world_head = skeleton.forward(rotations, np.zeros((n, 3)))
    matrices = [frame(quat.to_matrix(world_rot[b]), world_head[b]) for b in pinned]
    weights = (1.0, 1.0, 1.0) if orientation else POSITION_ONLY
    return [Pin(skeleton.names[b], m, orientation_weights=weights) for b, m in zip(pinned, matrices)]


def random_problem(seed, n_bones, n_pins, chain_bias=0.6):
    rng = np.random.default_rng(seed)
    skeleton = Skeleton(*random_tree(rng, n_bones, chain_bias=chain_bias))
    pinned = sorted(rng.choice(n_bones, size=min(n_pins, n_bones), replace=False).tolist())
    pins = []
    for pin in random_pose_targets(skeleton, rng, pinned, spread=float(rng.uniform(0.2, 2.0))):
        weights = tuple(rng.choice([0.0, 0.3, 1.0], size=3))
        pins.append(
            Pin(
                pin.bone,
                pin.target,
                weight=float(rng.uniform(0.1, 3.0)),
                orientation_weights=weights,
                falloff=float(rng.choice([0.0, 0.5, 1.0])),
            )
        )
    rotations = random_unit_quaternions(rng, n_bones)
    return skeleton, pins, rotations, np.zeros((n_bones, 3)), rng


def canonical(q):
    """q and -q are one rotation; the loops may keep either sign where nothing normalizes."""
    return q * np.where(q[:, :1] < 0.0, -1.0, 1.0)


def pose_matrices(names, parents, rest, rotations, locations):
    """Armature-space pose matrices by Blender's rule, one 4x4 product per bone.

    pose = parent_pose @ inv(parent_rest) @ rest @ T(location) @ R(rotation); bones may be given
    in any order (parents are looked up by name, recursively).
    """
    index = {n: i for i, n in enumerate(names)}
    out = {}

    def pose_of(i):
        if i in out:
            return out[i]
        local = rest[i] @ translation(locations[i]) @ frame(scipy_rotation(rotations[i]).as_matrix())
        parent = parents[i]
        if parent is None:
            out[i] = local
        else:
            p = index[parent]
            out[i] = pose_of(p) @ np.linalg.inv(rest[p]) @ local
        return out[i]

    return np.array([pose_of(i) for i in range(len(names))])


def load_example(name):
    with open(EXAMPLES / name, encoding="utf-8") as f:
        return json.load(f)


def chain_skeleton(n_bones, length=1.0):
    """A straight chain of `n_bones` along +Y from the origin, identity rest orientations."""
    names = ["root"] + [f"b{i}" for i in range(1, n_bones)]
    parents = [None] + names[:-1]
    rest = [translation((0.0, i * length, 0.0)) for i in range(n_bones)]
    return Skeleton(names, parents, rest, [length] * n_bones)


def identity_pose(n_bones):
    return np.tile([1.0, 0.0, 0.0, 0.0], (n_bones, 1)), np.zeros((n_bones, 3))


def captured_pins(skeleton, rotations, locations):
    """The CMU rig's hands, feet and head pinned where a captured pose puts them (full orientation)."""
    world_rotation, world_head = skeleton.forward(rotations, locations)
    pins = []
    for effector in EFFECTORS:
        target = np.eye(4)
        target[:3, :3] = scipy_rotation(world_rotation[skeleton.index[effector]]).as_matrix()
        target[:3, 3] = world_head[skeleton.index[effector]]
        pins.append(Pin(effector, target))
    return pins
