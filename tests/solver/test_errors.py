"""One root for every refusal: an `EwbikError`, a `ValueError` naming its field and its reason."""

import copy

import numpy as np
import pytest

import solver
from solver import (
    EwbikError,
    FitError,
    JointLimits,
    Kusudama,
    LimitCone,
    PresetError,
    SceneError,
    SolverSettings,
    fit_limits,
    parse_scene,
    preset_limits,
)
from solver.__main__ import _read
from tests.solver.conftest import load_example


@pytest.mark.parametrize("error_class", [SceneError, PresetError, FitError])
def test_every_solver_error_is_an_ewbik_error_and_a_value_error(error_class):
    assert issubclass(error_class, EwbikError)
    assert issubclass(error_class, ValueError)
    assert "EwbikError" in solver.__all__


def test_a_refused_setting_names_its_field_and_reads_as_field_and_reason():
    with pytest.raises(EwbikError) as caught:
        SolverSettings(iterations=0)
    error = caught.value
    assert isinstance(error, SceneError)
    assert error.field == "settings.iterations"
    assert error.reason == "must be a whole number in [1, 1000000], got 0"
    assert str(error) == f"{error.field}: {error.reason}"


def test_a_scene_error_names_the_path_into_the_document():
    document = copy.deepcopy(load_example("two_arms.json"))
    document["pins"][1]["weight"] = -1.0
    with pytest.raises(SceneError) as caught:
        parse_scene(document)
    assert caught.value.field == "pins[1].weight"
    assert str(caught.value).startswith("pins[1].weight: ")


def test_a_document_that_is_no_object_is_named_as_the_document():
    with pytest.raises(SceneError) as caught:
        parse_scene([])
    assert caught.value.field == ""
    assert str(caught.value) == f"the document {caught.value.reason}"


def test_a_preset_error_names_the_preset_and_keeps_its_reason():
    with pytest.raises(PresetError) as caught:
        preset_limits([], preset="dragon")
    assert caught.value.field == "preset"
    assert str(caught.value) == f"preset: {caught.value.reason}"
    assert caught.value.why == caught.value.reason


def test_a_fit_error_names_the_argument():
    bones = [{"name": "a", "parent": None}]
    with pytest.raises(FitError) as caught:
        fit_limits(bones, np.tile([1.0, 0.0, 0.0, 0.0], (4, 1, 1)), coverage=2.0)
    assert caught.value.field == "coverage"
    assert str(caught.value) == f"coverage: {caught.value.reason}"


def test_violation_of_rotations_of_the_wrong_shape_names_them():
    limits = JointLimits({0: Kusudama([LimitCone((0.0, 1.0, 0.0), 0.5)])}, 2)
    with pytest.raises(SceneError) as caught:
        limits.violation(np.array([[1.0, 0.0, 0.0, 0.0]]))
    assert caught.value.field == "rotations"


def test_an_unreadable_file_is_named_by_its_path(tmp_path):
    missing = tmp_path / "missing.json"
    with pytest.raises(EwbikError) as caught:
        _read(str(missing))
    assert caught.value.field == str(missing)
    assert str(caught.value).startswith(f"{missing}: ")
