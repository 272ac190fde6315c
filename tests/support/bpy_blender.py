"""A stand-in for the `blender` executable made of the bpy module, so farm jobs run in tests as on a
Worker: `python bpy_blender.py -b -c ewbik bake FILE.blend...` installs the extension as the Blender
tests do (the zip tools/build_extension.py builds, or the one EWBIK_EXTENSION_ZIP names, into the
`user_default` repository of a throw-away user resources folder), then runs the command the
extension registered under that id with the arguments after it, as Blender's `-c` does, and exits
with its status."""

import os
import pathlib
import shutil
import sys
import tempfile

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
BLENDER_OPTIONS = {"-b", "--background", "-y", "--enable-autoexec"}
COMMAND_OPTIONS = {"-c", "--command"}
USAGE = "usage: bpy_blender.py [-b] [-y] -c COMMAND [ARGUMENTS...]"


def command_and_arguments(argv):
    """(command id, its arguments) of a command line `[-b] [-y] -c ID ARGS...`; None for any other."""
    position = 0
    while position < len(argv) and argv[position] in BLENDER_OPTIONS:
        position += 1
    if position + 1 >= len(argv) or argv[position] not in COMMAND_OPTIONS:
        return None
    return argv[position + 1], argv[position + 2 :]


def install_extension(extension_zip=None):
    """Point Blender at a new user resources folder, then install and enable the extension there
    from `extension_zip` (built for this machine when None). Returns the command-line commands the
    extension registered, {id: callback}, and the folder (the caller removes it)."""
    user_resources = tempfile.mkdtemp(prefix="ewbik-blender-user-")
    os.environ["BLENDER_USER_RESOURCES"] = user_resources
    sys.path.insert(0, str(REPO_ROOT))
    import bpy

    from tests.support.blender_helpers import extension_enabled, load_build_tool

    commands = {}
    register = bpy.utils.register_cli_command

    def recording_register(command_id, execute):
        commands[command_id] = execute
        return register(command_id, execute)

    bpy.utils.register_cli_command = recording_register
    if extension_zip is None:
        extension_zip = load_build_tool().build(pathlib.Path(user_resources) / "dist", only_here=True)
    result = bpy.ops.extensions.package_install_files(
        filepath=str(extension_zip), repo="user_default", enable_on_install=True
    )
    assert result == {"FINISHED"} and extension_enabled(), f"the extension did not install: {result}"
    return commands, user_resources


def main(argv):
    parsed = command_and_arguments(argv)
    if parsed is None:
        print(USAGE, file=sys.stderr)
        return 2
    command_id, arguments = parsed
    commands, user_resources = install_extension(os.environ.get("EWBIK_EXTENSION_ZIP"))
    try:
        if command_id not in commands:
            print(f"bpy_blender.py: no command '{command_id}' registered", file=sys.stderr)
            return 1
        return commands[command_id](arguments)
    finally:
        shutil.rmtree(user_resources, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
