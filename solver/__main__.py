"""Command line: `python -m solver solve SCENE.json [-o POSE.json]`.

Prints the pose document (or writes it with -o) and a one-line summary per pin
on stderr. Any bad input (unreadable file, malformed JSON however deep or large,
a scene the parser refuses, an output that cannot be written) prints one line
naming the file and the problem, and exits with status 2.
"""

import argparse
import json
import os
import sys

from .scene import solve_scene


class _InputError(Exception):
    """A problem to report in one line (exit status 2)."""


def main(argv=None):
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


def _read(path):
    """The scene file's JSON; every way it can fail becomes an _InputError naming the file."""
    try:
        with open(path, encoding="utf-8") as stream:
            return json.load(stream)
    except RecursionError:
        raise _InputError(f"{path}: the JSON is nested too deeply") from None
    except (OSError, ValueError) as error:  # JSONDecodeError, UnicodeDecodeError, over-long integers
        raise _InputError(f"{path}: {_reason(error)}") from None


def _solve(path, document):
    try:
        return solve_scene(document)
    except ValueError as error:  # SceneError, with the path of the offending field
        raise _InputError(f"{path}: {_reason(error)}") from None


def _write(path, text):
    try:
        if path:
            with open(path, "w", encoding="utf-8") as stream:
                stream.write(text)
        else:
            sys.stdout.write(text)
            sys.stdout.flush()
    except OSError as error:
        if not path:
            _discard_stdout()
        raise _InputError(f"{path or 'standard output'}: {_reason(error)}") from None


def _discard_stdout():
    """Point the standard output at the null device, so the exit does not retry the failed write."""
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), sys.stdout.fileno())


def _summarize(scene_path, pose):
    stats = pose["stats"]
    outcome = "converged" if stats["converged"] else "not converged"
    lines = [f"{scene_path}: {stats['iterations']} iterations, {outcome}, {stats['ms']:.2f} ms"]
    lines += [
        f"  {bone}: {err['position_error']:.6f} position, {err['orientation_error_deg']:.4f} deg"
        for bone, err in stats["pins"].items()
    ]
    _report("\n".join(lines))


def _reason(error):
    text = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
    return " ".join(text.split())


def _report(text):
    """Write to stderr; a stderr that cannot be written (closed, a full disk) is not worth a traceback."""
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
