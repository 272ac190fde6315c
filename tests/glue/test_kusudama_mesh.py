"""The mesh of a limit region (ewbik_addon/viewport/kusudama_mesh.py) without Blender: the
icosphere it is cut from, and a region cut along the solver's own `Kusudama.allows`."""

import math

import numpy as np
import pytest

from ewbik_addon.viewport.kusudama_mesh import BISECTION_STEPS, icosphere, region_mesh
from solver.kusudama import Kusudama, LimitCone
from tests.support.kusudamas import fibonacci_sphere, random_kusudama

SHOULDER = Kusudama(
    [
        LimitCone((0.0, 1.0, 0.0), math.radians(35.0)),
        LimitCone(tuple(np.array((0.8, 0.2, 0.0)) / np.linalg.norm((0.8, 0.2, 0.0))), math.radians(25.0)),
        LimitCone(tuple(np.array((0.2, 0.3, -0.9)) / np.linalg.norm((0.2, 0.3, -0.9))), math.radians(15.0)),
    ]
)


def triangle_area(triangles):
    a, b, c = triangles[:, 0], triangles[:, 1], triangles[:, 2]
    return 0.5 * np.linalg.norm(np.cross(b - a, c - a), axis=1).sum()


def outward(triangles):
    """Whether each triangle's normal (by its winding) points away from the sphere's centre."""
    a, b, c = triangles[:, 0], triangles[:, 1], triangles[:, 2]
    return np.sum(np.cross(b - a, c - a) * (a + b + c), axis=1) > 0.0


def angle_deg(a, b):
    return np.degrees(np.arccos(np.clip(np.sum(a * b, axis=-1), -1.0, 1.0)))


@pytest.mark.parametrize("subdivisions", [0, 1, 3])
def test_the_icosphere_is_a_closed_outward_unit_sphere(subdivisions):
    vertices, faces = icosphere(subdivisions)
    assert len(faces) == 20 * 4**subdivisions
    assert len(vertices) == 10 * 4**subdivisions + 2
    edges = {tuple(sorted(e)) for f in faces.tolist() for e in ((f[0], f[1]), (f[1], f[2]), (f[2], f[0]))}
    assert len(vertices) - len(edges) + len(faces) == 2
    np.testing.assert_allclose(np.linalg.norm(vertices, axis=1), 1.0, atol=1e-12)
    assert outward(vertices[faces]).all()


def test_the_icosphere_is_built_once_and_cannot_be_changed():
    vertices, faces = icosphere()
    assert icosphere()[0] is vertices
    with pytest.raises(ValueError):
        vertices[0, 0] = 2.0
    with pytest.raises(ValueError):
        faces[0, 0] = 1


def test_filled_area_is_the_share_of_directions_the_solver_allows():
    region = region_mesh(SHOULDER)
    allowed_share = SHOULDER.allows(fibonacci_sphere(40000)).mean()
    sphere = triangle_area(region.allowed) + triangle_area(region.forbidden)
    assert triangle_area(region.allowed) / sphere == pytest.approx(allowed_share, abs=0.004)


@pytest.mark.parametrize("seed", range(6))
def test_the_outline_lies_on_the_boundary_and_every_piece_on_its_side(seed):
    rng = np.random.default_rng(seed)
    kusudama = random_kusudama(rng, 1 + seed % 3)
    region = region_mesh(kusudama, subdivisions=3)
    edge_deg = angle_deg(*icosphere(3)[0][icosphere(3)[1][0, :2]])
    boundary = region.outline.reshape(-1, 3)
    assert len(boundary) > 0
    assert angle_deg(boundary, kusudama.closest_allowed(boundary)).max() < edge_deg / 2**BISECTION_STEPS
    for pieces, inside in ((region.allowed, True), (region.forbidden, False)):
        assert outward(pieces).all()
        centres = pieces.mean(axis=1)
        wrong = kusudama.allows(centres) != inside
        assert wrong.mean() < 0.01, "a piece's centre lies on the other side"


def test_a_region_that_allows_everything_has_no_forbidden_side_and_no_outline():
    region = region_mesh(Kusudama([LimitCone((0.0, 1.0, 0.0), math.pi)]), subdivisions=2)
    assert len(region.forbidden) == 0 and len(region.outline) == 0
    assert len(region.allowed) == 20 * 4**2


def test_one_cone_is_outlined_at_its_radius():
    radius = math.radians(40.0)
    region = region_mesh(Kusudama([LimitCone((0.0, 0.0, 1.0), radius)]))
    boundary = region.outline.reshape(-1, 3)
    np.testing.assert_allclose(
        angle_deg(boundary, np.array([0.0, 0.0, 1.0])), math.degrees(radius), atol=0.05
    )
