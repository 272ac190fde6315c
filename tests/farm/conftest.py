"""What the farm tests that run Blender share: the extension's zip, built once."""

import pytest

from tests.support.farm_runs import build_extension_zip


@pytest.fixture(scope="session")
def extension_zip(tmp_path_factory):
    return build_extension_zip(tmp_path_factory.mktemp("dist"))
