"""Compile the solver's native loop (solver/csrc/*.c) into a shared library beside it.

The library is plain C with no Python headers, loaded by `solver/native.py` through
ctypes, so one build serves every Python (Blender 4.2's 3.11 and 5.x's 3.13).
Without it the solver runs its numpy loop. Needs a C compiler: $CC, else cc.

    python tools/build_native.py          # build if a source is newer than the library
    python tools/build_native.py --force  # always rebuild
"""

import argparse
import importlib.util
import os
import pathlib
import shlex
import subprocess
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
SOURCE_DIR = REPO_ROOT / "solver" / "csrc"


def _native_library():
    """solver/native_library.py (standard library only), loaded without importing the solver."""
    spec = importlib.util.spec_from_file_location("_ewbik_native_library", REPO_ROOT / "solver" / "native_library.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


library_path = _native_library().library_path


def sources():
    return sorted(SOURCE_DIR.glob("*.c")) + sorted(SOURCE_DIR.glob("*.h"))


def up_to_date(target):
    return target.is_file() and all(src.stat().st_mtime <= target.stat().st_mtime for src in sources())


def build(force=False):
    """Compile and return the library's path; raises RuntimeError with the compiler's output.

    A failed build removes the old library: one older than its sources may not match them.
    """
    target = library_path(REPO_ROOT / "solver")
    if not force and up_to_date(target):
        return target
    try:
        return _compile(target)
    except RuntimeError:
        target.unlink(missing_ok=True)
        raise


def _compile(target):
    compiler = shlex.split(os.environ.get("CC", "cc"))
    c_files = [str(src) for src in sources() if src.suffix == ".c"]
    tmp = target.with_name(target.name + ".tmp")
    command = [*compiler, "-O2", "-std=c99", "-fPIC", "-shared", "-Wall", "-Wextra", "-o", str(tmp), *c_files, "-lm"]
    try:
        result = subprocess.run(command, capture_output=True, text=True)
    except FileNotFoundError:
        raise RuntimeError(f"no C compiler '{compiler[0]}' (set CC or install one)") from None
    if result.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"{' '.join(command)}\n{result.stdout}{result.stderr}")
    if result.stderr.strip():
        print(result.stderr, file=sys.stderr)
    os.replace(tmp, target)
    return target


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild even when up to date")
    args = parser.parse_args(argv)
    try:
        print(build(args.force))
    except RuntimeError as error:
        print(f"build_native: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
