"""The farm bake run for real on one machine: `openjd run` of the Open Job Description template on
three small shots, Blender played by tests/support/bpy_blender.py (the bpy module with the extension
installed from its zip, running the command the extension registers)."""

import os
import subprocess
import zipfile

from tests.support.farm_runs import launcher_executable, make_shots, openjd_run_command

SHOTS = ("shot_1", "shot_2", "shot_3")


def test_the_extension_zip_leaves_the_farm_jobs_out(extension_zip):
    with zipfile.ZipFile(extension_zip) as archive:
        assert not [name for name in archive.namelist() if name.startswith("farm/")]


def test_the_launcher_refuses_what_is_not_a_command_line(tmp_path):
    run = subprocess.run(
        [str(launcher_executable(tmp_path)), "-b", "shot.blend"], capture_output=True, text=True
    )
    assert run.returncode == 2
    assert "usage: bpy_blender.py" in run.stderr


def test_the_launcher_installs_the_extension_and_names_a_command_it_did_not_register(tmp_path, extension_zip):
    run = subprocess.run(
        [str(launcher_executable(tmp_path)), "-b", "-c", "not_ewbik", "bake"],
        capture_output=True,
        text=True,
        env={**os.environ, "EWBIK_EXTENSION_ZIP": extension_zip},
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "no command 'not_ewbik' registered" in run.stderr


def test_openjd_run_bakes_three_shots(tmp_path, extension_zip):
    shots = tmp_path / "shots"
    shots.mkdir()
    made = make_shots(extension_zip, shots, SHOTS)
    assert made.returncode == 0, made.stdout + made.stderr
    baked = tmp_path / "baked"
    parameters = {
        "ShotFiles": [str(shots / f"{shot}.blend") for shot in SHOTS],
        "BlenderExecutable": str(launcher_executable(tmp_path)),
        "OutputDir": str(baked),
    }
    run = subprocess.run(
        openjd_run_command(parameters),
        capture_output=True,
        text=True,
        env={**os.environ, "EWBIK_EXTENSION_ZIP": extension_zip},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    written = [path.name for path in baked.iterdir()]
    for shot in SHOTS:
        assert any(name.startswith(shot) and name.endswith(".blend") for name in written), (shot, written)
