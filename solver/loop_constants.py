"""Constants of the iteration loop, defined once for the numpy loop and handed to the C loop.

The C loop gets them through its problem structure (csrc/ewbik.h), so the two loops cannot
drift apart.
"""

GUARD_SLACK = 1e-6  # relative worsening the stabilization guard tolerates before reverting a step
GUARD_FLOOR = 1e-15  # absolute floor of that slack (a misfit of zero)
STALL = 1e-9  # relative misfit change between iterations below which a solve has stalled
