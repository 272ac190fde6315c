"""The Flamenco job type of the farm bake (farm/flamenco/ewbik-bake.js), compiled under Node as the
Manager compiles it (tests/farm/flamenco_compiler.js records the tasks and commands it authors): one
Blender task per shot running the bake command with the job's settings."""

import json
import os
import pathlib
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
JOB_TYPE = REPO / "farm" / "flamenco" / "ewbik-bake.js"
COMPILER = pathlib.Path(__file__).resolve().parent / "flamenco_compiler.js"
NODE = shutil.which("node") or shutil.which("nodejs")

if NODE is None:
    assert os.environ.get("CI") != "true", "CI installs Node (tools/bootstrap.sh)"
    pytest.skip(
        "no Node to run the job type's compiler (tools/bootstrap.sh installs it)", allow_module_level=True
    )


def compiled(**settings):
    """What compileJob authors for a job with these settings: (JOB_TYPE, tasks), or raises
    AssertionError with the compiler's refusal."""
    run = subprocess.run(
        [NODE, str(COMPILER), str(JOB_TYPE)],
        input=json.dumps({"name": "bake", "settings": settings}),
        capture_output=True,
        text=True,
    )
    answer = json.loads(run.stdout)
    assert run.returncode == 0, answer["error"]
    return answer["jobType"], answer["tasks"]


def bake_line(task):
    """The task's one command as the Worker's blender-render runs it: (its parameters' fixed part,
    the arguments after the executable's own)."""
    (command,) = task["commands"]
    assert command["name"] == "blender-render"
    parameters = command["parameters"]
    fixed = {key: parameters[key] for key in ("exe", "exeArgs")}
    return fixed, [*parameters["argsBefore"], parameters["blendfile"], *parameters["args"]]


def test_the_job_type_offers_shots_frames_step_and_the_options():
    job_type, _ = compiled(shots="/shots/a.blend")
    settings = {setting["key"]: setting for setting in job_type["settings"]}
    assert job_type["label"] == "EWBIK Bake"
    assert list(settings) == [
        "shots",
        "frames",
        "step",
        "armatures",
        "keys_only",
        "tolerance_mm",
        "output_dir",
    ]
    assert settings["shots"]["required"]
    assert settings["step"]["type"] == "int32" and settings["step"]["default"] == 1
    assert settings["output_dir"]["subtype"] == "dir_path"


def test_one_blender_task_per_shot_with_only_the_step_by_default():
    _, tasks = compiled(shots="/shots/a.blend; /shots/b c.blend;", step=1)
    assert [(task["name"], task["type"]) for task in tasks] == [
        ("bake a.blend", "blender"),
        ("bake b c.blend", "blender"),
    ]
    for task, shot in zip(tasks, ["/shots/a.blend", "/shots/b c.blend"]):
        fixed, args = bake_line(task)
        assert fixed == {"exe": "{blender}", "exeArgs": "{blenderArgs}"}
        assert args == ["-b", "-c", "ewbik", "bake", shot, "--step", "1"]


def test_every_setting_reaches_the_command():
    _, (task,) = compiled(
        shots="/shots/a.blend",
        frames="10-40",
        step=2,
        armatures="Hero, Crowd rig,",
        keys_only=True,
        tolerance_mm=0.5,
        output_dir="/baked",
    )
    assert bake_line(task)[1] == (
        ["-b", "-c", "ewbik", "bake", "/shots/a.blend", "--step", "2", "--frames", "10-40"]
        + ["--armature", "Hero", "--armature", "Crowd rig", "--keys-only", "--tolerance", "0.5"]
        + ["--output-dir", "/baked"]
    )


def test_unset_options_are_left_out():
    _, (task,) = compiled(
        shots="/shots/a.blend", keys_only=False, tolerance_mm=0, output_dir="", armatures=""
    )
    assert bake_line(task)[1] == ["-b", "-c", "ewbik", "bake", "/shots/a.blend", "--step", "1"]


def test_a_job_without_shots_is_refused():
    with pytest.raises(AssertionError, match="shots: name at least one .blend file"):
        compiled(shots=" ; ")
