"""tools/build_native.py: compiles a loadable library, and never leaves a stale one behind."""

import ctypes
import importlib.util
import os

import pytest

from tests.solver.conftest import REPO


@pytest.fixture
def build_native(monkeypatch, tmp_path):
    spec = importlib.util.spec_from_file_location("build_native", REPO / "tools" / "build_native.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    target = tmp_path / "_ewbik_native.so"
    monkeypatch.setattr(module, "library_path", lambda package_dir, platform_name=None: target)
    return module, target


def test_builds_a_library_that_loads_and_exports_the_loop(build_native):
    module, target = build_native
    assert module.build(force=True) == target
    library = ctypes.CDLL(str(target))
    assert library.ewbik_problem_size() > 0 and hasattr(library, "ewbik_constrain_batch")
    assert module.up_to_date(target)


def test_a_failed_build_removes_the_stale_library(build_native, monkeypatch):
    module, target = build_native
    target.write_bytes(b"an old build")
    os.utime(target, (0, 0))
    monkeypatch.setenv("CC", "/nonexistent/cc")
    with pytest.raises(RuntimeError, match="no C compiler"):
        module.build()
    assert not target.exists()
