"""The compiled loop and its ctypes mirrors agree on every field's place and on the loop's constants."""

import ctypes

import pytest

from solver import SolverSettings, kusudama, native, solve
from solver.native_limits import NativeLimits
from tests.solver.conftest import random_problem

pytestmark = [
    pytest.mark.skipif(not native.available(), reason="the compiled solver is not built"),
    pytest.mark.compares_backends,
]


@pytest.mark.parametrize(
    "layout, mirror", [("ewbik_problem_layout", native._Problem), ("ewbik_limits_layout", NativeLimits)]
)
def test_every_field_sits_where_the_mirror_puts_it(layout, mirror):
    assert native._same_layout(getattr(native._LIBRARY, layout), mirror)


def test_a_mirror_with_a_field_moved_into_padding_is_refused():
    """The same size, another layout: an int moved next to another int fills what was padding."""
    fields = [f for f in native._Problem._fields_ if f[0] != "n_pins"]
    at = next(k for k, (name, _) in enumerate(fields) if name == "analytic_limbs") + 1
    fields.insert(at, ("n_pins", ctypes.c_int))
    moved = type("Moved", (ctypes.Structure,), {"_fields_": fields})
    assert ctypes.sizeof(moved) == ctypes.sizeof(native._Problem)  # the size check alone would pass
    assert not native._same_layout(native._LIBRARY.ewbik_problem_layout, moved)


def test_the_c_loop_reads_its_constants_from_python(monkeypatch):
    """A stall rule taken from Python (here: any change under half the misfit is a stall) stops the
    C loop early, so the constant is handed over, not copied into the C source."""
    skeleton, pins, rotations, locations, _ = random_problem(5, 6, 2)
    config = SolverSettings(
        iterations=200, tolerance=0.0, acceleration=0, analytic_limbs=False, backend="native"
    )
    normal = solve(skeleton, pins, rotations, locations, config)
    monkeypatch.setattr(native, "STALL", 0.5)
    hasty = solve(skeleton, pins, rotations, locations, config)
    assert hasty.iterations < normal.iterations


def test_the_limits_constants_are_the_numpy_clamps():
    limits = kusudama.JointLimits({0: kusudama.Kusudama([kusudama.LimitCone((0.0, 1.0, 0.0), 0.1)])}, 1)
    packed = native.native_limits(limits)
    assert (packed.inside_tolerance, packed.plane_tolerance, packed.comfort_rate, packed.comfort_decay) == (
        kusudama.INSIDE_TOLERANCE,
        kusudama.PLANE_TOLERANCE,
        kusudama.COMFORT_RATE,
        kusudama.COMFORT_DECAY,
    )
