"""Live solving paused inside a block.

The bake, Limits from Action and Pin's IK/FK switch step frames or evaluate the rig themselves;
the live handler must not solve what they write again, within its time budget.
"""

import contextlib

_depth = [0]  # > 0 inside `suspended`


@contextlib.contextmanager
def suspended():
    """Pause live solving inside the block."""
    _depth[0] += 1
    try:
        yield
    finally:
        _depth[0] -= 1


def is_suspended():
    return _depth[0] > 0
