"""The body balance weighs (`SolverSettings.balance`): segment masses by the bones' humanoid roles,
the feet, and which way is up, for the solver and for the overlay's centre of mass and support
polygon (drawn from the pose Blender shows, measured as the solver measures)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np
from mathutils import Vector

from ...solver import presets
from ...solver.balance import Body, body_of, centre_of_mass, support_from
from .production_checks import preset_overrides

if TYPE_CHECKING:
    import bpy

    from ..bridge.rig_cache import Rig


def up_in_armature(obj: bpy.types.Object) -> np.ndarray:
    """(3,) the scene's up (world +Z) in the armature's space: the ground's normal."""
    up = obj.matrix_world.inverted_safe().to_3x3() @ Vector((0.0, 0.0, 1.0))
    return np.array(up.normalized())


def rig_body(obj: bpy.types.Object, rig: Rig, up: np.ndarray | None = None) -> Body:
    """The Body of the whole rig (solver order) on the ground whose normal is `up` (None: the
    scene's, `up_in_armature`), its masses and feet kept on the rig until its structure changes."""
    if rig.body is None:
        roles = presets.bone_roles(rig.skeleton.names, preset_overrides(obj))
        rig.body = body_of(rig.skeleton, roles)
    return dataclasses.replace(rig.body, up=up_in_armature(obj) if up is None else up)


def chains_body(obj: bpy.types.Object, rig: Rig, start: tuple[np.ndarray, np.ndarray]) -> Body:
    """The Body of the pinned chains a solve hands the solver: the other bones' masses carried
    by their nearest ancestor on a chain, where the start pose (rotations, locations; pose.bones
    order) holds them. Kept on the rig while the chains, the start and the ground are the same
    (a drag solves every update from the same pose underneath)."""
    up = up_in_armature(obj)
    made_from = (rig.chains.skeleton, start[0].tobytes(), start[1].tobytes(), up.tobytes())
    if rig.chains_body is not None and _same(rig.chains_body[0], made_from):
        return rig.chains_body[1]
    body = rig_body(obj, rig, up)
    rotations, locations = np.empty((len(rig.skeleton), 4)), np.empty((len(rig.skeleton), 3))
    rotations[rig.to_solver], locations[rig.to_solver] = start
    chains = body.within(rig.skeleton, rig.chains.skeleton, rotations, locations)
    rig.chains_body = (made_from, chains)
    return chains


def _same(kept: tuple, made_from: tuple) -> bool:
    return kept[0] is made_from[0] and kept[1:] == made_from[1:]


def balance_shape(obj: bpy.types.Object, rig: Rig) -> tuple[np.ndarray, np.ndarray | None]:
    """(centre of mass (3,), support polygon corners (M, 3) or None), world space, of the pose
    Blender shows: what the overlay draws when balance is on."""
    body = rig_body(obj, rig)
    heads, tails = (_pose_points(obj, rig, name) for name in ("head", "tail"))
    world = np.array(obj.matrix_world)
    com = centre_of_mass(body.masses, heads, tails)
    points = []
    for name, local in body.feet.items():
        matrix = np.array(obj.pose.bones[name].matrix)
        points.append(local @ matrix[:3, :3].T + matrix[:3, 3])
    support = support_from(points, body.up, rig.skeleton.unit)
    corners = None if support is None else support.corners @ world[:3, :3].T + world[:3, 3]
    return com @ world[:3, :3].T + world[:3, 3], corners


def _pose_points(obj: bpy.types.Object, rig: Rig, name: str) -> np.ndarray:
    """(N, 3) the posed bones' `name` point ("head" or "tail"), armature space, in solver order."""
    flat = np.empty(3 * len(obj.pose.bones), np.float32)
    obj.pose.bones.foreach_get(name, flat)
    points = np.empty((len(rig.skeleton), 3))
    points[rig.to_solver] = flat.reshape(-1, 3)
    return points
