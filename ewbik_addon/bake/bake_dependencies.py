"""Which baked armatures a bake must write through Blender every frame: those that something the
bake reads on a later frame depends on.

Every frame, a bake reads the pins' targets (and each armature's own world matrix, which puts
them in armature space) as Blender evaluated them after the frame change. A solved pose that
none of these depends on can stay in the rig's buffers until the bake ends, which spares Blender
writing the pose and evaluating the armature again every frame: in a crowd that re-evaluation
is most of a frame. Dependencies are followed through parents, object and bone constraints,
modifiers and drivers; what cannot be followed (a driver reading another kind of datablock or
running a Python expression, a geometry nodes modifier) makes every armature written, as a bake
always did.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

import bpy


class _Unsure(Exception):
    """Some dependency cannot be followed."""


def armatures_read(
    armatures: Collection[bpy.types.Object], targets: Iterable[bpy.types.Object]
) -> set[bpy.types.Object]:
    """The armatures among `armatures` whose pose the bake reads back through Blender: one of
    `targets` or of the armatures' own dependencies depends on them (all of them when unsure)."""
    try:
        reached = _reached(list(targets) + [found for obj in armatures for found in _direct(obj)])
    except _Unsure:
        return set(armatures)
    return {obj for obj in armatures if obj in reached or obj.data in reached}


def _reached(start: Iterable[bpy.types.ID]) -> set[bpy.types.ID]:
    """Every datablock in `start` and, through objects and collections, everything they depend on."""
    reached, frontier = set(), list(start)
    while frontier:
        block = frontier.pop()
        if block in reached:
            continue
        reached.add(block)
        if isinstance(block, bpy.types.Object):
            frontier.extend(_direct(block))
        elif isinstance(block, bpy.types.Collection):  # a modifier's or constraint's collection operand
            frontier.extend(block.all_objects)
    return reached


def _direct(obj: bpy.types.Object) -> list[bpy.types.ID]:
    """The datablocks obj's evaluation reads directly (its own, its data's and its shape keys'
    drivers included)."""
    found = [] if obj.parent is None else [obj.parent]
    structs = list(obj.constraints)
    if obj.pose is not None:
        structs += [constraint for bone in obj.pose.bones for constraint in bone.constraints]
    for modifier in obj.modifiers:
        if modifier.type == "NODES":
            raise _Unsure
        structs.append(modifier)
    for struct in structs:
        found += _pointed(struct)
    for owner in (obj, obj.data, getattr(obj.data, "shape_keys", None)):
        animation = getattr(owner, "animation_data", None)
        if animation is not None:
            found += _driver_reads(animation)
    return found


def _pointed(struct: bpy.types.Constraint | bpy.types.Modifier) -> list[bpy.types.ID]:
    """The datablocks a constraint or modifier points to (the Armature constraint's targets too)."""
    found = []
    for prop in struct.bl_rna.properties:
        if prop.type == "POINTER":
            value = getattr(struct, prop.identifier)
            if isinstance(value, bpy.types.ID):
                found.append(value)
        elif prop.type == "COLLECTION" and prop.identifier == "targets":
            found += [item.target for item in getattr(struct, prop.identifier) if item.target is not None]
    return found


def _driver_reads(animation: bpy.types.AnimData) -> list[bpy.types.ID]:
    """The objects (and armature data) the drivers read; anything else is unsure."""
    found = []
    for fcurve in animation.drivers:
        driver = fcurve.driver
        if driver.type == "SCRIPTED" and not driver.is_simple_expression:
            raise _Unsure
        for variable in driver.variables:
            for target in variable.targets:
                block = target.id
                if block is None:
                    continue
                if not isinstance(block, (bpy.types.Object, bpy.types.Armature)):
                    raise _Unsure
                found.append(block)
    return found
