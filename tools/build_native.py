"""Compile the solver's native loop (solver/csrc/*.c) into a shared library per Blender platform.

The library is plain C with no Python headers, loaded by `solver/native.py` through
ctypes, so one build serves every Python (Blender 4.2's 3.11 and 5.x's 3.13). Each lands
beside the solver as `_ewbik_native-<platform>.<ext>` (solver/native_library.py names them);
the extension zip carries all of them and loads the one for the machine it runs on.

This machine's library is built by the system compiler ($CC, else cc); the other platforms'
by `zig cc` from the `ziglang` package (pinned in constraints.txt), as cross compilers.
Everywhere `-ffp-contract=off`: no fused multiply-adds, so every build rounds as the others (and
`-O3` vectorizes without reordering any sum: C leaves floating-point arithmetic as written).

    python tools/build_native.py           # this machine's library, if a source is newer
    python tools/build_native.py --cross   # also every other platform's (needs ziglang)
    python tools/build_native.py --force   # rebuild even when up to date
    python tools/build_native.py --sanitized PATH   # an ASan+UBSan build of this machine's, for tests
"""

import argparse
import importlib.util
import os
import pathlib
import shlex
import subprocess
import sys
import tempfile

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
SOURCE_DIR = REPO_ROOT / "solver" / "csrc"
FLAGS = ["-O3", "-std=c99", "-ffp-contract=off", "-Wall", "-Wextra"]
# Zig's target for each Blender platform: the oldest OS each supported Blender runs on
# (glibc 2.28, macOS 11), so the library loads wherever that Blender does.
ZIG_TARGETS = {
    "windows-x64": "x86_64-windows-gnu",
    "windows-arm64": "aarch64-windows-gnu",
    "macos-x64": "x86_64-macos.11.0",
    "macos-arm64": "aarch64-macos.11.0",
    "linux-x64": "x86_64-linux-gnu.2.28",
    "linux-arm64": "aarch64-linux-gnu.2.28",
}


def _native_library():
    """solver/native_library.py (standard library only), loaded without importing the solver."""
    spec = importlib.util.spec_from_file_location(
        "_ewbik_native_library", REPO_ROOT / "solver" / "native_library.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


native_library = _native_library()


def library_path(package_dir, platform_name=None):
    return native_library.library_path(package_dir, platform_name)


def sources():
    return sorted(SOURCE_DIR.glob("*.c")) + sorted(SOURCE_DIR.glob("*.h"))


def up_to_date(target):
    return target.is_file() and all(src.stat().st_mtime <= target.stat().st_mtime for src in sources())


def zig_compiler():
    """The command line of `zig cc` from the ziglang package; RuntimeError when it is missing."""
    if importlib.util.find_spec("ziglang") is None:
        raise RuntimeError("no zig (pip install ziglang, see constraints.txt) to cross-compile with")
    return [sys.executable, "-m", "ziglang", "cc"]


def compile_command(platform_name, output, c_files, extra=()):
    """The compiler call that builds `output` for a platform: the system compiler for this
    machine, zig for the others. `extra` adds flags (a sanitizer build, an executable)."""
    if platform_name == native_library.this_platform():
        compiler = shlex.split(os.environ.get("CC", "cc"))
    else:
        compiler = [*zig_compiler(), "-target", ZIG_TARGETS[platform_name], "-s"]
    return [*compiler, *FLAGS, *extra, "-o", str(output), *map(str, c_files), "-lm"]


def build(force=False, platform_name=None):
    """Compile one platform's library (default: this machine's) and return its path; raises
    RuntimeError with the compiler's output.

    A failed build removes the old library: one older than its sources may not match them.
    """
    platform_name = platform_name or native_library.this_platform()
    if platform_name is None:
        raise RuntimeError("no library is built for this platform (the solver runs its numpy loop)")
    target = library_path(REPO_ROOT / "solver", platform_name)
    if not force and up_to_date(target):
        return target
    try:
        return _compile(platform_name, target)
    except RuntimeError:
        target.unlink(missing_ok=True)
        raise


def platforms():
    """Every platform with a library, this machine's first (it needs no cross compiler)."""
    here = native_library.this_platform()
    return sorted(native_library.PLATFORMS, key=lambda name: name != here)


def build_sanitized(target):
    """This machine's library with AddressSanitizer and UndefinedBehaviorSanitizer, at `target`
    (load it with libasan preloaded: see tools/run_tests.sh)."""
    target = pathlib.Path(target).resolve()
    command = compile_command(
        native_library.this_platform(),
        target,
        [s for s in sources() if s.suffix == ".c"],
        [
            "-shared",
            "-fPIC",
            "-O1",
            "-g",
            "-fno-omit-frame-pointer",
            "-fsanitize=address,undefined",
            "-fno-sanitize-recover=undefined",
        ],
    )
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}\n{result.stdout}{result.stderr}")
    return target


def _compile(platform_name, target):
    c_files = [src for src in sources() if src.suffix == ".c"]
    # Zig also writes an import library and debug database beside a DLL: build in a scratch dir.
    with tempfile.TemporaryDirectory() as scratch:
        output = pathlib.Path(scratch) / target.name
        command = compile_command(platform_name, output, c_files, ["-shared", "-fPIC"])
        try:
            result = subprocess.run(command, capture_output=True, text=True, cwd=scratch)
        except FileNotFoundError:
            raise RuntimeError(f"no C compiler '{command[0]}' (set CC or install one)") from None
        if result.returncode != 0 or not output.is_file():
            raise RuntimeError(f"{' '.join(command)}\n{result.stdout}{result.stderr}")
        if result.stderr.strip():
            print(result.stderr, file=sys.stderr)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_bytes(output.read_bytes())
        tmp.chmod(0o755)
        os.replace(tmp, target)
    return target


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild even when up to date")
    parser.add_argument("--cross", action="store_true", help="also build every other platform's library")
    parser.add_argument("--sanitized", metavar="PATH", help="instead build an ASan+UBSan library at PATH")
    args = parser.parse_args(argv)
    try:
        if args.sanitized:
            paths = [build_sanitized(args.sanitized)]
        else:
            paths = [build(args.force, name) for name in (platforms() if args.cross else platforms()[:1])]
        for path in paths:
            print(path)
    except RuntimeError as error:
        print(f"build_native: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
