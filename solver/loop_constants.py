"""Constants of the iteration loop, defined once for the numpy loop and handed to the C loop.

The C loop gets them through its problem structure (csrc/ewbik.h), so the two loops cannot
drift apart.
"""

import math

GUARD_SLACK = 1e-6  # relative worsening the stabilization guard tolerates before reverting a step
GUARD_FLOOR = 1e-15  # absolute floor of that slack (a misfit of zero)
STALL = 1e-7  # relative misfit change between iterations below which a solve has stalled (a pin beyond reach: nothing left to gain)
POLISH_AFTER = 3  # sweeps (with Anderson steps) before the polish takes over the iterations
POLISH_TRIES = (
    4  # per polish step: damping increases (and, apart, boundary restrictions) before a sweep instead
)
POLISH_LAMBDA_MIN = 1e-6  # the polish's relative damping: its floor (nearly Gauss-Newton) ...
POLISH_LAMBDA_MAX = 1e4  # ... its ceiling (a short gradient step) ...
POLISH_GROW = 10.0  # ... its growth after a step that did not lower the misfit ...
POLISH_SHRINK = 4.0  # ... and its decrease after one that did
POLISH_TURN_CAP = 2.0  # a polish step turns each bone at most this many times its dampening (a sweep's cap), so a far stage needs few steps
POLISH_CLAMPED = 1e-9  # radians a limit's clamp must move a polished bone to count as an active boundary
POLISH_MAX_PINS = 10  # per tree (pins sharing solved bones): its dense row-space system (6 rows a pin) grows with the cube of its pin count; a tree past this many pins leaves the polish out
POLISH_SLOW = 0.5  # a polish step keeping more of the misfit than this has stalled
BEND_TILT = 1e-3  # sine of a joint's allowed-centre tilt below which it shows no bend side
STRAIGHT_SINE = 0.2  # sine of the bend below which a limb counts as straight (singular) for that finish
# A target nearer than this share of a straight limb's length asks it to bend more.
STRAIGHT_REACH = math.cos(math.asin(STRAIGHT_SINE) / 2)
