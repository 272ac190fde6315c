"""The Open Job Description template of the farm bake (farm/openjd/ewbik-bake.yaml): it passes
`openjd check`, and `openjd run` turns its parameters into one Blender command line per shot, here
recorded by a stand-in for Blender that writes its arguments down instead of baking."""

import json
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "farm" / "openjd" / "ewbik-bake.yaml"


def openjd(*args):
    """`openjd ARGS...` with this Python's openjd-cli; the completed process, output captured."""
    return subprocess.run([sys.executable, "-m", "openjd", *args], capture_output=True, text=True)


def recording_blender(folder):
    """A stand-in for Blender that appends its arguments, as one JSON list a line, to a log; returns
    (executable, log)."""
    log = folder / "calls.jsonl"
    executable = folder / "blender"
    executable.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"with open({str(log)!r}, 'a', encoding='utf-8') as stream:\n"
        "    stream.write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    executable.chmod(0o755)
    return executable, log


def recorded_calls(tmp_path, **parameters):
    """The Blender command lines (without the executable) one `openjd run` of the template makes."""
    executable, log = recording_blender(tmp_path)
    run = openjd(
        "run", str(TEMPLATE), "--job-param", json.dumps({"BlenderExecutable": str(executable), **parameters})
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def test_template_passes_openjd_check():
    check = openjd("check", str(TEMPLATE))
    assert check.returncode == 0, check.stdout + check.stderr


def test_one_bake_per_shot_with_only_the_step_by_default(tmp_path):
    shots = [str(tmp_path / "shot 1.blend"), str(tmp_path / "shot_2.blend")]
    calls = recorded_calls(tmp_path, ShotFiles=shots)
    assert sorted(calls) == sorted(["-b", "-c", "ewbik", "bake", shot, "--step", "1"] for shot in shots)


def test_every_option_reaches_the_command(tmp_path):
    output = tmp_path / "baked"
    calls = recorded_calls(
        tmp_path,
        ShotFiles=[str(tmp_path / "shot.blend")],
        Frames="10-40",
        Step=2,
        Armatures="Hero, Crowd rig",
        KeysOnly=True,
        ToleranceMm="0.5",
        OutputDir=str(output),
    )
    assert calls == [
        ["-b", "-c", "ewbik", "bake", str(tmp_path / "shot.blend"), "--step", "2", "--frames", "10-40"]
        + ["--armature", "Hero", "--armature", "Crowd rig", "--keys-only", "--tolerance", "0.5"]
        + ["--output-dir", str(output)]
    ]


def test_a_folder_is_baked_in_one_task_of_its_blend_files(tmp_path):
    folder = tmp_path / "sequence"
    folder.mkdir()
    for name in ("b.blend", "a.blend", "notes.txt"):
        (folder / name).touch()
    calls = recorded_calls(tmp_path, ShotFiles=[str(folder)])
    assert calls == [
        ["-b", "-c", "ewbik", "bake", str(folder / "a.blend"), str(folder / "b.blend"), "--step", "1"]
    ]


def test_a_folder_without_blend_files_fails_its_task(tmp_path):
    executable, log = recording_blender(tmp_path)
    parameters = {"BlenderExecutable": str(executable), "ShotFiles": [str(tmp_path)]}
    run = openjd("run", str(TEMPLATE), "--job-param", json.dumps(parameters))
    assert run.returncode != 0
    assert f"no .blend file in {tmp_path}" in run.stdout + run.stderr
    assert not log.exists()
