"""A Kusudama's allowed region as triangles on the unit sphere, cut along its boundary.

The solver's `Kusudama.allows` is the only rule of what is allowed: an icosphere's vertices are
tested with it, triangles wholly on one side go to that side, and triangles the boundary crosses
are cut where it crosses their edges (found by bisection with the same test), marching-triangles
style. So the fill, the dimmed rest and the outline follow the solver's region, tangent bridges
included, without a second copy of its geometry. Plain numpy (no bpy): the overlay, the pixel
tests and the bench share it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ...solver.kusudama import Kusudama

SUBDIVISIONS = 4
BISECTION_STEPS = 8


@dataclass(frozen=True)
class RegionMesh:
    """Triangles (k, 3, 3) of unit directions on each side, and the outline's segments (s, 2, 3)."""

    allowed: np.ndarray
    forbidden: np.ndarray
    outline: np.ndarray


def _icosahedron() -> tuple[np.ndarray, np.ndarray]:
    phi = (1.0 + 5.0**0.5) / 2.0
    vertices = np.array(
        [
            (-1, phi, 0),
            (1, phi, 0),
            (-1, -phi, 0),
            (1, -phi, 0),
            (0, -1, phi),
            (0, 1, phi),
            (0, -1, -phi),
            (0, 1, -phi),
            (phi, 0, -1),
            (phi, 0, 1),
            (-phi, 0, -1),
            (-phi, 0, 1),
        ],
        dtype=float,
    )
    faces = np.array(
        [
            (0, 11, 5),
            (0, 5, 1),
            (0, 1, 7),
            (0, 7, 10),
            (0, 10, 11),
            (1, 5, 9),
            (5, 11, 4),
            (11, 10, 2),
            (10, 7, 6),
            (7, 1, 8),
            (3, 9, 4),
            (3, 4, 2),
            (3, 2, 6),
            (3, 6, 8),
            (3, 8, 9),
            (4, 9, 5),
            (2, 4, 11),
            (6, 2, 10),
            (8, 6, 7),
            (9, 8, 1),
        ]
    )
    return vertices / np.linalg.norm(vertices, axis=1, keepdims=True), faces


@cache
def icosphere(subdivisions: int = SUBDIVISIONS) -> tuple[np.ndarray, np.ndarray]:
    """(vertices (V, 3) unit, faces (F, 3)) of a subdivided icosahedron, faces wound outward."""
    vertices, faces = _icosahedron()
    for _ in range(subdivisions):
        edges = np.sort(np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]]), axis=1)
        unique, inverse = np.unique(edges, axis=0, return_inverse=True)
        middles = vertices[unique[:, 0]] + vertices[unique[:, 1]]
        middles /= np.linalg.norm(middles, axis=1, keepdims=True)
        mid = len(vertices) + inverse.reshape(3, -1).T
        a, b, c = faces.T
        ab, bc, ca = mid.T
        faces = np.concatenate(
            [np.stack(t, axis=1) for t in ((a, ab, ca), (ab, b, bc), (ca, bc, c), (ab, bc, ca))]
        )
        vertices = np.concatenate([vertices, middles])
    vertices.setflags(write=False)
    faces.setflags(write=False)
    return vertices, faces


def _crossings(kusudama: Kusudama, inside_end: np.ndarray, outside_end: np.ndarray) -> np.ndarray:
    """Where the boundary crosses each great-circle edge from an allowed to a forbidden end."""
    low, high = inside_end.copy(), outside_end.copy()
    for _ in range(BISECTION_STEPS):
        middle = low + high
        middle /= np.linalg.norm(middle, axis=1, keepdims=True)
        allowed = kusudama.allows(middle)[:, None]
        low = np.where(allowed, middle, low)
        high = np.where(allowed, high, middle)
    middle = low + high
    return middle / np.linalg.norm(middle, axis=1, keepdims=True)


def _split_mixed(
    kusudama: Kusudama, corners: np.ndarray, inside: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut triangles whose corners disagree: (allowed pieces, forbidden pieces, outline segments).

    Each triangle is rolled so its odd corner comes first (keeping the winding); the corner's
    side gets (odd, p, q), the other side the quad (p, second, third, q) as two triangles.
    """
    odd = np.where(inside.sum(axis=1) == 1, np.argmax(inside, axis=1), np.argmin(inside, axis=1))
    roll = (odd[:, None] + np.arange(3)) % 3
    corners = np.take_along_axis(corners, roll[:, :, None], axis=1)
    odd_inside = np.take_along_axis(inside, roll, axis=1)[:, 0]
    first, second, third = corners[:, 0], corners[:, 1], corners[:, 2]
    flip = odd_inside[:, None]
    ends = np.concatenate([second, third])
    flip = np.concatenate([flip, flip])
    repeated = np.concatenate([first, first])
    p, q = np.split(_crossings(kusudama, np.where(flip, repeated, ends), np.where(flip, ends, repeated)), 2)
    tip = np.stack([first, p, q], axis=1)
    quad = np.concatenate([np.stack([p, second, third], axis=1), np.stack([p, third, q], axis=1)])
    quad_inside = np.concatenate([~odd_inside, ~odd_inside])
    allowed = np.concatenate([tip[odd_inside], quad[quad_inside]])
    forbidden = np.concatenate([tip[~odd_inside], quad[~quad_inside]])
    return allowed, forbidden, np.stack([p, q], axis=1)


def region_mesh(kusudama: Kusudama, subdivisions: int = SUBDIVISIONS) -> RegionMesh:
    """The sphere around a bone cut into the Kusudama's allowed and forbidden swing regions."""
    vertices, faces = icosphere(subdivisions)
    inside = kusudama.allows(vertices)[faces]
    corners = vertices[faces]
    count = inside.sum(axis=1)
    mixed = (count > 0) & (count < 3)
    allowed, forbidden, outline = _split_mixed(kusudama, corners[mixed], inside[mixed])
    return RegionMesh(
        allowed=np.concatenate([corners[count == 3], allowed]),
        forbidden=np.concatenate([corners[count == 0], forbidden]),
        outline=outline,
    )
