"""What the extension says: counts with the right plural, distances in the scene's length unit
without scientific notation, errors reported once."""

import bpy
import pytest
from mathutils import Vector

from tests.support.blender_helpers import addon_module, pin, update


@pytest.fixture
def messages():
    return addon_module("ewbik_addon.com.messages")


def test_counts_take_the_right_plural(messages):
    assert [messages.count(n, "pin") for n in (0, 1, 2)] == ["0 pins", "1 pin", "2 pins"]
    assert messages.count(1, "bone") == "1 bone" and messages.count(3, "bone") == "3 bones"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0"),
        (1.234e-4, "0.00012"),
        (4e-6, "0"),
        (0.0201, "0.0201"),
        (191.4, "191"),
        (5e7, "50000000"),
        (-0.5, "-0.5"),
    ],
)
def test_plain_numbers_never_use_scientific_notation(messages, value, text):
    assert messages.plain_number(value) == text


@pytest.mark.parametrize(
    ("system", "length_unit", "scale_length", "value", "text"),
    [
        ("METRIC", "METERS", 1.0, 0.026, "0.026 m"),
        ("METRIC", "CENTIMETERS", 1.0, 0.026, "2.6 cm"),
        ("METRIC", "MILLIMETERS", 1.0, 0.0000123, "0.0123 mm"),
        ("METRIC", "METERS", 1.0, 4.8e-7, "0.00048 mm"),
        ("METRIC", "METERS", 1.0, 0.00001, "0.01 mm"),
        ("METRIC", "METERS", 1.0, 0.0, "0 mm"),
        ("METRIC", "KILOMETERS", 1.0, 0.0036, "3.6 mm"),
        ("METRIC", "METERS", 1.0, 0.01, "0.01 m"),
        ("METRIC", "MILLIMETERS", 0.01, 2.6, "26 mm"),
        ("METRIC", "ADAPTIVE", 1.0, 0.191, "19.1 cm"),
        ("IMPERIAL", "INCHES", 1.0, 0.0254, '1"'),
        ("NONE", "ADAPTIVE", 1.0, 0.000123, "0.00012"),
    ],
)
def test_distances_use_the_scenes_length_unit(messages, system, length_unit, scale_length, value, text):
    units = bpy.context.scene.unit_settings
    units.system = system
    if system != "NONE":
        units.length_unit = length_unit
    units.scale_length = scale_length
    assert messages.distance(bpy.context.scene, value) == text


def test_the_live_status_speaks_the_scenes_units(metarig):
    metarig.ewbik.stand_on_pin = False  # only the bones asked for: no feet planted by the first Pin
    bpy.context.scene.unit_settings.length_unit = "MILLIMETERS"
    metarig.ewbik.time_budget_ms = 0.0
    targets = pin(metarig, "hand.L", "foot.L")
    targets["hand.L"].location += Vector((3.0, 0.0, 0.0))  # out of reach: the distance stays large
    update()
    status = metarig.ewbik.status
    assert status.startswith("1 pin reached; hand.L ")
    assert status.endswith(" mm short, out of reach with the other pins held")
    assert "e+" not in status and "e-" not in status
    short = float(status.split()[4])
    assert 1000.0 < short < 3000.0


def test_angles_read_in_degrees(messages):
    assert messages.degrees(0.5) == "28.6°"
    assert messages.degrees(5e-8) == "0°"


def test_a_lone_pin_out_of_reach_says_its_chain_is_too_short(metarig):
    metarig.ewbik.stand_on_pin = False  # only the bones asked for: no feet planted by the first Pin
    metarig.ewbik.auto_limits = False
    target = pin(metarig, "hand.L")["hand.L"]
    target.location += Vector((3.0, 0.0, 0.0))
    update()
    status = metarig.ewbik.status
    assert status.startswith("hand.L ") and status.endswith(" short, beyond the reach of its chain"), status
    assert not metarig.ewbik.status_is_error


def test_after_a_bake_the_status_says_what_was_keyed_and_that_live_is_off(metarig):
    target = pin(metarig, "hand.L", "foot.L")["hand.L"]
    target.keyframe_insert("location", frame=1)
    target.location += Vector((3.0, 0.0, 0.0))
    target.keyframe_insert("location", frame=3)
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, 3
    bpy.ops.object.mode_set(mode="OBJECT")
    assert bpy.ops.ewbik.bake() == {"FINISHED"}
    assert metarig.ewbik.status.startswith("Baked 3 frames (1-3)"), metarig.ewbik.status
    assert metarig.ewbik.status.endswith("; Live is off, the keys play back")
