"""`blender -b -c ewbik bake FILE.blend...`: bake files from the command line, for render farms and
scripts that bake many shots without opening Blender's window.

Each file is opened and every armature with pins (or each one named) is baked, with the file's own
settings, by the same `CrowdBake` the `ewbik.bake` operator runs; then the file is saved in place or
into an output folder. A file is written whole or not at all: saved under a temporary name in the
folder it goes to, then renamed over its destination. A file that fails is left as it was on disk
and the others still bake. Exit status: 0 when every file baked, 1 when any failed, 2 on bad
arguments.

The flags that set bake options are made from the table the Bake operator's properties come from
(`option_fields`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import os
import pathlib
import re
import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn

import bpy
import numpy as np

from ...solver import EwbikError
from ..com.armature_checks import RigError
from ..com.pose_channels import scene_range
from ..com.stored_settings import pinned_bones
from .bake_engine import BakeOptions, CrowdBake
from .fcurve_keys import read_keys
from .option_fields import OPTION_FIELDS, OptionField

COMMAND = "ewbik"


class ParserExit(Exception):
    """The parser has finished the command (help shown, or the arguments refused): the exit status
    to return. Blender calls the command's callback and needs a status back, never SystemExit."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class CommandParser(argparse.ArgumentParser):
    """argparse that ends by raising `ParserExit` instead of leaving the process; `error` (usage,
    then one line saying what is wrong, status 2) and `--help` (status 0) both end through `exit`."""

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            sys.stderr.write(message)
        raise ParserExit(status)


def frames_argument(text: str) -> tuple[int, int]:
    """`--frames START-END` (`--frames=-10-20` when the start is negative)."""
    match = re.fullmatch(r"(-?\d+)-(-?\d+)", text)
    if match is None:
        raise argparse.ArgumentTypeError(f"'{text}' is not START-END, e.g. 1-250")
    start, end = int(match[1]), int(match[2])
    if start > end:
        raise argparse.ArgumentTypeError(f"start frame {start} is after end frame {end}")
    return start, end


def bounded_number(field: OptionField) -> Callable[[str], float]:
    """The parser of a numeric option's flag: a number (a whole one for whole fields) not below
    the field's minimum."""
    whole = isinstance(field.default, int)
    kind = "a whole number" if whole else "a number"

    def parse(text: str) -> float:
        try:
            value = int(text) if whole else float(text)
        except ValueError:
            value = None
        if value is None or not value >= field.minimum:  # NaN fails too
            raise argparse.ArgumentTypeError(f"'{text}' is not {kind} of {field.minimum:g} or more")
        return value

    return parse


def add_option_flags(parser: argparse.ArgumentParser) -> None:
    """A flag for each bake option that has one (`option_fields`), setting the `BakeOptions` field
    of its name; a flag left out keeps the field's default."""
    for field in OPTION_FIELDS:
        if field.flag is None:
            continue
        if isinstance(field.default, bool):
            kind: dict[str, Any] = {"action": "store_true"}
        else:
            kind = {"type": bounded_number(field), "metavar": field.metavar}
        parser.add_argument(
            field.flag, dest=field.name, default=argparse.SUPPRESS, help=field.description, **kind
        )


def command_parser() -> CommandParser:
    parser = CommandParser(prog=f"blender -b -c {COMMAND}", description="EWBIK from the command line.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    bake = commands.add_parser(
        "bake",
        help="bake the pinned armatures of .blend files into keys",
        description=(
            "Open each file, bake every armature with pinned bones (or each --armature) over the "
            "scene's frame range with the file's own settings, as Bake IK to Keyframes does, and "
            "save the file in place (or into --output-dir)."
        ),
    )
    bake.set_defaults(parser=bake)  # refuses what only the whole command line shows (`destinations`)
    bake.add_argument("files", nargs="+", type=pathlib.Path, metavar="FILE.blend")
    bake.add_argument(
        "--armature",
        action="append",
        dest="armatures",
        metavar="NAME",
        help="bake only this armature (repeat for several); default: every armature with pins",
    )
    bake.add_argument(
        "--frames", type=frames_argument, metavar="START-END", help="default: the scene's frame range"
    )
    bake.add_argument("--output-dir", type=pathlib.Path, metavar="DIR", help="save the baked files here")
    add_option_flags(bake)
    return parser


def cli_command(argv: list[str]) -> int:
    """`blender -b -c ewbik ARGS`: Blender calls it with ARGS and exits with what it returns."""
    try:
        arguments = command_parser().parse_args(argv)
        targets = destinations(arguments.parser, arguments.files, arguments.output_dir)
    except ParserExit as done:
        return done.status
    failed = False
    for path, target in zip(arguments.files, targets):
        try:
            print(f"{path}: {bake_file(path, target, arguments)}", flush=True)
        except EwbikError as error:
            print(f"{path}: not baked: {error}", file=sys.stderr, flush=True)
            failed = True
    return 1 if failed else 0


def destinations(
    parser: CommandParser, files: list[pathlib.Path], output_dir: pathlib.Path | None
) -> list[pathlib.Path]:
    """Where each file is saved: in place, or into `output_dir` under its own name, the folder made
    when missing (a farm's tasks share one that none of them made); refused, like any bad argument,
    when it is a file or two files would land on one name."""
    if output_dir is None:
        return list(files)
    if output_dir.exists() and not output_dir.is_dir():
        parser.error(f"--output-dir: '{output_dir}' is not a folder")
    names = [path.name for path in files]
    clashing = sorted({name for name in names if names.count(name) > 1})
    if clashing:
        parser.error(f"--output-dir: more than one file is named {', '.join(clashing)}")
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        parser.error(f"--output-dir: '{output_dir}' cannot be made ({error.strerror})")
    return [output_dir / name for name in names]


def bake_file(path: pathlib.Path, target: pathlib.Path, arguments: argparse.Namespace) -> str:
    """Open `path`, bake it, save it as `target`; the line that says what was done.
    EwbikError when it cannot be opened, baked or saved (then `target` is left as it was)."""
    started = time.perf_counter()
    open_file(path)
    context = bpy.context
    bake = CrowdBake(
        context,
        armatures_named(context.view_layer, arguments.armatures),
        bake_options(arguments, context.scene),
    )
    bake.solve_all()
    summary = bake.finish()
    save_whole(target)
    first = summary.summaries[0]
    armatures = len(summary.summaries)
    return (
        f"baked {first.frames} frames ({first.frame_start}-{first.frame_end}) of {armatures} "
        f"armature{'s' * (armatures > 1)}, {keys_written(bake)} keys written"
        + (f", saved as {target}" if target != path else "")
        + f", {time.perf_counter() - started:.1f} s"
    )


def bake_options(arguments: argparse.Namespace, scene: bpy.types.Scene) -> BakeOptions:
    """The options given, over `BakeOptions`' defaults, for the given frames or the scene's range."""
    frame_start, frame_end = arguments.frames or scene_range(scene)
    given = {
        field.name: getattr(arguments, field.name)
        for field in dataclasses.fields(BakeOptions)
        if hasattr(arguments, field.name)
    }
    return BakeOptions(frame_start=frame_start, frame_end=frame_end, **given)


def armatures_named(view_layer: bpy.types.ViewLayer, names: list[str] | None) -> list[bpy.types.Object]:
    """The armatures `names` names, or (without names) every armature with a pinned bone, of the
    view layer, in the order of their names."""
    objects = view_layer.objects
    if names is None:
        found = [obj for obj in objects if obj.type == "ARMATURE" and pinned_bones(obj)]
        if not found:
            reason = "has no armature with pinned bones"
            raise RigError("pins", reason, f"View layer '{view_layer.name}' {reason}; nothing to bake")
        return sorted(found, key=lambda obj: obj.name)
    for name in names:
        if name not in objects:
            raise RigError.about(name, "armature", f"is not in view layer '{view_layer.name}'")
        if objects[name].type != "ARMATURE":
            raise RigError.about(name, "armature", "is not an armature")
    return [objects[name] for name in sorted(set(names))]


def open_file(path: pathlib.Path) -> None:
    try:
        with without_reports():
            bpy.ops.wm.open_mainfile(filepath=str(path))
    except RuntimeError as error:
        reason = f"cannot be opened: {blender_message(error)}"
        raise RigError("file", reason, reason) from None


def save_whole(target: pathlib.Path) -> None:
    """Save the open file as `target`: written whole under a temporary name in `target`'s folder
    (relative paths are remapped for that folder), then renamed over `target` in one step, so no
    reader, crash or failed write ever leaves a half-written file there."""
    temporary = target.with_name(f".{target.stem}.ewbik-bake-{os.getpid()}.blend")
    try:
        with without_reports():
            bpy.ops.wm.save_as_mainfile(filepath=str(temporary), copy=True)
        os.replace(temporary, target)
    except (RuntimeError, OSError) as error:
        temporary.unlink(missing_ok=True)
        reason = blender_message(error) if isinstance(error, RuntimeError) else str(error)
        raise RigError(
            "file", f"cannot be saved: {reason}", f"cannot be saved as {target}: {reason}"
        ) from None


def without_reports() -> contextlib.AbstractContextManager:
    """Operators called from Python in the background print their reports ("Info: Saved copy as
    ..."); the command says what happened to each file in one line of its own (an error still
    arrives as the operator's RuntimeError)."""
    return contextlib.redirect_stdout(io.StringIO())


def blender_message(error: RuntimeError) -> str:
    """What an operator's RuntimeError says, without Blender's "Error: " and trailing newline."""
    return str(error).strip().removeprefix("Error: ")


def keys_written(bake: CrowdBake) -> int:
    """The keys on baked frames of every F-curve the bake wrote: the ones it wrote, as it replaces
    any key on a frame it bakes."""
    total = 0
    for pose_bake in bake.bakes:
        for fcurve in pose_bake.writer.snapshots:
            frames = read_keys(fcurve.keyframe_points)["co"][:, 0]
            total += int(np.isin(frames, pose_bake.frames).sum())
    return total


_handle = None  # what register_cli_command returned, to unregister


def register() -> None:
    global _handle
    _handle = bpy.utils.register_cli_command(COMMAND, cli_command)


def unregister() -> None:
    global _handle
    if _handle is not None:
        bpy.utils.unregister_cli_command(_handle)
        _handle = None
