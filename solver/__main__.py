"""Command line: `python -m solver solve SCENE.json [-o POSE.json]`.

Prints the pose document (or writes it with -o) and a one-line summary per pin
on stderr. A malformed scene prints the problem and exits with status 2.
"""

import argparse
import json
import sys

from .scene import solve_scene


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m solver", description="EWBIK solver")
    commands = parser.add_subparsers(dest="command", required=True)
    solve_cmd = commands.add_parser("solve", help="solve a scene document")
    solve_cmd.add_argument("scene", help="scene document (JSON)")
    solve_cmd.add_argument("-o", "--output", help="write the pose document here instead of stdout")
    args = parser.parse_args(argv)

    try:
        with open(args.scene, encoding="utf-8") as f:
            doc = json.load(f)
        pose = solve_scene(doc)
    except (OSError, json.JSONDecodeError, ValueError) as exc:
        print(f"error: {args.scene}: {exc}", file=sys.stderr)
        return 2

    text = json.dumps(pose, indent=1)
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(text + "\n")
        except OSError as exc:
            print(f"error: {args.output}: {exc}", file=sys.stderr)
            return 2
    else:
        print(text)
    stats = pose["stats"]
    print(
        f"{args.scene}: {stats['iterations']} iterations, "
        f"{'converged' if stats['converged'] else 'not converged'}, {stats['ms']:.2f} ms",
        file=sys.stderr,
    )
    for bone, err in stats["pins"].items():
        print(
            f"  {bone}: {err['position_error']:.6f} position, {err['orientation_error_deg']:.4f} deg",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
