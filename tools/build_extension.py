"""Validate the manifest and build the installable extension zip.

Uses Blender's own extension CLI (`blender_ext.py`), which ships inside the `bpy`
wheel and needs only the standard library, so the zip is exactly what
`blender --command extension build` would produce: same validation, same
`[build] paths_exclude_pattern` handling from blender_manifest.toml. Run it with
the Python of a bpy venv:

    python tools/build_extension.py --validate-only
    python tools/build_extension.py --output-dir dist

The solver's native loop is compiled first (tools/build_native.py) for every Blender
platform, so the zip carries one library per platform and loads the one it runs on.
A library that cannot be built (no C compiler, or no zig for the other platforms) is left
out with a warning: there the add-on runs the numpy loop.
Exit status is the CLI's (non-zero when validation or the build fails).
"""

import argparse
import importlib.util
import pathlib
import subprocess
import sys
import tomllib

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import build_native  # noqa: E402

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent


class ToolNotFound(RuntimeError):
    """The bpy wheel with the extension CLI is not installed in this Python."""


def blender_tools():
    """Paths of the extension CLI and the tag list inside the installed bpy wheel.

    Found without importing bpy (importing it is slow and starts Blender).
    """
    spec = importlib.util.find_spec("bpy")
    if spec is None or spec.origin is None:
        raise ToolNotFound("bpy is not installed in this Python; run `make venvs` and use a venv's python")
    package_dir = pathlib.Path(spec.origin).parent
    for version_dir in sorted(package_dir.glob("[0-9]*.[0-9]*"), reverse=True):
        cli = version_dir / "scripts" / "addons_core" / "bl_pkg" / "cli" / "blender_ext.py"
        tags = version_dir / "scripts" / "modules" / "_bpy_internal" / "extensions" / "tags.py"
        if cli.is_file() and tags.is_file():
            return cli, tags
    raise ToolNotFound(f"no extension CLI (blender_ext.py) found under {package_dir}")


def manifest(source_dir=REPO_ROOT):
    """The parsed blender_manifest.toml."""
    with open(pathlib.Path(source_dir) / "blender_manifest.toml", "rb") as fh:
        return tomllib.load(fh)


def zip_name(source_dir=REPO_ROOT):
    """`{id}-{version}.zip`, the CLI's default file name."""
    data = manifest(source_dir)
    return f"{data['id']}-{data['version']}.zip"


def _run_cli(*args):
    cli, tags = blender_tools()
    command = [sys.executable, str(cli), *args, f"--valid-tags={tags}"]
    return subprocess.run(command, capture_output=True, text=True)


def validate(source_dir=REPO_ROOT):
    """Validate the manifest; raise RuntimeError with the CLI's message when it is invalid."""
    result = _run_cli("validate", str(source_dir))
    if result.returncode != 0:
        raise RuntimeError((result.stdout + result.stderr).strip())
    return (result.stdout + result.stderr).strip()


def build(output_dir, source_dir=REPO_ROOT, only_here=False):
    """Build the zip into output_dir (created if missing) and return its path.

    `only_here` compiles only this machine's library (the zip carries the others already built):
    a first `make demo` must not wait for the cross-builds a release zip needs."""
    output_dir = pathlib.Path(output_dir).resolve()
    output_dir.mkdir(parents=True, exist_ok=True)
    validate(source_dir)
    if pathlib.Path(source_dir).resolve() == REPO_ROOT:
        for platform_name in build_native.platforms()[:1] if only_here else build_native.platforms():
            try:
                build_native.build(platform_name=platform_name)
            except RuntimeError as error:
                print(
                    f"build_extension: no compiled solver loop for {platform_name} in this zip (the add-on "
                    f"will solve in numpy there): {error}",
                    file=sys.stderr,
                )
    target = output_dir / zip_name(source_dir)
    target.unlink(missing_ok=True)
    result = _run_cli("build", "--source-dir", str(source_dir), "--output-filepath", str(target))
    if result.returncode != 0 or not target.is_file():
        raise RuntimeError((result.stdout + result.stderr).strip() or f"build produced no {target}")
    return target


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--source-dir", default=str(REPO_ROOT), help="extension root (default: the repository)"
    )
    parser.add_argument(
        "--output-dir", default=str(REPO_ROOT / "dist"), help="where the zip goes (default: dist/)"
    )
    parser.add_argument("--validate-only", action="store_true", help="check the manifest, build nothing")
    args = parser.parse_args(argv)
    try:
        if args.validate_only:
            print(validate(args.source_dir) or "manifest is valid")
        else:
            print(build(args.output_dir, args.source_dir))
    except (ToolNotFound, RuntimeError, OSError, tomllib.TOMLDecodeError) as error:
        print(f"build_extension: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
