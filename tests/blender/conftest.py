"""Blender-as-a-module test session: the extension is built and installed like a user would.

The zip comes from tools/build_extension.py (Blender's extension CLI), is installed
with `extensions.package_install_files` into the `user_default` repository of a
throw-away user-resources directory, and is then used only through operators and
properties. Every test starts from an empty file (`wm.read_homefile`), which keeps
add-ons enabled.
"""

import json
import os
import shutil
import tempfile

_USER_RESOURCES = tempfile.mkdtemp(prefix="ewbik-blender-user-")
os.environ["BLENDER_USER_RESOURCES"] = _USER_RESOURCES  # before bpy: never touch the real config

import bpy  # noqa: E402  (first: it makes addon_utils importable)

# isort: split
import addon_utils  # noqa: E402
import pytest  # noqa: E402

from tests.support.blender_helpers import (  # noqa: E402
    MOCAP_CLIP,
    PACKAGE,
    build_metarig,
    disable_extension,
    enable_extension,
    extension_enabled,
    import_mocap_rig,
    load_build_tool,
)


@pytest.fixture(scope="session")
def extension_zip(tmp_path_factory):
    return load_build_tool().build(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="session", autouse=True)
def installed_extension(extension_zip):
    """Install the built zip into user_default and enable it, exactly as the Preferences do."""
    result = bpy.ops.extensions.package_install_files(
        filepath=str(extension_zip), repo="user_default", enable_on_install=True
    )
    assert result == {"FINISHED"}, result
    assert extension_enabled()
    addon_utils.enable("rigify", default_set=True)
    addon_utils.enable("io_anim_bvh", default_set=True)
    yield PACKAGE
    disable_extension()
    shutil.rmtree(_USER_RESOURCES, ignore_errors=True)


@pytest.fixture(autouse=True)
def empty_file(installed_extension):
    """Every test starts from an empty file with the extension enabled."""
    enable_extension()
    bpy.ops.wm.read_homefile(use_empty=True)
    yield
    enable_extension()


@pytest.fixture
def metarig():
    return build_metarig()


@pytest.fixture
def mocap_rig():
    return import_mocap_rig()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """Leave with pytest's own status before interpreter teardown.

    The bpy 4.2 module can crash while tearing itself down after Rigify has
    been used (exit 139 after every test passed); the tests' verdict is
    already printed by now, so skipping that teardown loses nothing.
    """
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_session_status[0])


_session_status = [0]


def pytest_sessionfinish(session, exitstatus):
    _session_status[0] = int(exitstatus)


@pytest.fixture
def straight_rig(tmp_path):
    """The CMU clip's skeleton rebuilt with a straight-line rest (as LAFAN-style exports), imported
    through ewbik.import_scene standing in the clip's first frame; returns (armature, document)."""
    from tests.support.mocap import load_bvh, scene_document, straight_line_rest

    document = scene_document(straight_line_rest(load_bvh(str(MOCAP_CLIP))), frame=0)
    path = tmp_path / "straight.json"
    path.write_text(json.dumps(document))
    assert bpy.ops.ewbik.import_scene(filepath=str(path)) == {"FINISHED"}
    return bpy.context.object, document
