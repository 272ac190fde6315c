"""Where the compiled native loop lives and how it is loaded (standard library only).

The build tool imports this module without numpy, so it holds only the file name
rule and the ctypes loading; `native.py` holds the marshalling.
"""

import ctypes
import pathlib
import sys

_SUFFIX = {"win32": ".dll", "darwin": ".dylib"}.get(sys.platform, ".so")


def library_path(package_dir=pathlib.Path(__file__).resolve().parent):
    """The shared library's path inside the solver package."""
    return pathlib.Path(package_dir) / f"_ewbik_native{_SUFFIX}"


def load_library():
    """The loaded library, or None when it was not built for this machine (numpy loop then)."""
    path = library_path()
    if not path.is_file():
        return None
    try:
        return ctypes.CDLL(str(path))
    except OSError:
        return None
