"""An upper body to pin: hips -> spine -> chest -> two arms (0.3 m upper arm, 0.25 m forearm, a
hand) and neck -> head, the hips held (the giving-way, aim, limits-yield and solve-apart tests)."""

import numpy as np

from solver import Skeleton, quat
from tests.solver.conftest import frame

ARM = 0.3 + 0.25  # upper arm + forearm


def upper_body():
    """hips -> spine -> chest -> {upper.L -> fore.L -> hand.L, upper.R -> fore.R -> hand.R, neck -> head}."""
    bones = [
        ("hips", None, (0, 0, 1.0), (0, 0, 1.1)),
        ("spine", "hips", (0, 0, 1.1), (0, 0, 1.3)),
        ("chest", "spine", (0, 0, 1.3), (0, 0, 1.5)),
        ("upper.L", "chest", (0.2, 0, 1.5), (0.5, 0, 1.5)),
        ("fore.L", "upper.L", (0.5, 0, 1.5), (0.75, 0, 1.5)),
        ("hand.L", "fore.L", (0.75, 0, 1.5), (0.85, 0, 1.5)),
        ("upper.R", "chest", (-0.2, 0, 1.5), (-0.5, 0, 1.5)),
        ("fore.R", "upper.R", (-0.5, 0, 1.5), (-0.75, 0, 1.5)),
        ("hand.R", "fore.R", (-0.75, 0, 1.5), (-0.85, 0, 1.5)),
        ("neck", "chest", (0, 0, 1.5), (0, 0, 1.6)),
        ("head", "neck", (0, 0, 1.6), (0, 0, 1.8)),
    ]
    rest, lengths = [], []
    for _, _, head, tail in bones:
        y = np.subtract(tail, head)
        lengths.append(float(np.linalg.norm(y)))
        rest.append(frame(quat.to_matrix(quat.shortest_arc([0, 1, 0], y)), head))
    return Skeleton([b[0] for b in bones], [b[1] for b in bones], rest, lengths)


SKELETON = upper_body()
STIFFNESS = np.where(np.array(SKELETON.names) == "hips", 1.0, 0.0)


def rest_pose():
    n = len(SKELETON)
    return np.tile([1.0, 0.0, 0.0, 0.0], (n, 1)), np.zeros((n, 3))
