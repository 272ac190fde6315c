"""Live solving paused inside a block.

The bake, Limits from Action and Pin's IK/FK switch step frames or evaluate the rig themselves;
the live handler must not solve what they write again, within its time budget.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

_depth = [0]  # > 0 inside `suspended`


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    """Pause live solving inside the block."""
    _depth[0] += 1
    try:
        yield
    finally:
        _depth[0] -= 1


def is_suspended() -> bool:
    return _depth[0] > 0
