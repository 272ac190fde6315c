"""Farm benchmark: a folder of shots baked by the local job runner with two workers vs one.

`--shots` shots (20) are made by tests/support/farm_shots.py with `--walk`: the Rigify human
metarig (159 bones) with hands, feet and head pinned by `ewbik.pin` at the extension's default
settings (humanoid limits, Move Root, Stand on Pin) and their targets keyed on a walk-like loop over
`--frames` frames (100), every shot the same. The template farm/openjd/ewbik-bake.yaml makes one
task per shot, each task one `blender -b -c ewbik bake SHOT --output-dir DIR`. Blender is played by
tests/support/bpy_blender.py: the bpy module (Blender 5.2 from PyPI) started by this Python, which
installs the extension from its zip into a throw-away user folder on every start, then runs the
command. Its start-up is not a real `blender` binary's: it imports bpy into a Python, and a Worker's
Blender would have the extension installed once, not per task.

Timed, `--rounds` times each, in turn (the median and range are reported):

- one worker: one `openjd run` over every task, one after another;
- two workers: two `openjd run` processes started together, each over half of the shots (the
  machine's cores are named in the header line: two workers on two cores share them with the
  runners and anything else running);
- the runner alone: one `openjd run` over every task with `true` as Blender (its start, each task's
  session and the task's bash script).
- pure Python: one process doing two equal pieces of work against two processes doing one each,
  started together: what a second process of anything gains on the machine during the round
  (what other work leaves of the second core).

Then, apart from the bake itself, what each task pays: the stand-in's start, extension install and
exit (`blender -b -c ewbik bake --help`, timed whole), the same for a Python that only imports bpy,
and, in one process that installed the extension, the command's own file load, bake and save per
shot (the command's `open_file`, `bake_file` and `save_whole` timed; the bake is `bake_file` less
the two). The command's per-file line (open + bake + save, to 0.1 s) from the one-worker run is
shown beside them.

Usage: `python bench/bench_farm.py [--shots 20] [--frames 100] [--rounds 3] [--no-write]`, with the
bpy-5.2 venv's Python (bpy and openjd-cli). Results go to stdout and into docs/BENCHMARKS.md between
the farm markers.
"""

import argparse
import json
import os
import pathlib
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BENCH_DIR = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR.parent))
sys.path.insert(0, str(BENCH_DIR))
import bench_solver as bs  # noqa: E402

from tests.support.farm_runs import (  # noqa: E402
    build_extension_zip,
    launcher_executable,
    make_shots,
    openjd_run_command,
)

FARM_BEGIN = "<!-- bench:farm -->"
FARM_END = "<!-- /bench:farm -->"
BAKED_LINE = re.compile(r"\.blend: baked .*, (\d+\.\d+) s\s*$", re.MULTILINE)
PURE_PYTHON = "sum(range(150_000_000))"  # about 1.5 s of one core
SPEED_UP_OVER = {"two workers": "one worker", "Python, two at once": "Python, one after another"}


def children_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_runs(commands, env):
    """Start every command together and wait for all: (wall s, CPU s of every process they ran,
    their output joined). SystemExit when one fails."""
    cpu, wall = children_cpu_seconds(), time.perf_counter()
    processes = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        for command in commands
    ]
    outputs = [process.communicate()[0] for process in processes]
    wall = time.perf_counter() - wall
    for process, output in zip(processes, outputs):
        if process.returncode != 0:
            raise SystemExit(f"bench_farm: a run failed ({process.returncode}):\n{output[-4000:]}")
    return wall, children_cpu_seconds() - cpu, "\n".join(outputs)


def job_command(shots, blender, output_dir):
    return openjd_run_command(
        {
            "ShotFiles": [str(shot) for shot in shots],
            "BlenderExecutable": str(blender),
            "OutputDir": str(output_dir),
        }
    )


def farm_runs(shots, blender, scratch):
    """{run: (label, the commands started together)}."""
    half = len(shots) // 2
    python = [sys.executable, "-c"]
    return {
        "one worker": (
            "one worker: one `openjd run`, every task one after another",
            [job_command(shots, blender, scratch / "one")],
        ),
        "two workers": (
            f"two workers: two `openjd run` started together, {half} tasks each",
            [
                job_command(shots[:half], blender, scratch / "two"),
                job_command(shots[half:], blender, scratch / "two"),
            ],
        ),
        "runner alone": (
            "the runner alone: one `openjd run`, `true` as Blender",
            [job_command(shots, shutil.which("true"), scratch / "none")],
        ),
        "Python, one after another": (
            "pure Python: one process doing two equal pieces of work",
            [python + [f"{PURE_PYTHON}; {PURE_PYTHON}"]],
        ),
        "Python, two at once": (
            "pure Python: two processes started together, one piece each (what a second process gains on the machine then)",
            [python + [PURE_PYTHON], python + [PURE_PYTHON]],
        ),
    }


def farm_rounds(runs, shots, rounds, env):
    """{run: [(wall s, CPU s), ...]} over `rounds` rounds, the runs' order reversed every other
    round, and the one-worker runs' per-file seconds."""
    times = {name: [] for name in runs}
    per_file = []
    for round_index in range(rounds):
        order = list(runs) if round_index % 2 == 0 else list(reversed(runs))
        for name in order:
            wall, cpu, output = timed_runs(runs[name][1], env)
            times[name].append((wall, cpu))
            if name == "one worker":
                per_file += [float(seconds) for seconds in BAKED_LINE.findall(output)]
                if len(BAKED_LINE.findall(output)) != len(shots):
                    raise SystemExit(
                        f"bench_farm: the one-worker run did not bake every shot:\n{output[-4000:]}"
                    )
            print(f"round {round_index + 1}/{rounds}: {name}: {wall:.1f} s", flush=True)
    return times, per_file


def start_times(blender, python, repeats, env):
    """Median wall s of: the stand-in's start, extension install and exit around a command that only
    prints its help; a Python that imports bpy and exits."""
    user_resources = tempfile.mkdtemp(prefix="ewbik-bench-farm-user-")
    commands = {
        "install": [str(blender), "-b", "-c", "ewbik", "bake", "--help"],
        "bpy": [python, "-c", "import bpy"],
    }
    medians = {}
    for name, command in commands.items():
        walls = []
        for _ in range(repeats):
            wall = time.perf_counter()
            subprocess.run(
                command,
                check=True,
                capture_output=True,
                env={**env, "BLENDER_USER_RESOURCES": user_resources},
            )
            walls.append(time.perf_counter() - wall)
        medians[name] = statistics.median(walls)
    shutil.rmtree(user_resources, ignore_errors=True)
    return medians


def in_process_parts(shots, extension_zip, scratch):
    """The command's own parts, {part: [wall s per shot]}: one worker process (`--parts`) per shot,
    as each task is a process of its own that opens one file."""
    parts = {}
    for shot in shots:
        result = scratch / "parts.json"
        command = [
            sys.executable,
            __file__,
            "--parts",
            str(extension_zip),
            str(result),
            str(scratch / "parts"),
            str(shot),
        ]
        run = subprocess.run(command, capture_output=True, text=True)
        if run.returncode != 0 or not result.is_file():
            raise SystemExit(
                f"bench_farm: the parts worker failed:\n{run.stdout[-2000:]}\n{run.stderr[-4000:]}"
            )
        for part, seconds in json.loads(result.read_text()).items():
            parts.setdefault(part, []).extend(seconds)
        result.unlink()
    return parts


def parts_worker(extension_zip, result, output_dir, shots):
    """Install the extension (timed), then run the bake command on `shots` with its file load, bake
    and save timed per shot; the seconds go to `result` as JSON."""
    from tests.support.bpy_blender import install_extension

    started = time.perf_counter()
    commands, user_resources = install_extension(extension_zip)
    parts = {"install": [time.perf_counter() - started], "open": [], "save": [], "file": []}
    from tests.support.blender_helpers import addon_module

    batch = addon_module("ewbik_addon.bake.batch")
    for name, part in (("open_file", "open"), ("save_whole", "save"), ("bake_file", "file")):
        setattr(batch, name, timed(getattr(batch, name), parts[part]))
    status = commands["ewbik"](["bake", *shots, "--output-dir", output_dir])
    shutil.rmtree(user_resources, ignore_errors=True)
    parts["bake"] = [whole - o - s for whole, o, s in zip(parts["file"], parts["open"], parts["save"])]
    pathlib.Path(result).write_text(json.dumps(parts))
    return status


def timed(function, seconds):
    """`function`, appending each call's wall seconds to `seconds`."""

    def timing(*args, **kwargs):
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            seconds.append(time.perf_counter() - started)

    return timing


def spread(values):
    """median (min-max) of seconds."""
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def median_wall(times, name):
    return statistics.median(wall for wall, _ in times[name])


def farm_table(runs, times, shots):
    rows = []
    for name, (label, _) in runs.items():
        walls = [wall for wall, _ in times[name]]
        baseline = SPEED_UP_OVER.get(name)
        speed_up = ""
        if baseline:
            speed_up = f"**{median_wall(times, baseline) / median_wall(times, name):.2f}x**"
        elif name in SPEED_UP_OVER.values():
            speed_up = "1.00x"
        per_shot = f"{median_wall(times, name) / shots:.2f}" if not name.startswith("Python") else ""
        cpu = statistics.median(cpu for _, cpu in times[name])
        rows.append([label, spread(walls), per_shot, f"{cpu:.1f}", speed_up])
    header = ["run", "wall s median (min-max)", "wall s per shot", "CPU s, all processes", "speed-up"]
    return bs.markdown_table(header, rows)


def parts_table(times, starts, parts, per_file, shots, frames):
    runner = median_wall(times, "runner alone") / shots
    one = median_wall(times, "one worker") / shots
    counted = runner + starts["install"] + statistics.median(parts["file"])
    rows = [
        [
            "runner, per task",
            f"{runner:.3f}",
            "the runner-alone run's wall / shots: `openjd run`'s own start shared out, each task's session, bash and the task script",
        ],
        [
            "stand-in Blender's start, extension install and exit",
            f"{starts['install']:.3f}",
            "`blender -b -c ewbik bake --help` (median wall): Python start, `import bpy`, extension install from the zip, command registration, help, Blender's exit and the user folder's removal",
        ],
        [
            "of which a Python importing bpy",
            f"{starts['bpy']:.3f}",
            "`python -c 'import bpy'` (median wall): Python's start, `import bpy`, exit; the part a `blender` binary's own start stands in for",
        ],
        [
            "of which the rest: the extension's install",
            f"{starts['install'] - starts['bpy']:.3f}",
            "the difference of the two lines above: the zip installed and enabled, the command run and the user folder removed; a Worker with the extension installed once does not pay it per task",
        ],
        [
            "`import bpy` + install, timed in process",
            f"{statistics.median(parts['install']):.3f}",
            "`install_extension` timed inside the worker (median): a check on the two lines above, without Python's start and exit",
        ],
        [
            "file load",
            f"{statistics.median(parts['open']):.3f}",
            "the command's `open_file` (`wm.open_mainfile`): median over the shots, each the first file of its process",
        ],
        [
            "bake",
            f"{statistics.median(parts['bake']):.3f}",
            f"`bake_file` less load and save: the armatures found, {frames} frames solved, keys written and counted; median",
        ],
        [
            "save",
            f"{statistics.median(parts['save']):.3f}",
            "the command's `save_whole`: the whole file written under a temporary name, then renamed; median",
        ],
        [
            "command's per-file line",
            f"{statistics.median(per_file):.1f}",
            "what the command prints for each file in the one-worker run (load + bake + save, to 0.1 s), median",
        ],
        [
            "sum: runner + start + load + bake + save",
            f"{counted:.3f}",
            "what one task should cost by its parts",
        ],
        ["one worker, measured per shot", f"{one:.3f}", "the one-worker run's median wall / shots"],
    ]
    return bs.markdown_table(["part", "wall s per shot", "what it includes"], rows)


def report(runs, times, starts, parts, per_file, args, seconds):
    lines = [
        f"Machine: {bs.machine_line(bs.solver_fingerprint())}.",
        f"{args.shots} shots (the metarig, hands, feet and head pinned, {args.frames} frames each), "
        f"{args.rounds} round(s) of the runs in turn, the order reversed every other round; the bench took {seconds:.0f} s. Blender is the "
        "stand-in (the bpy module in a Python, the extension installed at every start), not a "
        "`blender` binary.",
        "",
        farm_table(runs, times, args.shots),
        "",
        "Per shot, apart from the bake:",
        "",
        parts_table(times, starts, parts, per_file, args.shots, args.frames),
    ]
    return "\n".join(lines)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shots", type=int, default=20, help="shots in the folder (an even number)")
    parser.add_argument("--frames", type=int, default=100, help="frames per shot")
    parser.add_argument("--rounds", type=int, default=3, help="times each run is timed")
    parser.add_argument("--no-write", action="store_true", help="do not update docs/BENCHMARKS.md")
    parser.add_argument("--parts", nargs="+", metavar="ARG", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.parts:
        return parts_worker(args.parts[0], args.parts[1], args.parts[2], args.parts[3:])
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ewbik-bench-farm-") as folder:
        scratch = pathlib.Path(folder)
        extension_zip = build_extension_zip(scratch / "dist")
        blender = launcher_executable(scratch)
        names = [f"shot_{number:02d}" for number in range(1, args.shots + 1)]
        (scratch / "shots").mkdir()
        made = make_shots(extension_zip, scratch / "shots", names, "--walk", str(args.frames))
        if made.returncode != 0:
            raise SystemExit(
                f"bench_farm: the shots were not made:\n{made.stdout[-2000:]}\n{made.stderr[-4000:]}"
            )
        shots = [scratch / "shots" / f"{name}.blend" for name in names]
        env = {**os.environ, "EWBIK_EXTENSION_ZIP": str(extension_zip)}
        runs = farm_runs(shots, blender, scratch)
        times, per_file = farm_rounds(runs, shots, args.rounds, env)
        starts = start_times(blender, sys.executable, 2 * args.rounds + 1, env)
        parts = in_process_parts(shots, extension_zip, scratch)
    markdown = report(runs, times, starts, parts, per_file, args, time.perf_counter() - started)
    print()
    print(markdown)
    if not args.no_write:
        bs.write_results(markdown, FARM_BEGIN, FARM_END)
        print(f"\nwrote {bs.BENCHMARKS_MD}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
