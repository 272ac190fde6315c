"""Joint limits between scene-document dicts and `PoseBone.ewbik` (presets, import, fitting)."""


def scene_bones(obj):
    """The armature's bones as scene-document bone dicts (name, parent, rest, length)."""
    return [
        {
            "name": bone.name,
            "parent": bone.parent.name if bone.parent else None,
            "rest": [list(row) for row in bone.matrix_local],
            "length": bone.length,
        }
        for bone in obj.data.bones
    ]


def set_limits(settings, limits):
    """Store one bone's scene-document limits dict (cones, optional twist and comfort); {} clears them."""
    settings.cones.clear()
    for cone in limits.get("cones", ()):
        item = settings.cones.add()
        item.direction = cone["direction"]
        item.radius = cone["radius"]
    settings.active_cone_index = 0
    twist = limits.get("twist")
    settings.use_twist_limit = twist is not None
    if twist is not None:
        settings.twist_min = twist["min"]
        settings.twist_max = twist["max"]
    settings.comfort = limits.get("comfort", 0.0)
