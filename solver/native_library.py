"""Where the compiled native loop lives and how it is loaded (standard library only).

The extension carries one library per Blender platform, `_ewbik_native-<platform>.<ext>`,
and loads the one for the machine it runs on. The build tool imports this module without
numpy, so it holds only the naming rules and the ctypes loading; `native.py` holds the
marshalling and the checks of the library's ABI version, structure sizes and field offsets.
"""

import ctypes
import os
import pathlib
import platform

# Blender's platform names (as its extension manifests spell them) and each one's library suffix.
PLATFORMS = {
    "windows-x64": ".dll",
    "windows-arm64": ".dll",
    "macos-x64": ".dylib",
    "macos-arm64": ".dylib",
    "linux-x64": ".so",
    "linux-arm64": ".so",
}
_SYSTEMS = {"windows": "windows", "darwin": "macos", "linux": "linux"}
_MACHINES = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}
# A library to load instead of the packaged one (the sanitizer build of `make test`).
OVERRIDE_VARIABLE = "EWBIK_NATIVE_LIBRARY"


def this_platform(system: str | None = None, machine: str | None = None) -> str | None:
    """Blender's name of the running platform (`platform.system()`/`machine()` by default),
    or None where no library is built (the numpy loop runs there)."""
    system = _SYSTEMS.get((system or platform.system()).lower())
    machine = _MACHINES.get((machine or platform.machine()).lower())
    name = f"{system}-{machine}"
    return name if name in PLATFORMS else None


def library_path(
    package_dir: str | os.PathLike[str] = pathlib.Path(__file__).resolve().parent,
    platform_name: str | None = None,
) -> pathlib.Path | None:
    """The shared library's path inside the solver package, for the given platform
    (default: this one); None for a platform without a library."""
    platform_name = platform_name or this_platform()
    if platform_name is None:
        return None
    return pathlib.Path(package_dir) / f"_ewbik_native-{platform_name}{PLATFORMS[platform_name]}"


def load_library() -> ctypes.CDLL | None:
    """The loaded library, or None when it was not built for this machine (numpy loop then)."""
    path = os.environ.get(OVERRIDE_VARIABLE) or library_path()
    if path is None or not pathlib.Path(path).is_file():
        return None
    try:
        return ctypes.CDLL(str(path))
    except OSError:
        return None
