"""Golden cases for the foreign builds of the native loop: a solve's packed problem as a case file
for golden_runner.c, and this machine's library's answer to that very problem to hold its result
against (tests/solver/test_native.py holds this machine's library to the numpy loop).

The problem is captured exactly as `solver.native.run` hands it to C: a stand-in library takes
the `ewbik_solve` call, follows every pointer of the structure (and of the limits structure it
points to) to the arrays the caller keeps alive for the call, and writes them as blocks with
the pointer slots to patch. Nothing here names the structure's fields except the outputs it
reads back (`rotations`, `locations`, `position_errors`), so the loop may change freely.
"""

import ctypes
import dataclasses
import pathlib
import struct
import sys

import numpy as np

from solver import native, solve

MAGIC = b"EWBKCASE"


@dataclasses.dataclass
class Case:
    """One captured problem: its blocks and pointer slots, where each output lives, and what
    this machine's library answered to it (rotations, locations, position_errors)."""

    blocks: list
    slots: list  # (block, offset, target block)
    field_blocks: dict  # pointer field of the problem -> its block
    n_bones: int
    expected: dict  # output field -> array, as this machine's library left it

    def write(self, path):
        with open(path, "wb") as f:
            f.write(MAGIC + struct.pack("<QQ", len(self.blocks), len(self.slots)))
            for block in self.blocks:
                f.write(struct.pack("<Q", len(block)) + block)
            for slot in self.slots:
                f.write(struct.pack("<QQQ", *slot))

    def read_result(self, path):
        """(ABI version, problem size, limits size, status, {field: array}) from the runner's output."""
        data = pathlib.Path(path).read_bytes()
        abi, problem_size, limits_size, status = struct.unpack_from("<4i", data)
        position, blocks = 16, []
        while position < len(data):
            (size,) = struct.unpack_from("<Q", data, position)
            blocks.append(data[position + 8 : position + 8 + size])
            position += 8 + size
        n = self.n_bones
        pins = len(self.expected["position_errors"])
        arrays = {
            "rotations": np.frombuffer(blocks[self.field_blocks["rotations"]], dtype="<f8").reshape(n, 4),
            "locations": np.frombuffer(blocks[self.field_blocks["locations"]], dtype="<f8").reshape(n, 3),
            "position_errors": np.frombuffer(blocks[self.field_blocks["position_errors"]], dtype="<f8")[
                :pins
            ],
        }
        return abi, problem_size, limits_size, status, arrays


def _reachable_buffers(root, depth=4):
    """{address: (bytes owner)} of every numpy array and ctypes structure reachable from `root`
    through dicts, lists, tuples and attributes: what a caller keeps alive for a C call."""
    found, seen, stack = {}, set(), [(root, 0)]
    while stack:
        obj, level = stack.pop()
        if id(obj) in seen or level > depth:
            continue
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            found.setdefault(obj.ctypes.data, obj)
            continue
        if isinstance(obj, ctypes.Structure):
            found.setdefault(ctypes.addressof(obj), obj)
        children = []
        if isinstance(obj, dict):
            children = list(obj.values())
        elif isinstance(obj, (list, tuple)):
            children = list(obj)
        if hasattr(obj, "__dict__") and not isinstance(obj, type):
            children += list(vars(obj).values())
        stack += [(child, level + 1) for child in children]
    return found


def _pointer_fields(structure):
    return [
        (name, getattr(type(structure), name).offset)
        for name, kind in type(structure)._fields_
        if kind is ctypes.c_void_p or isinstance(kind, type(ctypes.POINTER(ctypes.c_int)))
    ]


def _pack(problem, buffers):
    """Blocks (problem first) and pointer slots of a structure graph; field -> block of the problem."""
    blocks, slots, index = [], [], {}

    def block_of(obj):
        key = id(obj)
        if key not in index:
            index[key] = len(blocks)
            blocks.append(None)
            if isinstance(obj, ctypes.Structure):
                for name, offset in _pointer_fields(obj):
                    address = getattr(obj, name)
                    if address:
                        slots.append((index[key], offset, block_of(buffers[address])))
                blocks[index[key]] = bytes(obj)
            else:
                blocks[index[key]] = np.ascontiguousarray(obj).tobytes()
        return index[key]

    block_of(problem)
    fields = {
        name: slot_target
        for (block, offset, slot_target) in slots
        if block == 0
        for name, field_offset in _pointer_fields(problem)
        if field_offset == offset
    }
    return blocks, slots, fields


class _Recorder:
    """Stands in for the library: records the problem of an `ewbik_solve` call, lets the real
    library solve it (so `solve()` finishes normally) and records its answer. A solve may call
    the loop twice (a restart under limits); the last call is kept."""

    def __init__(self, library):
        self._library = library
        self.captured = None

    def __getattr__(self, name):
        return getattr(self._library, name)

    def ewbik_solve(self, problem_ref):
        problem = problem_ref._obj
        caller = sys._getframe(1)
        buffers = _reachable_buffers(dict(caller.f_locals))
        packed = _pack(problem, buffers)
        status = self._library.ewbik_solve(problem_ref)
        sizes = {
            "rotations": (problem.n_bones, 4),
            "locations": (problem.n_bones, 3),
            "position_errors": (problem.n_pins,),
        }
        answer = {
            name: np.array(buffers[getattr(problem, name)]).reshape(shape) for name, shape in sizes.items()
        }
        self.captured = packed, problem.n_bones, answer
        return status


def capture(skeleton, pins, rotations, locations, config, **kwargs):
    """The Case of one solve (no time budget), with this machine's library's answer as expected result."""
    config = dataclasses.replace(config, time_budget_ms=None)
    recorder = _Recorder(native._LIBRARY)
    saved = native._LIBRARY
    native._LIBRARY = recorder
    try:
        solve(skeleton, pins, rotations, locations, dataclasses.replace(config, backend="native"), **kwargs)
    finally:
        native._LIBRARY = saved
    (blocks, slots, fields), n_bones, expected = recorder.captured
    return Case(blocks, slots, fields, n_bones, expected)
