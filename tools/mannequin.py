"""A simple skinned mannequin for the pictures: a rounded tube along every chain of body bones.

Animators read poses from bodies, not from octahedral bones. Every deform bone with a body role
(`solver.presets.bone_roles`; face, props and helper bones get none) has a radius for its role in
proportion to the rig's height (a chest is wider than a forearm); a chain of connected bones
(hips to head, thigh to toes, upper arm to hand, a finger) is one tube of rings through them,
capped by half spheres, so no two pieces of one limb overlap. Each ring is weighted to its bone
and the ring at a joint half to each of the two bones meeting there: a joint bends as a round
elbow, and the skin follows whatever pose the armature takes. (Blender's heat weights smeared
overlapping capsules into shards at the hips; these need no solver.) It is built from the rest
pose. The pinned bones' stretches of the tubes are coloured apart, and each pin's target is a red
ring around the limb where the target holds it (a marker inside the limb would be hidden by the
body), so the pictures show what is pinned and where to.

    mannequin.add(obj, pinned)                 # any pose: it is built from the rest pose
    mannequin.add_target_rings(obj, targets)   # {bone: target}
"""

import math
import re

import bpy
from mathutils import Matrix, Quaternion, Vector

from solver import presets

BODY_COLOUR = (0.72, 0.74, 0.78, 1.0)
PINNED_COLOUR = (0.85, 0.55, 0.25, 1.0)
TARGET_COLOUR = (0.9, 0.1, 0.1, 1.0)
# Tube radius per body role, as a share of the body's height (a 1.8 m body: chest 15 cm).
RADIUS = {
    "head": 0.052,
    "neck": 0.028,
    "chest": 0.082,
    "spine": 0.074,
    "hips": 0.078,
    "clavicle": 0.024,
    "upper_arm": 0.027,
    "upper_arm_twist": 0.027,
    "forearm": 0.021,
    "forearm_twist": 0.021,
    "wrist": 0.018,
    "hand": 0.018,
    "palm": 0.012,
    "thigh": 0.042,
    "thigh_twist": 0.042,
    "shin": 0.03,
    "shin_twist": 0.03,
    "foot": 0.021,
    "toes": 0.016,
}
FINGER_RADIUS = 0.0055
TORSO_WIDTH = {"chest": 1.35, "spine": 1.35, "hips": 1.35}  # wider than deep: an elliptic section
SEGMENTS, CAP_RINGS, RINGS_PER_BONE = 16, 4, 4
QUARTER_TURN_ABOUT_X = Quaternion((1.0, 0.0, 0.0), math.pi / 2.0)  # a torus's axis (Z) onto a bone's (Y)


def _base_role(role):
    return re.sub(r"\.[LR]$", "", role)


def body_height(obj):
    """Height of the rig's rest pose in armature units (its bones' extent along Z)."""
    zs = [z for bone in obj.data.bones for z in (bone.head_local.z, bone.tail_local.z)]
    return max(zs) - min(zs)


def tube_bones(obj):
    """{bone name: (radius, width)} of the rig's deform bones that have a body role."""
    roles = presets.bone_roles([bone.name for bone in obj.data.bones])
    height = body_height(obj)
    sizes = {}
    for bone in obj.data.bones:
        role = _base_role(roles.get(bone.name, ""))
        radius = FINGER_RADIUS if role.startswith(("finger", "thumb")) else RADIUS.get(role)
        if bone.use_deform and radius is not None and bone.length > 1e-4:
            sizes[bone.name] = (radius * height, TORSO_WIDTH.get(role, 1.0))
    return sizes


def chains(obj, sizes):
    """Lists of bone names, each a chain of connected bones with tubes, root end first."""

    def next_in_chain(bone):
        children = [child for child in bone.children if child.use_connect and child.name in sizes]
        return children[0] if len(children) == 1 else None

    continued = {
        child.name for bone in obj.data.bones if (child := next_in_chain(bone)) and bone.name in sizes
    }
    found = []
    for bone in obj.data.bones:
        if bone.name not in sizes or bone.name in continued:
            continue
        chain = [bone]
        while (child := next_in_chain(chain[-1])) is not None:
            chain.append(child)
        found.append([b.name for b in chain])
    return found


def _ring(frame, y, radius, width, weights):
    """A ring's vertices (armature space) and its {bone: weight}."""
    turn = [2.0 * math.pi * k / SEGMENTS for k in range(SEGMENTS)]
    points = [frame @ Vector((width * radius * math.cos(a), y, radius * math.sin(a))) for a in turn]
    return points, weights


def _rings(obj, chain, sizes):
    """(bone the ring belongs to, ring) along a chain, caps included, root end first."""
    rings = []
    first, last = obj.data.bones[chain[0]], obj.data.bones[chain[-1]]
    radius, width = sizes[first.name]
    for i in range(CAP_RINGS):  # the first half sphere, pole first
        angle = math.pi / 2 * (1 - i / CAP_RINGS)
        y, r = -radius * math.sin(angle), radius * math.cos(angle)
        rings.append((first.name, _ring(first.matrix_local, y, r, width, {first.name: 1.0})))
    for k, name in enumerate(chain):
        bone = obj.data.bones[name]
        for j in range(RINGS_PER_BONE):
            (radius, width), weights = sizes[name], {name: 1.0}
            if j == 0 and k > 0:  # the joint: half to each bone, the narrower section
                (radius, width), weights = (
                    min(sizes[chain[k - 1]], sizes[name]),
                    {chain[k - 1]: 0.5, name: 0.5},
                )
            y = bone.length * j / RINGS_PER_BONE
            rings.append((name, _ring(bone.matrix_local, y, radius, width, weights)))
    radius, width = sizes[last.name]
    for i in range(CAP_RINGS + 1):  # the last half sphere, from the tail to the pole
        angle = math.pi / 2 * i / CAP_RINGS
        y, r = last.length + radius * math.sin(angle), radius * math.cos(angle)
        rings.append((last.name, _ring(last.matrix_local, y, r, width, {last.name: 1.0})))
    return rings


def _skinned_mesh(obj, name, strips):
    """One mesh of ring-to-ring strips (pairs of rings; a ring shared by two strips is one ring of
    the mesh, so shading runs smooth across), skinned to obj through an Armature modifier."""
    verts, faces, weights, start = [], [], [], {}
    for pair in strips:
        for points, ring_weights in pair:
            if id(points) not in start:
                start[id(points)] = len(verts)
                verts += points
                weights += [ring_weights] * SEGMENTS
        a0, b0 = start[id(pair[0][0])], start[id(pair[1][0])]
        faces += [(a0 + k, a0 + (k + 1) % SEGMENTS, b0 + (k + 1) % SEGMENTS, b0 + k) for k in range(SEGMENTS)]
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata([tuple(v) for v in verts], [], faces)
    mesh.shade_smooth()
    shape = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(shape)
    groups = {}
    for index, vertex_weights in enumerate(weights):
        for bone, weight in vertex_weights.items():
            if bone not in groups:
                groups[bone] = shape.vertex_groups.new(name=bone)
            groups[bone].add([index], weight, "REPLACE")
    shape.parent = obj
    shape.modifiers.new("Armature", "ARMATURE").object = obj
    return shape


def add(obj, pinned=()):
    """The mannequin of `obj`: the body and, coloured apart, the pinned bones' stretches of it."""
    sizes = tube_bones(obj)
    strips = {False: [], True: []}
    for chain in chains(obj, sizes):
        rings = _rings(obj, chain, sizes)
        for (bone_a, ring_a), (bone_b, ring_b) in zip(rings, rings[1:]):
            strips[bone_a in pinned and bone_b in pinned].append((ring_a, ring_b))
    shapes = []
    for is_pinned, name, colour in (
        (False, "Mannequin", BODY_COLOUR),
        (True, "Mannequin pins", PINNED_COLOUR),
    ):
        if strips[is_pinned]:
            shapes.append(_skinned_mesh(obj, name, strips[is_pinned]))
            shapes[-1].color = colour
    return shapes


def add_target_rings(obj, targets):
    """A red ring around the limb at each pin's target ({bone: target}), square to the bone's axis
    as the target holds it, wider than the tube there: the pinned bone's, or for a control bone
    without one (a generated rig's), the tube whose bone starts nearest the target."""
    sizes = tube_bones(obj)
    to_armature = obj.matrix_world.inverted()
    for bone, target in targets.items():
        location, rotation, _ = target.matrix_world.decompose()
        nearest = (
            bone
            if bone in sizes
            else min(sizes, key=lambda name: (obj.pose.bones[name].head - to_armature @ location).length)
        )
        radius, width = sizes[nearest]
        bpy.ops.mesh.primitive_torus_add(
            major_radius=1.3 * radius * width * obj.matrix_world.median_scale,
            minor_radius=0.23 * radius * width * obj.matrix_world.median_scale,
            major_segments=32,
            minor_segments=8,
        )
        ring = bpy.context.object
        ring.name = f"target ring {bone}"
        ring.color = TARGET_COLOUR
        ring.parent = target
        ring.matrix_world = Matrix.LocRotScale(location, rotation @ QUARTER_TURN_ABOUT_X, None)
