"""The compiled iteration loop (solver/csrc), driven through ctypes.

numpy pays a few microseconds per call, and an EWBIK iteration is hundreds of
small calls (one bone step per height, the forward pass, the acceleration), so
the loop itself runs in C while planning, input checks and results stay in
Python. The C code follows the numpy loop (loop.py) step for step: the tests
hold the two to the same poses without Anderson acceleration, and to the same
accuracy with it (rounding in its small least squares may steer a redundant
skeleton to another, equally good pose). The numpy loop is what runs where the
library was not built.
"""

from __future__ import annotations

import ctypes
import time
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from .loop_constants import (
    BEND_TILT,
    GUARD_FLOOR,
    GUARD_SLACK,
    POLISH_AFTER,
    POLISH_CLAMPED,
    POLISH_GROW,
    POLISH_LAMBDA_MAX,
    POLISH_LAMBDA_MIN,
    POLISH_SHRINK,
    POLISH_SLOW,
    POLISH_TRIES,
    POLISH_TURN_CAP,
    STALL,
    STRAIGHT_REACH,
    STRAIGHT_SINE,
)
from .native_library import load_library
from .native_limits import NativeLimits, native_limits
from .qcp import ADJUGATE_TRUST, PREFER_SMALL

if TYPE_CHECKING:
    from _ctypes import CFuncPtr

    from .kusudama import JointLimits
    from .loop import State
    from .plan import Plan
    from .settings import SolverSettings
    from .skeleton import Levels, Skeleton

ABI_VERSION = 10  # EWBIK_ABI_VERSION in csrc/ewbik.h
_P = ctypes.c_void_p
_INT = ctypes.c_int
_DOUBLE = ctypes.c_double


class _Problem(ctypes.Structure):
    """Mirror of `ewbik_problem` in csrc/ewbik.h (same fields, same order)."""

    _fields_ = [
        ("n_bones", _INT),
        ("parents", _P),
        ("local_rest", _P),
        ("local_offset", _P),
        ("n_kinematic", _INT),
        ("kinematic", _P),
        ("n_pins", _INT),
        ("pin_bone", _P),
        ("weight", _P),
        ("axis_weight", _P),
        ("target_pos", _P),
        ("target_axes", _P),
        ("n_batches", _INT),
        ("batch_start", _P),
        ("batch_bones", _P),
        ("seen_start", _P),
        ("seen_pin", _P),
        ("seen_factor", _P),
        ("moved_start", _P),
        ("moved_pin", _P),
        ("translating", _P),
        ("n_solved", _INT),
        ("solved", _P),
        ("n_limbs", _INT),
        ("limbs", _P),
        ("max_step", _P),
        ("frozen", _P),
        ("limits", _P),
        ("iterations", _INT),
        ("tolerance", _DOUBLE),
        ("budget_seconds", _DOUBLE),
        ("stabilization", _INT),
        ("exact", _INT),
        ("relaxation", _DOUBLE),
        ("acceleration", _INT),
        ("analytic_limbs", _INT),
        ("guard_slack", _DOUBLE),
        ("guard_floor", _DOUBLE),
        ("stall", _DOUBLE),
        ("prefer_small", _DOUBLE),
        ("polish_after", _INT),
        ("polish_tries", _INT),
        ("polish_lambda_min", _DOUBLE),
        ("polish_lambda_max", _DOUBLE),
        ("polish_grow", _DOUBLE),
        ("polish_shrink", _DOUBLE),
        ("polish_clamped", _DOUBLE),
        ("polish_turn_cap", _DOUBLE),
        ("polish_slow", _DOUBLE),
        ("bend_tilt", _DOUBLE),
        ("straight_sine", _DOUBLE),
        ("straight_reach", _DOUBLE),
        ("adjugate_trust", _DOUBLE),
        ("rotations", _P),
        ("locations", _P),
        ("initial", _P),
        ("position_errors", _P),
        ("orientation_errors", _P),
        ("iterations_done", _P),
        ("converged", _P),
    ]


def _checked_library() -> ctypes.CDLL | None:
    """The library, if built and its version, structure sizes and field offsets match the mirrors
    here (else None)."""
    library = load_library()
    if library is None:
        return None
    try:
        found = (library.ewbik_abi_version(), library.ewbik_problem_size(), library.ewbik_limits_size())
        if found != (ABI_VERSION, ctypes.sizeof(_Problem), ctypes.sizeof(NativeLimits)):
            return None
        if not (
            _same_layout(library.ewbik_problem_layout, _Problem)
            and _same_layout(library.ewbik_limits_layout, NativeLimits)
        ):
            return None
        library.ewbik_solve.argtypes = [ctypes.POINTER(_Problem)]
        library.ewbik_solve.restype = _INT
        library.ewbik_forward.argtypes = [_INT] + [_P] * 8
        library.ewbik_forward.restype = _INT
        library.ewbik_balance_check.argtypes = (
            [_INT] + [_P] * 8 + [_INT] + [_P] * 6 + [_DOUBLE, _DOUBLE] + [_P] * 4
        )
        library.ewbik_balance_check.restype = _INT
    except AttributeError:
        return None
    return library


def _same_layout(layout: CFuncPtr, mirror: type[ctypes.Structure]) -> bool:
    """Whether the library puts every field of a structure where its ctypes mirror does."""
    capacity = len(mirror._fields_) + 1
    offsets = (ctypes.c_longlong * capacity)()
    layout.restype = _INT
    count = layout(offsets, capacity)
    return list(offsets[:count]) == [getattr(mirror, name).offset for name, *_ in mirror._fields_]


_LIBRARY = _checked_library()


def available() -> bool:
    """Whether the compiled loop was built for this machine."""
    return _LIBRARY is not None


def forward_into(
    skeleton: Skeleton,
    rotations: np.ndarray,
    locations: np.ndarray,
    world: np.ndarray,
    head: np.ndarray,
    levels: Levels | None,
) -> bool:
    """`Skeleton.forward_into` in C (no scales): True when done, False where the library is
    missing or `world`/`head` are not arrays C can write in place (numpy does it then)."""
    if _LIBRARY is None or not all(a.flags.c_contiguous and a.dtype == np.float64 for a in (world, head)):
        return False
    arrays = _skeleton_arrays(skeleton)
    order = arrays.order(levels)
    rotations, locations = _floats(rotations), _floats(locations)
    _LIBRARY.ewbik_forward(
        order[2],
        order[3],
        *arrays.addresses,
        address(rotations),
        address(locations),
        address(world),
        address(head),
    )
    return True


def balance_check(
    skeleton: Skeleton,
    rotations: np.ndarray,
    locations: np.ndarray,
    masses: np.ndarray,
    centres: np.ndarray,
    bone: int,
    feet: tuple[np.ndarray, ...],
    planted: float,
    margin: float,
) -> tuple[np.ndarray, np.ndarray, float, np.ndarray] | None:
    """`balance._balance_state` in C, what balance asks of a local pose in one call: (the centre
    of mass (3,) of bones weighing `masses` (N,) at `centres` (N, 3) in their frames, the head (3,)
    of `bone`, the centre's depth in the support polygon of `feet`, its shift (3,) to `margin`
    inside); None where the library is missing. `feet`: (F,) intc the feet pins' places among
    the pins, (F,) intc contact points a foot, (sum, 3) the points in the feet's frames, (P, 3, 3)
    every pin's target axes (rows) and (P, 3) its target position, the ground's (3, 3) frame; the
    feet whose lowest point lies within `planted` of the lowest carry the body. `masses`,
    `centres` and `feet` are arrays their owners keep unchanged (a body, the pins' arrays)."""
    if _LIBRARY is None:
        return None
    arrays = _skeleton_arrays(skeleton)
    _, _, count, order = arrays.everything
    world, head, found = arrays.scratch_addresses
    hull = _hull_scratch(2 * (len(feet[2]) + 1))
    corners = _LIBRARY.ewbik_balance_check(
        count,
        order,
        *arrays.addresses,
        address(_floats(rotations)),
        address(_floats(locations)),
        kept_address(masses),
        kept_address(centres),
        len(feet[0]),
        *map(kept_address, feet),
        planted,
        margin,
        world,
        head,
        hull,
        found,
    )
    if corners < 0:
        raise MemoryError("the native solver could not allocate the support polygon")
    _, heads, answer = arrays.scratch
    return answer[:3].copy(), heads[bone].copy(), float(answer[6]), answer[3:6].copy()


def address(array: np.ndarray) -> int:
    """The address of a C-contiguous array for C to read or write. `.ctypes.data` builds a helper
    object each time (a microsecond, dozens of times a solve): a writable array lends C its
    buffer instead (a fifth of that), a read-only one is one the solver keeps (pin arrays, a
    body's masses), looked up once (`kept_address`)."""
    if array.flags.writeable and array.size:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))
    return kept_address(array)


_kept: dict[int, tuple[np.ndarray, int]] = {}  # id -> (the array, its address): `kept_address`
_KEPT_ADDRESSES = 64


def kept_address(array: np.ndarray) -> int:
    """The address of a C-contiguous array (float64 or intc, as C reads it) that its owner keeps
    unchanged (a body's masses, the pins' arrays), looked up instead of asked of numpy again
    (`.ctypes.data` costs a microsecond): kept with a reference to the array, so its id stays its
    own, the oldest of `_KEPT_ADDRESSES` dropped first."""
    found = _kept.get(id(array))
    if found is None or found[0] is not array:
        if len(_kept) >= _KEPT_ADDRESSES:
            del _kept[next(iter(_kept))]
        found = _kept[id(array)] = (array, array.ctypes.data)
    return found[1]


_hull_buffer: list[tuple[np.ndarray, int]] = []  # (buffer, its address): `_hull_scratch`


def _hull_scratch(size: int) -> int:
    """The address of a float64 buffer of at least `size` for C to write a support polygon into
    (nobody reads it back), grown as needed."""
    if not _hull_buffer or len(_hull_buffer[0][0]) < size:
        array = np.empty(max(size, 64))
        _hull_buffer[:] = [(array, array.ctypes.data)]
    return _hull_buffer[0][1]


class _SkeletonArrays:
    """A skeleton's constant arrays as C takes them (parents, local rest matrices, local offsets)
    with their addresses, and the kinematic orders asked for: {id of levels: (levels, bones
    parents first, their count, address)}. Packed once: a skeleton does not change after it is
    built, and the levels of a plan or a limb are kept with it."""

    def __init__(self, skeleton: Skeleton) -> None:
        self.arrays = (
            _ints(skeleton.parents),
            _floats(skeleton.local_rest_matrix),
            _floats(skeleton.local_offset),
        )
        self.addresses = tuple(array.ctypes.data for array in self.arrays)
        everything = _ints(np.concatenate(skeleton.levels))
        self.everything = (None, everything, len(everything), everything.ctypes.data)
        n = len(skeleton)
        self.scratch = (
            np.empty((n, 3, 3)),
            np.empty((n, 3)),
            np.empty(7),
        )  # world, heads, two points and a number
        self.scratch_addresses = tuple(array.ctypes.data for array in self.scratch)
        self.orders: dict[int, tuple[Levels, np.ndarray, int, int]] = {}

    def order(self, levels: Levels | None) -> tuple[Levels | None, np.ndarray, int, int]:
        """(levels, bones parents first, their count, address) of `levels` (None: every bone),
        packed on first use; the oldest is dropped past `_KEPT_ORDERS`."""
        if levels is None:
            return self.everything
        found = self.orders.get(id(levels))
        if found is None or found[0] is not levels:
            if len(self.orders) >= _KEPT_ORDERS:
                del self.orders[next(iter(self.orders))]
            bones = _ints(np.concatenate([levels[0]] + [idx for idx, _ in levels[1]]))
            found = self.orders[id(levels)] = (levels, bones, len(bones), bones.ctypes.data)
        return found


_skeletons: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # skeleton -> _SkeletonArrays
_KEPT_ORDERS = 256  # kinematic orders kept per skeleton, the oldest dropped first


def _skeleton_arrays(skeleton: Skeleton) -> _SkeletonArrays:
    found = _skeletons.get(skeleton)
    if found is None:
        found = _skeletons[skeleton] = _SkeletonArrays(skeleton)
    return found


def _ints(values: ArrayLike) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.intc)


def _floats(values: ArrayLike) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.float64)


def _csr(groups: Sequence[Sequence[int]]) -> tuple[np.ndarray, list[int]]:
    """(start offsets, flat values) of a list of lists."""
    starts = np.zeros(len(groups) + 1, dtype=np.intc)
    starts[1:] = np.cumsum([len(g) for g in groups])
    return starts, [v for g in groups for v in g]


class _Template:
    """The skeleton and plan arrays of one plan, packed once and kept alive for C."""

    def __init__(self, skeleton: Skeleton, plan: Plan) -> None:
        roots, steps = plan.levels
        bones, seen, factors, moved, translating = [], [], [], [], []
        batch_start = [0]
        for batch in plan.batches:
            for row, bone in enumerate(batch.bones):
                bones.append(bone)
                real = batch.factor[row] > 0.0
                seen.append(batch.seen[row][real].tolist())
                factors.append(batch.factor[row][real].tolist())
                moved.append(batch.moved_pins[batch.moved_rows == row].tolist())
                translating.append(bool(batch.translating[row]))
            batch_start.append(len(bones))
        seen_start, seen_flat = _csr(seen)
        moved_start, moved_flat = _csr(moved)
        limbs = plan.limbs
        self.arrays = {
            "parents": _ints(skeleton.parents),
            "local_rest": _floats(skeleton.local_rest_matrix),
            "local_offset": _floats(skeleton.local_offset),
            "kinematic": _ints(np.concatenate([roots] + [idx for idx, _ in steps])),
            "batch_start": _ints(batch_start),
            "batch_bones": _ints(bones),
            "seen_start": seen_start,
            "seen_pin": _ints(seen_flat),
            "seen_factor": _floats([f for group in factors for f in group]),
            "moved_start": moved_start,
            "moved_pin": _ints(moved_flat),
            "translating": np.ascontiguousarray(translating, dtype=np.uint8),
            "solved": _ints(np.flatnonzero(plan.solved)),
            "limbs": _ints(
                np.stack((limbs.upper, limbs.lower, limbs.end, limbs.pin), axis=-1).reshape(-1, 4)
            ),
        }
        problem = _Problem()
        for name, array in self.arrays.items():
            setattr(problem, name, array.ctypes.data)
        problem.n_bones = len(skeleton)
        problem.n_kinematic = len(self.arrays["kinematic"])
        problem.n_batches = len(plan.batches)
        problem.n_solved = len(self.arrays["solved"])
        problem.n_limbs = len(limbs.pin)
        self.problem = problem
        self._outputs: dict[int, _Outputs] = {}  # pin count -> _Outputs

    def outputs(self, n_pins: int) -> _Outputs:
        """The answer arrays for this pin count (reused: `run` copies the errors out)."""
        found = self._outputs.get(n_pins)
        if found is None:
            found = self._outputs[n_pins] = _Outputs(n_pins)
        return found


def run(
    skeleton: Skeleton,
    plan: Plan,
    state: State,
    settings: SolverSettings,
    limits: JointLimits | None,
    max_step: np.ndarray,
    frozen: np.ndarray,
    initial: np.ndarray,
    deadline: float | None,
) -> tuple[int, bool, np.ndarray, np.ndarray]:
    """Iterate in C on `state` (its rotations and locations change in place) until the
    `time.perf_counter()` deadline (None: no time budget) or another stopping rule.

    Returns (iterations, converged, position errors, orientation errors in radians).
    """
    template = plan.native_template
    if not isinstance(template, _Template):
        template = plan.native_template = _Template(skeleton, plan)
    problem = _Problem.from_buffer_copy(template.problem)
    _configure(problem, settings, limits, plan.polish is not None)
    outputs = template.outputs(len(state.pin_bones))
    inputs = (
        ("pin_bone", _ints(state.pin_bones)),
        ("weight", _floats(state.weight)),
        ("axis_weight", _floats(state.axis_weight)),
        ("target_pos", _floats(state.target_pos)),
        ("target_axes", _floats(state.target_axes)),
        ("max_step", _floats(max_step)),
        ("frozen", np.ascontiguousarray(frozen, dtype=np.uint8)),
        ("initial", _floats(initial)),
        ("rotations", state.rotations),
        ("locations", state.locations),
    )
    for name, array in inputs:
        setattr(problem, name, address(array))
    for name, answer in outputs.addresses:
        setattr(problem, name, answer)
    problem.n_pins = len(state.pin_bones)
    problem.budget_seconds = -1.0 if deadline is None else max(0.0, deadline - time.perf_counter())
    assert _LIBRARY is not None  # the loop runs in C only where `available()`
    if _LIBRARY.ewbik_solve(ctypes.byref(problem)) != 0:
        raise MemoryError("the native solver could not allocate its workspace")
    return (
        int(outputs.iterations_done[0]),
        bool(outputs.converged[0]),
        outputs.position_errors.copy(),
        outputs.orientation_errors.copy(),
    )


class _Outputs:
    """The arrays C writes its answer into, for one pin count, with their addresses."""

    def __init__(self, n_pins: int) -> None:
        self.position_errors = np.zeros(n_pins)
        self.orientation_errors = np.zeros(n_pins)
        self.iterations_done = np.zeros(1, dtype=np.intc)
        self.converged = np.zeros(1, dtype=np.intc)
        self.addresses = tuple(
            (name, getattr(self, name).ctypes.data)
            for name in ("position_errors", "orientation_errors", "iterations_done", "converged")
        )


def _configure(problem: _Problem, settings: SolverSettings, limits: JointLimits | None, polish: bool) -> None:
    """The settings' and the loop constants' fields of a problem, and its limits."""
    problem.limits = None if limits is None else ctypes.addressof(native_limits(limits))
    problem.iterations = int(settings.iterations)
    problem.tolerance = settings.tolerance
    problem.stabilization = settings.stabilization_passes > 0
    problem.exact = settings.exact
    problem.relaxation = settings.relaxation
    # Anderson's history never holds more sweeps than the solve runs.
    problem.acceleration = int(min(settings.acceleration, settings.iterations))
    problem.analytic_limbs = settings.analytic_limbs
    problem.guard_slack, problem.guard_floor, problem.stall = GUARD_SLACK, GUARD_FLOOR, STALL
    problem.prefer_small = PREFER_SMALL
    problem.polish_after = POLISH_AFTER if polish else -1
    problem.polish_tries = POLISH_TRIES
    problem.polish_lambda_min, problem.polish_lambda_max = POLISH_LAMBDA_MIN, POLISH_LAMBDA_MAX
    problem.polish_grow, problem.polish_shrink = POLISH_GROW, POLISH_SHRINK
    problem.polish_clamped = POLISH_CLAMPED
    problem.polish_turn_cap = POLISH_TURN_CAP
    problem.polish_slow, problem.bend_tilt = POLISH_SLOW, BEND_TILT
    problem.straight_sine, problem.straight_reach = STRAIGHT_SINE, STRAIGHT_REACH
    problem.adjugate_trust = ADJUGATE_TRUST
