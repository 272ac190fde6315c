"""JointLimits packs a skeleton's limits from each Kusudama's own packed row: the same arrays as
computing every row's geometry afresh."""

import copy

import numpy as np
import pytest

from solver.kusudama import JointLimits, Kusudama, LimitCone, TwistLimit, _Packed
from tests.support.kusudamas import random_kusudama


def fresh(kusudama):
    """The same limits without their packed row, so packing computes the geometry again."""
    bare = copy.copy(kusudama)
    bare._pack = None
    return bare


@pytest.mark.parametrize("seed", range(4))
def test_packed_rows_equal_the_geometry_computed_afresh(seed):
    rng = np.random.default_rng(seed)
    n_bones = 12
    limited = {int(i): random_kusudama(rng, int(rng.integers(0, 5))) for i in rng.choice(n_bones, 8, False)}
    limited[int(next(i for i in range(n_bones) if i not in limited))] = Kusudama()  # swing and twist free
    rows = sorted(limited)
    packed = JointLimits(limited, n_bones)._pack
    afresh = _Packed([fresh(limited[i]) for i in rows], n_bones, rows=rows)
    arrays = [name for name, value in vars(afresh).items() if isinstance(value, np.ndarray)]
    assert {"centres", "probe", "tangent_dir", "twist_frame"} <= set(arrays)
    for name in arrays:
        np.testing.assert_array_equal(getattr(packed, name), getattr(afresh, name), err_msg=name)


def test_a_chain_of_cones_constrains_as_its_own_kusudama_does():
    rng = np.random.default_rng(11)
    chain = Kusudama(
        [LimitCone((0.0, 1.0, 0.0), 0.4), LimitCone((0.6, 0.8, 0.0), 0.3), LimitCone((0.0, 0.6, 0.8), 0.2)],
        TwistLimit(-0.5, 0.3),
    )
    limits = JointLimits({1: Kusudama([LimitCone((1.0, 0.0, 0.0), 0.5)]), 3: chain}, 4)
    rotations = rng.normal(size=(50, 4))
    rotations /= np.linalg.norm(rotations, axis=1, keepdims=True)
    alone = JointLimits({0: fresh(chain)}, 1).constrain(np.zeros(50, int), rotations)
    np.testing.assert_array_equal(limits.constrain(np.full(50, 3), rotations), alone)
