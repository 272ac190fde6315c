"""`make bench`: EWBIK against Blender's own IK on real motion capture.

For each CMU clip in tests/data/mocap, every `--step`-th frame becomes a
test: forward kinematics of the clip gives the pose matrices of the hands, feet
and head (the pins, orientation weights 1), the hips get the clip's pose and are
frozen ("hips given"), and the solver has to bring the five effectors back.
Each sampled frame is solved warm (from the previous sampled frame's solution,
what live posing does), from the rest pose (the hard case), and warm with the
humanoid limit preset when the solver has presets. Blender's IK constraints
(Standard solver) solve the same targets in a subprocess (bench/blender_ik.py),
once per installed bpy version, in the same run, so the speed ratio compares
numbers taken under the same machine load.

The rig is scaled to 1.75 m (tests/support/mocap.py), so metres * 1000 are millimetres on
a human-sized body. Results go to stdout and into docs/BENCHMARKS.md between the
result markers.
"""

import argparse
import dataclasses
import datetime
import hashlib
import json
import os
import pathlib
import platform
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc

import numpy as np

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
if not __package__:  # run as a script, or imported by another bench script
    sys.path.insert(0, REPO_ROOT)
from solver import SolverSettings, native, solve  # noqa: E402
from solver.scene import scene_bone, scene_document, scene_settings  # noqa: E402
from tests.support import mocap  # noqa: E402
from tests.support.mocap_frames import (  # noqa: E402
    EFFECTORS,
    HIPS,
    RIG_HEIGHT,
    frame_pins,
    hips_given_start,
    load_clip,
    solve_sequence,
)

MOCAP_DIR = os.environ.get(
    "EWBIK_MOCAP_DIR", str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "data" / "mocap")
)
CLIPS = ("cmu_131_01.bvh", "cmu_131_03.bvh")
CMU_METRES_PER_UNIT = 0.056444
BENCHMARKS_MD = os.path.join(REPO_ROOT, "docs", "BENCHMARKS.md")
RESULTS_BEGIN = "<!-- bench:results -->"
RESULTS_END = "<!-- /bench:results -->"
REPRO_DIR = os.path.join(REPO_ROOT, "out", "bench")
VENV_DIR = os.environ.get(
    "EWBIK_VENV_DIR",
    os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "ewbik", "venvs"),
)
BLENDER_VENVS = ("bpy-5.2", "bpy-4.2")

TARGETS = {
    "warm": {"position_p95_mm": 0.5, "orientation_p95_deg": 0.5},
    "rest": {"position_p95_mm": 2.0, "position_max_mm": 10.0},
    "limits": {"position_p95_mm": 2.0, "orientation_p95_deg": 1.0},
    "speed_ratio": 2.0,
}


@dataclasses.dataclass
class Run:
    """Per sampled frame (rows) and pin (columns) results of one way of solving a clip."""

    label: str
    clip: str
    frames: np.ndarray
    position_mm: np.ndarray
    orientation_deg: np.ndarray
    ms: np.ndarray
    cpu_ms: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    pins_cpu_ms: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0))
    sources: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, dtype=object))
    worst: dict | None = None

    def __post_init__(self):
        if len(self.sources) != len(self.frames):
            self.sources = np.array([self.clip] * len(self.frames), dtype=object)


def solve_clip(
    clip, label, settings, warm, rest_settings=None, limits=None, rows=None, orientation_weight=1.0
):
    """Solve the sampled frames in order (`solve_sequence`) and gather a Run.

    The run keeps the inputs of its worst frame (largest position error) so that frame can be
    replayed alone as a scene document.
    """
    out = {
        k: []
        for k in (
            "frames",
            "position_mm",
            "orientation_deg",
            "ms",
            "cpu_ms",
            "iterations",
            "converged",
            "pins_cpu_ms",
        )
    }
    worst = None
    for solved in solve_sequence(
        clip, settings, warm, rest_settings, limits, rows=rows, orientation_weight=orientation_weight
    ):
        result = solved.result
        error = float(result.position_errors.max())
        if worst is None or error > worst["error"]:
            worst = {
                "error": error,
                "row": solved.row,
                "rotations": solved.rotations,
                "locations": solved.locations,
                "settings": solved.settings,
                "orientation_weight": orientation_weight,
            }
        out["frames"].append(clip.frames[solved.row])
        out["position_mm"].append(result.position_errors * 1e3)
        out["orientation_deg"].append(result.orientation_errors_deg)
        out["ms"].append(result.ms)
        out["cpu_ms"].append(solved.cpu_ms)
        out["pins_cpu_ms"].append(solved.pins_cpu_ms)
        out["iterations"].append(result.iterations)
        out["converged"].append(result.converged)
    return Run(label, clip.name, **{k: np.array(v) for k, v in out.items()}, worst=worst)


def memory_use(clip, settings, rows, repeats):
    """(peak Python-heap KiB of one warm solve traced by tracemalloc, resident-set growth in KiB over
    `repeats` passes of warm solves). The C loop's workspace is malloc'ed outside the Python heap,
    so the second figure is the one that would show a leak in it."""

    def warm_pass():
        previous = None
        for row in rows:
            rotations, locations = hips_given_start(clip, row, previous)
            previous = solve(clip.skeleton, frame_pins(clip, row), rotations, locations, settings).rotations

    warm_pass()
    tracemalloc.start()
    warm_pass()
    peak = tracemalloc.get_traced_memory()[1] / 1024
    tracemalloc.stop()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(repeats):
        warm_pass()
    return peak, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before


def repro_document(clip, worst, limit_dicts=None):
    """A scene document (solver/scene.py format) replaying one frame of a run exactly."""
    skeleton = clip.skeleton
    bones = [
        scene_bone(
            name,
            None if skeleton.parents[i] < 0 else skeleton.names[skeleton.parents[i]],
            skeleton.rest[i],
            skeleton.lengths[i],
            rotation=worst["rotations"][i],
            location=worst["locations"][i],
            stiffness=1.0 if name == HIPS else 0.0,
            limits=(limit_dicts or {}).get(name),
        )
        for i, name in enumerate(skeleton.names)
    ]
    axes = [worst["orientation_weight"]] * 3
    pins = [
        {"bone": bone, "target": clip.targets[worst["row"], k].tolist(), "orientation_weights": axes}
        for k, bone in enumerate(EFFECTORS)
    ]
    return scene_document(bones, pins, scene_settings(worst["settings"]))


def humanoid_limits(clip):
    """(JointLimits, {bone: limits dict}) from the humanoid preset; (None, None) while the solver has no presets."""
    try:
        from solver.kusudama import JointLimits, Kusudama
        from solver.presets import preset_limits
    except ImportError:
        return None, None
    per_bone = preset_limits(clip.bones, "humanoid")
    kusudamas = {clip.skeleton.index[name]: Kusudama.from_dict(d, bone=name) for name, d in per_bone.items()}
    return JointLimits(kusudamas, len(clip.skeleton)), per_bone


def clip_violations(clip, limits):
    """{bone: share of test frames where the clip's own pose lies over 1 degree outside the limits},
    for the bones the pins move (the others never change)."""
    worst = np.array([limits.violation(rotations) for rotations in clip.clip_rotations])
    outside = (worst > np.radians(1.0)).mean(axis=0)
    moved = {b for e in EFFECTORS for b in clip.skeleton.ancestors(clip.skeleton.index[e])}
    return {clip.skeleton.names[i]: float(outside[i]) for i in np.flatnonzero(outside) if i in moved}


def blender_ik_document(python, clip, repeats, *options):
    """The document bench/blender_ik.py writes for Blender's IK on the clip's sampled frames, run in
    a subprocess of that bpy interpreter; `options` are its further command-line options."""
    with tempfile.TemporaryDirectory(prefix="ewbik-bench-") as tmp:
        out = os.path.join(tmp, "blender.json")
        cmd = [
            python,
            os.path.join(BENCH_DIR, "blender_ik.py"),
            "--clip",
            clip.path,
            "--frames",
            ",".join(str(int(f)) for f in clip.frames),
            "--scale",
            repr(clip.scale / CMU_METRES_PER_UNIT),
            "--effectors",
            ",".join(EFFECTORS),
            "--repeats",
            str(repeats),
            *options,
            "--out",
            out,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0 or not os.path.exists(out):
            raise RuntimeError(f"{' '.join(cmd[:2])} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
        with open(out) as f:
            return json.load(f)


def run_blender(python, clip, iterations, repeats):
    """Blender's IK on the clip's sampled frames, in a subprocess of that bpy interpreter."""
    doc = blender_ik_document(python, clip, repeats, "--iterations", str(iterations))
    runs = {}
    for mode, data in doc["modes"].items():
        keep = slice(1, None) if mode == "warm" else slice(None)
        runs[mode] = Run(
            label=f"Blender {doc['blender'].split()[0]} IK {mode}",
            clip=clip.name,
            frames=np.array(doc["frames"])[keep],
            position_mm=np.array(data["position_error"])[keep] * 1e3,
            orientation_deg=np.array(data["orientation_error_deg"])[keep],
            ms=np.array(data["ms"])[keep],
            cpu_ms=np.array(data["cpu_ms"])[keep],
            iterations=np.zeros(0),
            converged=np.zeros(0, dtype=bool),
        )
    return doc, runs


def merged(runs):
    """One Run from the same way of solving over several clips."""
    first = runs[0]
    return Run(
        first.label,
        "+".join(r.clip for r in runs),
        np.concatenate([r.frames for r in runs]),
        np.concatenate([r.position_mm for r in runs]),
        np.concatenate([r.orientation_deg for r in runs]),
        np.concatenate([r.ms for r in runs]),
        np.concatenate([r.cpu_ms for r in runs]),
        np.concatenate([r.iterations for r in runs]),
        np.concatenate([r.converged for r in runs]),
        np.concatenate([r.pins_cpu_ms for r in runs]),
        np.concatenate([r.sources for r in runs]),
    )


def stats(values):
    v = np.asarray(values, dtype=float).ravel()
    return float(np.median(v)), float(np.percentile(v, 95)), float(v.max())


def row_cells(run, baseline):
    pos, ori, ms, cpu = stats(run.position_mm), stats(run.orientation_deg), stats(run.ms), stats(run.cpu_ms)
    if len(run.iterations):
        its = f"{np.median(run.iterations):.0f} / {np.percentile(run.iterations, 95):.0f} / {run.iterations.max():.0f}"
        conv = f"{100.0 * run.converged.mean():.0f}%"
    else:
        its, conv = "n/a", "n/a"
    ratio = f"{ms[0] / baseline[0]:.1f}x / {cpu[0] / baseline[1]:.1f}x" if baseline else "n/a"
    return [
        run.label,
        f"{pos[0]:.3f} / {pos[1]:.3f} / {pos[2]:.2f}",
        f"{ori[0]:.3f} / {ori[1]:.3f} / {ori[2]:.2f}",
        f"{ms[0]:.2f} / {ms[1]:.2f}",
        f"{cpu[0]:.2f}",
        its,
        conv,
        ratio,
        str(len(run.ms)),
    ]


def markdown_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def per_pin_table(runs):
    header = ["run"] + [f"{e} p95 mm / deg" for e in EFFECTORS]
    rows = [
        [run.label]
        + [
            f"{np.percentile(run.position_mm[:, k], 95):.3f} / {np.percentile(run.orientation_deg[:, k], 95):.3f}"
            for k in range(len(EFFECTORS))
        ]
        for run in runs
    ]
    return markdown_table(header, rows)


def worst_frames(run, count=5):
    flat = np.argsort(run.position_mm, axis=None)[::-1][:count]
    lines = []
    for idx in flat:
        r, k = np.unravel_index(idx, run.position_mm.shape)
        lines.append(
            f"{run.label}: {run.sources[r]} frame {run.frames[r]} pin {EFFECTORS[k]}: {run.position_mm[r, k]:.2f} mm, "
            f"{run.orientation_deg[r, k]:.3f} deg, {run.iterations[r] if len(run.iterations) else '-'} iterations"
        )
    return lines


def target_checks(warm, rest, limited, baseline):
    checks = []

    def check(name, value, limit):
        checks.append(f"- {name}: {value:.3f} (target <= {limit}) {'PASS' if value <= limit else 'FAIL'}")

    check("warm position p95 mm", stats(warm.position_mm)[1], TARGETS["warm"]["position_p95_mm"])
    check("warm orientation p95 deg", stats(warm.orientation_deg)[1], TARGETS["warm"]["orientation_p95_deg"])
    if rest is not None:
        check("rest position p95 mm", stats(rest.position_mm)[1], TARGETS["rest"]["position_p95_mm"])
        check("rest position max mm", stats(rest.position_mm)[2], TARGETS["rest"]["position_max_mm"])
    if limited is not None:
        check(
            "limits warm position p95 mm", stats(limited.position_mm)[1], TARGETS["limits"]["position_p95_mm"]
        )
        check(
            "limits warm orientation p95 deg",
            stats(limited.orientation_deg)[1],
            TARGETS["limits"]["orientation_p95_deg"],
        )
    if baseline:
        check(
            "warm median ms / Blender warm median ms (wall)",
            stats(warm.ms)[0] / baseline[0],
            TARGETS["speed_ratio"],
        )
        check(
            "warm median ms / Blender warm median ms (CPU)",
            stats(warm.cpu_ms)[0] / baseline[1],
            TARGETS["speed_ratio"],
        )
    return checks


def solver_fingerprint():
    """sha1 of solver/*.py and solver/csrc, taken when the solver is imported: the files change while people work."""
    digest = hashlib.sha1()
    solver_dir = os.path.join(REPO_ROOT, "solver")
    csrc_dir = os.path.join(solver_dir, "csrc")
    paths = [os.path.join(solver_dir, n) for n in sorted(os.listdir(solver_dir)) if n.endswith(".py")]
    paths += [os.path.join(csrc_dir, n) for n in sorted(os.listdir(csrc_dir)) if n.endswith((".c", ".h"))]
    for path in paths:
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:10]


def machine_line(fingerprint):
    model = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        commit = subprocess.run(
            ["git", "-C", REPO_ROOT, "describe", "--always", "--dirty"], capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        commit = "?"
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"{now}; {model}, {os.cpu_count()} cores, load average {load}; Python {platform.python_version()}, "
        f"numpy {np.__version__}; commit {commit}, solver sha1 {fingerprint}; "
        f"solver loop: {'compiled (solver/csrc)' if native.available() else 'numpy (library not built)'}"
    )


def settings_text(settings):
    return ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(settings).items())


def sweep(clip, rest_settings, iteration_counts, dampenings, stride):
    """Warm runs over a grid of iteration caps and dampenings (tolerance 0: every iteration runs
    unless the solver stalls), on every `stride`-th sampled frame of one clip."""
    rows = np.arange(0, len(clip.frames), stride)
    lines = []
    for dampening in dampenings:
        for iterations in iteration_counts:
            settings = dataclasses.replace(
                rest_settings, iterations=iterations, dampening=dampening, tolerance=0.0
            )
            run = solve_clip(clip, "sweep", settings, warm=True, rest_settings=rest_settings, rows=rows)
            pos, ori, cpu = stats(run.position_mm), stats(run.orientation_deg), stats(run.cpu_ms)
            lines.append(
                [
                    f"{dampening:.4f}",
                    str(iterations),
                    f"{np.median(run.iterations):.0f}",
                    f"{pos[0]:.3f} / {pos[1]:.3f} / {pos[2]:.2f}",
                    f"{ori[0]:.3f} / {ori[1]:.3f} / {ori[2]:.2f}",
                    f"{cpu[0]:.2f}",
                ]
            )
            print("  sweep", " | ".join(lines[-1]), flush=True)
    header = [
        "dampening (rad)",
        "iteration cap",
        "iterations used (median)",
        "position mm median / p95 / max",
        "orientation deg median / p95 / max",
        "CPU ms median",
    ]
    return markdown_table(header, lines), len(rows), stride * int(clip.frames[1] - clip.frames[0])


VARIANT_HEADER = [
    "variant",
    "warm position mm median / p95 / max",
    "warm orientation p95 deg",
    "warm iterations median",
    "warm CPU ms median",
    "rest position mm median / p95 / max",
    "rest orientation p95 deg",
    "rest iterations median",
    "rest CPU ms median",
]


def variant_candidates(warm_settings):
    """(label, settings changes, pins' orientation weight) of each variant, the bench settings first."""
    base_fields = dataclasses.asdict(warm_settings)
    candidates = [("bench settings", {}, 1.0)]
    if "acceleration" in base_fields:
        candidates.append(("acceleration=0", {"acceleration": 0}, 1.0))
    if "relaxation" in base_fields:
        candidates.append(("relaxation=1.5", {"relaxation": 1.5}, 1.0))
    if "analytic_limbs" in base_fields:
        candidates.append(("analytic_limbs=False", {"analytic_limbs": False}, 1.0))
    return candidates + [
        ("dampening x4", {"dampening": 4 * warm_settings.dampening}, 1.0),
        ("pins orientation weight 0.3", {}, 0.3),
        ("pins orientation weight 0.1", {}, 0.1),
    ]


def variant_cells(clip, candidate, warm_settings, rest_settings, warm_rows, rest_rows):
    """One variant's table row: its warm run, then its from-rest run."""
    label, change, weight = candidate
    warm_run = solve_clip(
        clip,
        label,
        dataclasses.replace(warm_settings, **change),
        warm=True,
        rest_settings=dataclasses.replace(rest_settings, **change),
        rows=warm_rows,
        orientation_weight=weight,
    )
    rest_run = solve_clip(
        clip,
        label,
        dataclasses.replace(rest_settings, **change),
        warm=False,
        rows=rest_rows,
        orientation_weight=weight,
    )
    cells = [label]
    for run in (warm_run, rest_run):
        pos = stats(run.position_mm)
        cells += [
            f"{pos[0]:.3f} / {pos[1]:.3f} / {pos[2]:.2f}",
            f"{stats(run.orientation_deg)[1]:.3f}",
            f"{np.median(run.iterations):.0f}",
            f"{np.median(run.cpu_ms):.1f}",
        ]
    return cells


def variants(clip, warm_settings, rest_settings, stride, rest_stride):
    """Warm and from-rest runs of one clip under single changes to the bench settings or pins,
    so it shows which knob moves accuracy and time."""
    warm_rows = np.arange(0, len(clip.frames), stride)
    rest_rows = np.arange(0, len(clip.frames), rest_stride)
    lines = []
    for candidate in variant_candidates(warm_settings):
        lines.append(variant_cells(clip, candidate, warm_settings, rest_settings, warm_rows, rest_rows))
        print("  variant", " | ".join(lines[-1]), flush=True)
    spacing = int(clip.frames[1] - clip.frames[0])
    return markdown_table(VARIANT_HEADER, lines), (
        len(warm_rows),
        stride * spacing,
        len(rest_rows),
        rest_stride * spacing,
    )


RIGS = (
    ("CMU", lambda m: m),
    ("CMU, bones rolled", mocap.rolled_rest),
    ("straight-line rest", mocap.straight_line_rest),
)
CONVERGENCE_TOLERANCE = 1e-6
CONVERGENCE_TARGETS = {"iterations_median": 30, "warm_p95_mm": 0.05, "rest_max_mm": 2.0, "speed_ratio": 0.5}


CONVERGENCE_HEADER = [
    "rig",
    "warm frames",
    "iterations median / p95 / max",
    "converged",
    "position mm p95 / max",
    "ms median",
    "ms / Blender warm",
    "rest frames",
    "rest iterations median",
    "rest position mm p95 / max",
]


def convergence_runs(clip_names, rig, convert, warm_settings, rest_settings, rest_stride):
    """(warm, from rest) runs of every clip re-expressed on one rig, merged."""
    warm_runs, rest_runs = [], []
    for name in clip_names:
        path = os.path.join(MOCAP_DIR, name)
        clip = load_clip(path, 1, convert(mocap.load_bvh(path, height=RIG_HEIGHT)))
        warm_runs.append(solve_clip(clip, rig, warm_settings, warm=True, rest_settings=rest_settings))
        rest_runs.append(
            solve_clip(clip, rig, rest_settings, warm=False, rows=np.arange(0, len(clip.frames), rest_stride))
        )
    return merged(warm_runs), merged(rest_runs)


def convergence_row(rig, warm, rest, baseline):
    """(table row, target lines) of one rig."""
    its, pos, ms = stats(warm.iterations), stats(warm.position_mm), stats(warm.ms)
    ratio = ms[0] / baseline[0] if baseline else float("nan")
    row = [
        rig,
        str(len(warm.ms)),
        f"{its[0]:.0f} / {its[1]:.0f} / {its[2]:.0f}",
        f"{100.0 * warm.converged.mean():.1f}%",
        f"{pos[1]:.4f} / {pos[2]:.4f}",
        f"{ms[0]:.2f}",
        f"{ratio:.2f}x",
        str(len(rest.ms)),
        f"{np.median(rest.iterations):.0f}",
        f"{stats(rest.position_mm)[1]:.4f} / {stats(rest.position_mm)[2]:.4f}",
    ]
    checks = [
        f"- {rig}: {label} {value:.3f} (target <= {limit}) {'PASS' if value <= limit else 'FAIL'}"
        for label, value, limit in (
            ("warm iterations median", its[0], CONVERGENCE_TARGETS["iterations_median"]),
            ("warm position p95 mm", pos[1], CONVERGENCE_TARGETS["warm_p95_mm"]),
            ("from rest position max mm", stats(rest.position_mm)[2], CONVERGENCE_TARGETS["rest_max_mm"]),
            ("warm median ms / Blender warm median ms", ratio, CONVERGENCE_TARGETS["speed_ratio"]),
        )
    ]
    return row, checks


def convergence(clip_names, base, rest_stride, baseline):
    """Warm solves of every frame and from-rest solves of every `rest_stride`-th one at tolerance
    1e-6 (metres), on the CMU rig and on the same motion re-expressed exactly by FK on other
    rigs (random bone rolls; a straight-line rest). Returns (markdown table, target lines)."""
    warm_settings = dataclasses.replace(base, iterations=100, tolerance=CONVERGENCE_TOLERANCE)
    rest_settings = dataclasses.replace(base, iterations=500, tolerance=CONVERGENCE_TOLERANCE)
    rows, checks = [], []
    for rig, convert in RIGS:
        warm, rest = convergence_runs(clip_names, rig, convert, warm_settings, rest_settings, rest_stride)
        row, rig_checks = convergence_row(rig, warm, rest, baseline)
        rows.append(row)
        print("  convergence", " | ".join(row), flush=True)
        checks += rig_checks
    return markdown_table(CONVERGENCE_HEADER, rows), checks


def write_repros(runs, limit_dicts_by_clip, clips_by_name):
    """Scene documents of each run's worst frame, for `python -m solver solve FILE`."""
    os.makedirs(REPRO_DIR, exist_ok=True)
    for stale in os.listdir(REPRO_DIR):
        if stale.startswith("worst_") and stale.endswith(".json"):
            os.remove(os.path.join(REPRO_DIR, stale))
    paths = []
    for key, per_clip in runs.items():
        for run in per_clip:
            if run.worst is None:
                continue
            clip = clips_by_name[run.clip]
            limit_dicts = limit_dicts_by_clip.get(run.clip) if key == "limits" else None
            path = os.path.join(
                REPRO_DIR, f"worst_{key}_{run.clip}_frame{int(clip.frames[run.worst['row']])}.json"
            )
            with open(path, "w") as f:
                json.dump(repro_document(clip, run.worst, limit_dicts), f)
            paths.append((run.label, run.clip, run.worst["error"] * 1e3, os.path.relpath(path, REPO_ROOT)))
    return paths


def write_results(markdown, begin=RESULTS_BEGIN, end=RESULTS_END):
    """Put `markdown` between the two markers of docs/BENCHMARKS.md (appended when they are missing)."""
    block = f"{begin}\n{markdown}\n{end}"
    if os.path.exists(BENCHMARKS_MD):
        with open(BENCHMARKS_MD) as f:
            text = f.read()
        if begin in text and end in text:
            head, rest = text.split(begin, 1)
            text = head + block + rest.split(end, 1)[1]
        else:
            text = text.rstrip() + "\n\n" + block + "\n"
    else:
        text = "# Benchmarks\n\n" + block + "\n"
    with open(BENCHMARKS_MD, "w") as f:
        f.write(text)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step", type=int, default=4, help="sample every STEP-th clip frame (warm runs)")
    parser.add_argument(
        "--rest-every",
        type=int,
        default=1,
        help="from-rest solves on every N-th sampled frame only (they cost more iterations)",
    )
    parser.add_argument("--clips", nargs="*", default=list(CLIPS))
    parser.add_argument("--warm-iterations", type=int, default=50)
    parser.add_argument("--rest-iterations", type=int, default=500)
    parser.add_argument("--tolerance", type=float, default=1e-5, help="metres and radians")
    parser.add_argument("--dampening", type=float, default=None, help="radians (default: the solver's)")
    parser.add_argument("--blender-iterations", type=int, default=500)
    parser.add_argument("--blender-repeats", type=int, default=3)
    parser.add_argument(
        "--blender",
        nargs="*",
        default=list(BLENDER_VENVS),
        help="bpy venv names under the venv dir (none: skip Blender)",
    )
    parser.add_argument("--no-limits", action="store_true")
    parser.add_argument(
        "--no-convergence", action="store_true", help="skip the every-frame convergence table"
    )
    parser.add_argument("--sweep", action="store_true", help="also sweep iteration caps and dampening (slow)")
    parser.add_argument("--no-write", action="store_true", help="do not update docs/BENCHMARKS.md")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: one clip, every 32nd frame; writes no files"
    )
    return parser.parse_args(argv)


@dataclasses.dataclass
class Measured:
    """Everything one bench run solved: EWBIK runs by kind, Blender's runs by (venv, mode)."""

    clips: list
    runs: dict
    blender_runs: dict
    blender_docs: list
    violations: dict
    limit_dicts_by_clip: dict


def bench_settings(args):
    """(base, warm, rest, numpy-loop warm) settings of this run."""
    base = SolverSettings() if args.dampening is None else SolverSettings(dampening=args.dampening)
    warm = dataclasses.replace(base, iterations=args.warm_iterations, tolerance=args.tolerance)
    rest = dataclasses.replace(base, iterations=args.rest_iterations, tolerance=args.tolerance)
    return base, warm, rest, dataclasses.replace(warm, backend="numpy")


def timed(label, *args, **kwargs):
    """solve_clip(*args, **kwargs), saying how long it took."""
    started = time.perf_counter()
    run = solve_clip(*args, **kwargs)
    print(f"{label} in {time.perf_counter() - started:.1f} s", flush=True)
    return run


def solve_clips(args, warm_settings, rest_settings, numpy_settings):
    """Every clip warm-started (compiled and numpy loop), from rest, under the humanoid preset,
    and through Blender's IK in each venv."""
    measured = Measured([], {"warm": [], "numpy": [], "rest": [], "limits": []}, {}, [], {}, {})
    for name in args.clips:
        clip = load_clip(os.path.join(MOCAP_DIR, name), args.step)
        measured.clips.append(clip)
        solve_without_limits(args, clip, measured.runs, warm_settings, rest_settings, numpy_settings)
        solve_with_limits(args, clip, measured, warm_settings, rest_settings)
        solve_in_blender(args, clip, measured)
    return measured


def solve_without_limits(args, clip, runs, warm_settings, rest_settings, numpy_settings):
    """The clip warm-started (compiled loop, and the numpy loop where both exist) and from rest."""
    runs["warm"].append(
        timed(
            f"{clip.name}: warm {len(clip.frames)} frames",
            clip,
            "EWBIK warm-started",
            warm_settings,
            warm=True,
            rest_settings=rest_settings,
        )
    )
    if native.available():
        runs["numpy"].append(
            timed(
                f"{clip.name}: warm, numpy loop,",
                clip,
                "EWBIK warm-started, numpy loop",
                numpy_settings,
                warm=True,
                rest_settings=dataclasses.replace(rest_settings, backend="numpy"),
            )
        )
    rest_rows = np.arange(0, len(clip.frames), args.rest_every)
    runs["rest"].append(
        timed(
            f"{clip.name}: rest {len(rest_rows)} frames",
            clip,
            "EWBIK from rest",
            rest_settings,
            warm=False,
            rows=rest_rows,
        )
    )


def solve_with_limits(args, clip, measured, warm_settings, rest_settings):
    """The clip warm-started under the humanoid preset, and how far the capture itself leaves it."""
    limits, limit_dicts = (None, None) if args.no_limits else humanoid_limits(clip)
    if limits is None:
        return
    measured.violations[clip.name] = clip_violations(clip, limits)
    measured.limit_dicts_by_clip[clip.name] = limit_dicts
    measured.runs["limits"].append(
        timed(
            f"{clip.name}: limits {len(clip.frames)} frames",
            clip,
            "EWBIK warm-started, humanoid limits",
            warm_settings,
            warm=True,
            rest_settings=rest_settings,
            limits=limits,
        )
    )


def solve_in_blender(args, clip, measured):
    for venv in args.blender:
        python = os.path.join(VENV_DIR, venv, "bin", "python")
        if not os.path.exists(python):
            print(f"{venv}: no interpreter at {python}, skipped")
            continue
        started = time.perf_counter()
        doc, by_mode = run_blender(python, clip, args.blender_iterations, args.blender_repeats)
        measured.blender_docs.append(doc)
        for mode, run in by_mode.items():
            measured.blender_runs.setdefault((venv, mode), []).append(run)
        print(
            f"{clip.name}: {venv} (Blender {doc['blender']}) in {time.perf_counter() - started:.1f} s",
            flush=True,
        )


def blender_rows(blender, baseline):
    """Table rows of Blender's runs, 5.2 first, each saying how its warm start was made."""
    rows = []
    for (_venv, mode), run in sorted(blender.items(), key=lambda kv: (kv[0][0] != "bpy-5.2", kv[0])):
        if mode == "muted":
            run.label = f"{run.label.rsplit(' ', 2)[0]} constraints muted (depsgraph cost without IK)"
        elif mode == "rest":
            run.label += " (pose channels at rest: an unkeyed rig)"
        else:
            run.label += " (previous result written to the pose channels)"
        rows.append(row_cells(run, baseline))
    return rows


def header_lines(args, measured, fingerprint, warm_settings, rest_settings):
    clips = measured.clips
    lines = [
        f"Machine: {machine_line(fingerprint)}",
        "",
        f"Clips: {', '.join(c.name for c in clips)}; every {args.step}th frame "
        f"({sum(len(c.frames) for c in clips)} frames, "
        f"{'all' if args.rest_every == 1 else f'every {args.rest_every}th'} also solved from rest); "
        f"pins {', '.join(EFFECTORS)} (position + all three axes, weight 1), hips given.",
        f"EWBIK warm settings: {settings_text(warm_settings)}.",
        f"EWBIK rest settings: {settings_text(rest_settings)}; warm runs start from a rest solve of their first frame, "
        f"which is not counted.",
        "",
    ]
    if measured.blender_docs:
        doc = measured.blender_docs[0]
        chains = ", ".join(f"{e}: {len(c)}" for e, c in doc["chains"].items())
        lines += [
            f"Blender: Standard (LEGACY) IK, use_tail + use_rotation, no stretch, {doc['iterations']} iterations, "
            f"chain_count {chains} (each chain ends below {HIPS}); timing = `view_layer.update()`, median of "
            f"{args.blender_repeats} passes per frame.",
            "",
        ]
    return lines


def memory_lines(args, clip, warm_settings, numpy_settings):
    lines = []
    memory_rows = np.arange(0, len(clip.frames), 8)
    for label, settings in (("compiled loop", warm_settings), ("numpy loop", numpy_settings)):
        if label == "compiled loop" and not native.available():
            continue
        repeats = 0 if args.quick else (20 if label == "compiled loop" else 2)
        peak, growth = memory_use(clip, settings, memory_rows, repeats)
        lines.append(
            f"Memory, {label}: peak Python heap of a warm pass over {len(memory_rows)} frames of "
            f"{clip.name} {peak:.0f} KiB (tracemalloc); resident set grew {growth} KiB over "
            f"{repeats} more passes ({repeats * len(memory_rows)} solves)."
        )
    return lines + [""]


def violation_lines(violations):
    lines = []
    for name, outside in violations.items():
        text = ", ".join(
            f"{bone} {100 * f:.0f}%" for bone, f in sorted(outside.items(), key=lambda kv: -kv[1])
        )
        lines.append(
            f"Clip pose outside the humanoid preset by more than 1 deg ({name}, share of test frames): "
            f"{text or 'none'}."
        )
    return lines + ([""] if lines else [])


def extra_sections(args, measured, base, warm_settings, rest_settings, baseline):
    """The convergence table (every frame, three rigs) and, on request, the variants and sweep."""
    clips, lines = measured.clips, []
    if not args.no_convergence and not args.quick:
        print("convergence (every frame, tolerance 1e-6):", flush=True)
        table, checks = convergence(args.clips, base, 8, baseline)
        lines += [
            "",
            f"Convergence: every frame of {', '.join(c.name for c in clips)} warm-started (tolerance "
            f"{CONVERGENCE_TOLERANCE} m, cap 100; the first frame of each clip solved from rest, not "
            f"counted) and every 8th from rest (cap 500), on the CMU rig and on the same motion re-expressed "
            f"exactly by forward kinematics on a rig with random bone rolls and on a straight-line rest.",
            "",
            table,
            "",
            "Convergence targets:",
        ] + checks
    if args.sweep:
        print("variants (clip 1):", flush=True)
        table, (warm_count, warm_spacing, rest_count, rest_spacing) = variants(
            clips[0], warm_settings, rest_settings, 4, 16
        )
        lines += [
            "",
            f"Variants: one change at a time on {clips[0].name}; warm runs on {warm_count} frames "
            f"{warm_spacing} clip frames apart (a harder warm start than the main table's), from rest on "
            f"{rest_count} frames.",
            "",
            table,
        ]
        print("sweep (clip 1, warm):", flush=True)
        table, count, spacing = sweep(
            clips[0],
            rest_settings,
            (5, 15, 30, 60, 120),
            (base.dampening, 2 * base.dampening, 4 * base.dampening),
            4,
        )
        lines += [
            "",
            f"Sweep: warm runs on {clips[0].name}, {count} frames {spacing} clip frames apart, "
            f"tolerance 0 (the cap is the iteration count unless the solver stalls).",
            "",
            table,
        ]
    return lines


RESULTS_HEADER = [
    "run",
    "position mm median / p95 / max",
    "orientation deg median / p95 / max",
    "ms per frame median / p95",
    "CPU ms median",
    "iterations median / p95 / max",
    "converged",
    "median ms / Blender warm (wall / CPU)",
    "frames",
]


@dataclasses.dataclass
class Summary:
    """A bench's runs merged over its clips: the table's EWBIK runs, Blender's by (venv, mode),
    and the speed baseline (Blender's warm median wall and CPU ms, or None)."""

    warm: Run
    rest: Run
    limited: Run | None
    table_runs: list
    blender: dict
    baseline: tuple | None


def summarize(measured, blender_venvs):
    runs = measured.runs
    warm, rest = merged(runs["warm"]), merged(runs["rest"])
    limited = merged(runs["limits"]) if runs["limits"] else None
    blender = {key: merged(v) for key, v in measured.blender_runs.items()}
    reference_key = next(((v, "warm") for v in blender_venvs if (v, "warm") in blender), None)
    baseline = (
        (stats(blender[reference_key].ms)[0], stats(blender[reference_key].cpu_ms)[0])
        if reference_key
        else None
    )
    numpy_warm = merged(runs["numpy"]) if runs["numpy"] else None
    table_runs = (
        [warm]
        + ([numpy_warm] if numpy_warm is not None else [])
        + [rest]
        + ([limited] if limited is not None else [])
    )
    return Summary(warm, rest, limited, table_runs, blender, baseline)


def results_table(summary):
    """The main table: EWBIK's runs, then Blender's (whose labels it completes)."""
    rows = [row_cells(r, summary.baseline) for r in summary.table_runs]
    return markdown_table(RESULTS_HEADER, rows + blender_rows(summary.blender, summary.baseline))


def detail_lines(args, measured, summary, warm_settings, numpy_settings):
    """Below the table: pin building cost, memory, the capture against the preset, targets,
    per-pin errors, the worst frames and (full runs) their scene documents."""
    lines = [
        f"Building the five `Pin`s (matrix validation) outside `solve()`: median "
        f"{np.median(summary.warm.pins_cpu_ms):.2f} CPU ms per frame, not included above.",
        "",
    ]
    lines += memory_lines(args, measured.clips[0], warm_settings, numpy_settings)
    lines += violation_lines(measured.violations)
    lines += (
        ["Targets:"] + target_checks(summary.warm, summary.rest, summary.limited, summary.baseline) + [""]
    )
    blender = summary.blender
    lines += [
        "Per pin (p95):",
        "",
        per_pin_table(summary.table_runs + [blender[k] for k in sorted(blender) if k[1] != "muted"]),
        "",
    ]
    lines += ["Largest position errors:", ""]
    for run in summary.table_runs:
        lines += ["- " + line for line in worst_frames(run, 3)]
    if not args.quick:
        repros = write_repros(
            measured.runs, measured.limit_dicts_by_clip, {c.name: c for c in measured.clips}
        )
        lines += [
            "",
            "Worst frame of each run as a scene document (replay: `python -m solver solve FILE`):",
            "",
        ]
        lines += [f"- {label}, {clip}: {error:.2f} mm: `{path}`" for label, clip, error, path in repros]
    return lines


def main(argv=None):
    args = parse_args(argv)
    if args.quick:
        args.step, args.clips, args.blender_repeats = 32, args.clips[:1], 1
    base, warm_settings, rest_settings, numpy_settings = bench_settings(args)
    started = time.perf_counter()
    fingerprint = solver_fingerprint()
    print(f"warm settings: {settings_text(warm_settings)}")
    print(f"rest settings: {settings_text(rest_settings)}", flush=True)
    measured = solve_clips(args, warm_settings, rest_settings, numpy_settings)
    summary = summarize(measured, args.blender)
    table = results_table(summary)
    if solver_fingerprint() != fingerprint:
        fingerprint += f" as imported at the start (files on disk are {solver_fingerprint()} by the end)"
    lines = header_lines(args, measured, fingerprint, warm_settings, rest_settings) + [table, ""]
    lines += detail_lines(args, measured, summary, warm_settings, numpy_settings)
    lines += extra_sections(args, measured, base, warm_settings, rest_settings, summary.baseline)
    lines += ["", f"Bench wall time {time.perf_counter() - started:.0f} s."]
    markdown = "\n".join(lines)
    print()
    print(markdown)
    if not args.no_write and not args.quick:
        write_results(markdown)


if __name__ == "__main__":
    main(sys.argv[1:])
