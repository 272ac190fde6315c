"""Every platform's build of the native loop (tools/build_native.py --cross) does what this
machine's does: golden cases, packed by Python and answered by this machine's library (held to
the numpy loop by tests/solver/test_native.py), run through each
library that can execute here (linux-x64 natively, linux-arm64 under qemu-user, windows-x64
under Wine) by golden_runner.c built with the same toolchain for that target; for the others
the file's architecture, minimum OS and exported functions are checked.
"""

import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

from solver import JointLimits, Pin, SolverSettings, native
from solver.native_limits import NativeLimits
from tests.native_targets import binaries
from tests.native_targets.golden import capture
from tests.solver.conftest import REPO, canonical, random_problem
from tests.support.kusudamas import random_kusudama

spec = importlib.util.spec_from_file_location("build_native", REPO / "tools" / "build_native.py")
build_native = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build_native)

RUNNER_SOURCE = pathlib.Path(__file__).with_name("golden_runner.c")
HERE = build_native.native_library.this_platform()
ARM64_SYSROOT = pathlib.Path("/usr/aarch64-linux-gnu")  # Debian's libc6-arm64-cross
WINE = shutil.which("wine64") or shutil.which("wine") or "/usr/lib/wine/wine64"
EXPORTS = sorted(
    set(
        re.findall(
            r"\b(ewbik_\w+)\s*\(",
            "".join((REPO / "solver" / "csrc" / name).read_text() for name in ("ewbik.h", "kusudama.h")),
        )
    )
)


def library(platform_name):
    path = build_native.library_path(REPO / "solver", platform_name)
    if not path.is_file():
        pytest.fail(
            f"{path.name} is missing: run `python tools/build_native.py --cross` (make native)", pytrace=False
        )
    return path


def golden_problems():
    """Solves whose every bone turn is unique (pins weigh all three axes), so numpy and C must
    reach the same pose: plain sweeps, a translating root, limits, and Anderson acceleration."""
    cases = []
    for seed, n_bones, n_pins, changes in [
        (101, 6, 2, dict(acceleration=0, iterations=12)),
        (202, 9, 3, dict(acceleration=0, iterations=20, translate_root=True)),
        (303, 7, 2, dict(acceleration=0, iterations=15, exact=False)),
        (404, 8, 2, dict(acceleration=0, iterations=10, limits=True)),
        (505, 10, 3, dict(iterations=3, tolerance=0.0)),
    ]:
        skeleton, pins, rotations, locations, rng = random_problem(seed, n_bones, n_pins)
        pins = [Pin(pin.bone, pin.target, pin.weight, (1.0, 0.5, 1.0), pin.falloff) for pin in pins]
        limits = None
        if changes.pop("limits", False):
            limits = JointLimits(
                {b: random_kusudama(rng, int(rng.integers(0, 4))) for b in range(0, n_bones, 2)}, n_bones
            )
        cases.append(capture(skeleton, pins, rotations, locations, SolverSettings(**changes), limits=limits))
    return cases


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    directory = tmp_path_factory.mktemp("golden")
    cases = golden_problems()
    names = []
    for number, case in enumerate(cases):
        names.append(f"case{number}.bin")
        case.write(directory / names[-1])
    return directory, cases, names


def build_runner(platform_name, directory):
    extra = ["-ldl"] if platform_name.startswith("linux") else []
    output = directory / ("golden_runner.exe" if platform_name.startswith("windows") else "golden_runner")
    command = build_native.compile_command(platform_name, output, [RUNNER_SOURCE], extra)
    result = subprocess.run(command, capture_output=True, text=True, cwd=directory)
    assert result.returncode == 0, result.stdout + result.stderr
    return output


def emulator(platform_name):
    """The command prefix that runs a platform's executable here, or a reason it cannot."""
    if platform_name == HERE:
        return []
    if platform_name == "linux-arm64":
        qemu = shutil.which("qemu-aarch64-static") or shutil.which("qemu-aarch64")
        if qemu is None or not (ARM64_SYSROOT / "lib" / "libc.so.6").is_file():
            return (
                "qemu-user-static and libc6-arm64-cross are not installed (tools/bootstrap.sh installs them)"
            )
        return [qemu, "-L", str(ARM64_SYSROOT)]
    if platform_name == "windows-x64":
        if not os.access(WINE, os.X_OK):
            return "wine64 is not installed (tools/bootstrap.sh installs it)"
        return [WINE]
    return f"{platform_name} cannot run here"


def wine_environment():
    prefix = pathlib.Path(os.environ.get("XDG_CACHE_HOME", pathlib.Path.home() / ".cache")) / "ewbik" / "wine"
    prefix.mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "WINEPREFIX": str(prefix),
        "WINEDEBUG": "-all",
        "WINEDLLOVERRIDES": "mscoree,mshtml=",
        "DISPLAY": "",
    }


@pytest.mark.parametrize("platform_name", ["linux-x64", "linux-arm64", "windows-x64"])
def test_golden_cases_give_this_machines_answers(platform_name, golden):
    if HERE != "linux-x64":
        pytest.skip("the foreign builds are checked from a linux-x64 machine")
    prefix = emulator(platform_name)
    if isinstance(prefix, str):
        print(f"skipping {platform_name}: {prefix}")
        pytest.skip(prefix)
    directory, cases, names = golden
    with tempfile.TemporaryDirectory() as scratch:
        scratch = pathlib.Path(scratch)
        runner = build_runner(platform_name, scratch)
        shutil.copy(library(platform_name), scratch / library(platform_name).name)
        for name in names:
            shutil.copy(directory / name, scratch / name)
        env = wine_environment() if platform_name.startswith("windows") else None
        loaded = (
            library(platform_name).name
            if platform_name.startswith("windows")
            else f"./{library(platform_name).name}"
        )
        result = subprocess.run(
            [*prefix, str(runner), loaded, *names],
            cwd=scratch,
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        for case, name in zip(cases, names):
            abi, problem_size, limits_size, status, got = case.read_result(scratch / f"{name}.out")
            assert (abi, problem_size, limits_size) == (
                native.ABI_VERSION,
                native.ctypes.sizeof(native._Problem),
                native.ctypes.sizeof(NativeLimits),
            )
            assert status == 0
            want = case.expected
            np.testing.assert_allclose(
                canonical(got["rotations"]), canonical(want["rotations"]), rtol=0, atol=1e-6
            )
            np.testing.assert_allclose(got["locations"], want["locations"], rtol=0, atol=1e-6)
            np.testing.assert_allclose(got["position_errors"], want["position_errors"], rtol=0, atol=1e-9)


@pytest.mark.parametrize("platform_name", sorted(build_native.ZIG_TARGETS))
def test_each_library_is_built_for_its_platform_and_exports_the_loop(platform_name):
    found = binaries.describe(library(platform_name).read_bytes())
    system, machine = platform_name.split("-")
    assert (found.system, found.machine) == (system, machine)
    assert set(EXPORTS) <= set(found.exports), f"missing exports: {sorted(set(EXPORTS) - set(found.exports))}"
    if system == "macos":
        assert found.minimum_os <= (11, 0)


@pytest.mark.parametrize("platform_name", ["linux-x64", "linux-arm64"])
def test_linux_libraries_need_no_glibc_newer_than_blenders(platform_name):
    """Blender 4.2+ runs on glibc 2.28; a newer versioned symbol (say exp@GLIBC_2.29) would not load."""
    versions = binaries.glibc_versions(library(platform_name).read_bytes())
    assert versions and max(versions) <= (2, 28), versions
