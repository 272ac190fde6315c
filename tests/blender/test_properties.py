"""Every EWBIK setting explains itself in the UI, in an animator's words, with units, under its public name."""

import bpy
import pytest

from tests.support.blender_helpers import addon_module

PUBLIC_IDENTIFIERS = {  # docs/INTERFACE.md names these; the UI may rename them, the RNA identifiers stay
    "armature": (
        "live",
        "iterations",
        "time_budget_ms",
        "dampening",
        "translate_root",
        "tolerance",
        "stabilization_passes",
    ),
    "bone": (
        "target",
        "weight",
        "orientation_weights",
        "falloff",
        "stiffness",
    ),
    "limits": ("cones", "use_twist_limit", "twist_min", "twist_max", "comfort"),
    "cone": ("direction", "radius"),
}


def ewbik_groups():
    """{"armature" | "bone" | "limits" | "cone": RNA struct}, found from Object.ewbik, PoseBone.ewbik
    and Bone.ewbik."""
    armature = bpy.types.Object.bl_rna.properties["ewbik"].fixed_type
    bone = bpy.types.PoseBone.bl_rna.properties["ewbik"].fixed_type
    limits = bpy.types.Bone.bl_rna.properties["ewbik"].fixed_type
    return {
        "armature": armature,
        "bone": bone,
        "limits": limits,
        "cone": limits.properties["cones"].fixed_type,
    }


def ewbik_properties():
    """(group, RNA property) of every property reachable from Object.ewbik, PoseBone.ewbik and
    Bone.ewbik."""
    return [
        (group, prop)
        for group, struct in ewbik_groups().items()
        for prop in struct.properties
        if prop.identifier != "rna_type"
    ]


def test_every_ewbik_property_has_a_name_and_a_tooltip():
    properties = ewbik_properties()
    assert len(properties) >= 30
    missing = [f"{group}.{prop.identifier}" for group, prop in properties if not prop.description.strip()]
    unnamed = [f"{group}.{prop.identifier}" for group, prop in properties if not prop.name.strip()]
    assert missing == [] and unnamed == []


def test_the_public_identifiers_are_kept():
    for group, struct in ewbik_groups().items():
        assert set(PUBLIC_IDENTIFIERS[group]) <= set(struct.properties.keys())


@pytest.mark.parametrize(
    ("group", "identifier", "name"),
    [
        ("armature", "time_budget_ms", "Time Budget (ms)"),
        ("armature", "dampening", "Max Turn per Step"),
        ("armature", "stabilization_passes", "Stabilization Passes"),
        ("armature", "influence", "Influence"),
        ("bone", "pin_kind", "Pin"),
        ("bone", "planted", "Planted"),
    ],
)
def test_settings_read_in_an_animators_words(group, identifier, name):
    prop = ewbik_groups()[group].properties[identifier]
    assert prop.name == name
    if identifier == "dampening":
        assert "Dampening" in prop.description  # the solver's word is still findable


def test_angles_and_lengths_show_their_units():
    groups = ewbik_groups()
    armature, limits, cone = (groups[name].properties for name in ("armature", "limits", "cone"))
    assert armature["tolerance"].subtype == "DISTANCE" and armature["tolerance"].unit == "LENGTH"
    for prop in (armature["dampening"], limits["twist_min"], limits["twist_max"], cone["radius"]):
        assert prop.subtype == "ANGLE" and prop.unit == "ROTATION"
    assert armature["influence"].subtype == "FACTOR"


def test_every_operator_has_a_tooltip_and_a_label():
    operators = [cls for cls in addon_module("operators").CLASSES]
    assert len(operators) >= 15
    for cls in operators:
        assert cls.bl_label.strip() and (cls.__doc__ or "").strip(), cls.__name__
