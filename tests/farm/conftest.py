"""What the farm tests that run Blender share: the extension's zip, built once."""

import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def extension_zip(tmp_path_factory):
    """The extension zip tools/build_extension.py builds (it finds bpy without importing it)."""
    folder = tmp_path_factory.mktemp("dist")
    build = subprocess.run(
        [sys.executable, str(REPO / "tools" / "build_extension.py"), "--output-dir", str(folder)],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    return build.stdout.strip().splitlines()[-1]
