"""Command line: `python -m solver solve SCENE.json [-o POSE.json]`.

Prints the pose document (or writes it with -o) and a one-line summary per pin
on stderr. Any bad input (unreadable file, malformed JSON however deep, a file
over MAX_INPUT_BYTES, a scene the parser refuses, an output that cannot be
written) prints one line naming the file and the problem, and exits with status 2.
The output file is replaced whole or not at all, so concurrent runs or a failed
write never leave a torn document.
"""

import argparse
import json
import os
import stat
import sys
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import EwbikError
from .scene import solve_scene

# Far above any rig's document (~1 KiB a bone), far below the memory parsing it takes.
MAX_INPUT_BYTES = 256 << 20


class _InputError(EwbikError):
    """A problem with a file to report in one line (exit status 2); `field` is the file's path."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m solver", description="EWBIK solver")
    commands = parser.add_subparsers(dest="command", required=True)
    solve_cmd = commands.add_parser("solve", help="solve a scene document")
    solve_cmd.add_argument("scene", help="scene document (JSON)")
    solve_cmd.add_argument("-o", "--output", help="write the pose document here instead of stdout")
    args = parser.parse_args(argv)
    try:
        pose = _solve(args.scene, _read(args.scene))
        _write(args.output, json.dumps(pose, indent=1, allow_nan=False) + "\n")
        _summarize(args.scene, pose)
    except _InputError as error:
        _report(f"error: {error}")
        return 2
    return 0


def _read(path: str) -> Any:
    """The scene file's JSON; every way it can fail becomes an _InputError naming the file."""
    try:
        with open(path, "rb") as stream:
            data = stream.read(MAX_INPUT_BYTES + 1)
    except OSError as error:
        raise _InputError(path, _reason(error)) from None
    if len(data) > MAX_INPUT_BYTES:
        raise _InputError(path, f"larger than {MAX_INPUT_BYTES >> 20} MiB, the most a scene document may be")
    try:
        return json.loads(data.decode("utf-8"))
    except RecursionError:
        raise _InputError(path, "the JSON is nested too deeply") from None
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError, over-long integers
        raise _InputError(path, _reason(error)) from None


def _solve(path: str, document: Any) -> dict[str, Any]:
    try:
        return solve_scene(document)
    except (
        ValueError
    ) as error:  # an EwbikError, or a value the checks let through: one line, never a traceback
        raise _InputError(path, _reason(error)) from None


def _write(path: str | None, text: str) -> None:
    try:
        if path:
            _write_file(path, text)
        else:
            sys.stdout.write(text)
            sys.stdout.flush()
    except OSError as error:
        if not path:
            _discard_stdout()
        raise _InputError(path or "standard output", _reason(error)) from None


def _write_file(path: str, text: str) -> None:
    """Write through a temporary file in the same directory, renamed over `path` once complete; a
    device or pipe (`/dev/stdout`, `/dev/full`) is written directly, never replaced."""
    try:
        special = not stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        special = False
    if special:
        with open(path, "w", encoding="utf-8") as stream:
            stream.write(text)
        return
    directory, name = os.path.split(os.path.abspath(path))
    descriptor, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            stream.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)  # as open() would have made it, not mkstemp's 0600
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def _discard_stdout() -> None:
    """Point the standard output at the null device, so the exit does not retry the failed write."""
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), sys.stdout.fileno())


def _summarize(scene_path: str, pose: Mapping[str, Any]) -> None:
    stats = pose["stats"]
    outcome = "converged" if stats["converged"] else "not converged"
    lines = [f"{scene_path}: {stats['iterations']} iterations, {outcome}, {stats['ms']:.2f} ms"]
    lines += [
        f"  {bone}: {err['position_error']:.6f} position, {err['orientation_error_deg']:.4f} deg"
        for bone, err in stats["pins"].items()
    ]
    _report("\n".join(lines))


def _reason(error: Exception) -> str:
    text = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
    return " ".join(text.split())


def _report(text: str) -> None:
    """Write to stderr; a stderr that cannot be written (closed, a full disk) is not worth a traceback."""
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
