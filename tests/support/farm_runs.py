"""Running the farm bake on one machine, for the farm tests and the farm bench: the extension's zip,
a `blender` executable played by bpy_blender.py, shots made by farm_shots.py, and the `openjd run`
command line of the Open Job Description template."""

import json
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "farm" / "openjd" / "ewbik-bake.yaml"
LAUNCHER = REPO / "tests" / "support" / "bpy_blender.py"


def build_extension_zip(folder):
    """The path of the extension zip tools/build_extension.py builds into `folder` (it finds bpy
    without importing it); AssertionError with its message when it fails."""
    build = subprocess.run(
        [sys.executable, str(REPO / "tools" / "build_extension.py"), "--output-dir", str(folder)],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    return build.stdout.strip().splitlines()[-1]


def launcher_executable(folder):
    """An executable `blender` in `folder` that runs the launcher with this Python."""
    executable = pathlib.Path(folder) / "blender"
    executable.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{LAUNCHER}" "$@"\n')
    executable.chmod(0o755)
    return executable


def make_shots(extension_zip, folder, names, *options):
    """Run farm_shots.py (with its `options`) to save FOLDER/NAME.blend for each name; the finished
    process."""
    return subprocess.run(
        [sys.executable, "-m", "tests.support.farm_shots", *options, str(extension_zip), str(folder), *names],
        cwd=REPO,
        capture_output=True,
        text=True,
    )


def openjd_run_command(parameters):
    """`openjd run` of the template with these job parameters: every task, one after another."""
    return [sys.executable, "-m", "openjd", "run", str(TEMPLATE), "--job-param", json.dumps(parameters)]
