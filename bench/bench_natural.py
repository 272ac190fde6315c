"""`make bench` (naturalness): how much the bodies the solvers build look like the captured person.

bench_solver.py shows that EWBIK reaches its pins; this bench asks what the rest of the body does
meanwhile. Same test as there: every `--stride`-th frame of the CMU clips, hands, feet and head
pinned (position + orientation), hips given, warm-started from the previous solution and also
solved from rest. For every bone between the hips and a pin that neither is pinned nor hangs
directly off the given hips (its head is then fixed), the head is a "free joint": clavicles,
shoulders, elbows, wrists, hip joints, knees, spine and neck. Against the captured pose it reports

- the mean distance of the free joints from their captured positions (mm on the 1.75 m rig),
- the share of frames where an elbow or knee bends the wrong way (bend-plane normal more than
  90 deg from the captured one; a limb bent less than 10 deg in either pose has no bend plane
  and is not counted, and a frame with no countable limb is left out),
- the jitter the solver adds: mean |second difference| of the free joints over consecutive
  sampled frames, minus the captured clip's at the same step (mm per frame^2),
- the pins' p95 errors and the median CPU ms per frame (process time, steadier than wall time
  on a shared machine; Blender's sums its depsgraph threads),

for EWBIK without limits, with the humanoid preset, with limits fitted on the other clip, with
the preset on a straight-line rest (built from the clip's first frame), and for Blender's IK
(bench/blender_ik.py in the bpy-5.2 venv, measured against its own captured joints, so both
sides compare in their own space). Runs whose API is not in the solver yet print "skipped".

Hips-free runs give the solver no hips: only hands, feet and head are pinned, root translation
is on, and every frame (warm runs: the first) starts from the clip's first frame, hips included,
as Blender starts from the pose underneath. Their own table puts them beside the runs that give
the hips, and adds where the solved hips land (mean distance from the captured hips' head).
`--runs TEXT...` solves only the runs whose label contains one of the texts, `--no-blender` and
`--no-one-pose` leave those parts out, `--no-write` keeps docs/BENCHMARKS.md as it is.
Results go to stdout and into docs/BENCHMARKS.md between the naturalness markers.
"""

import argparse
import dataclasses
import os
import sys
import time

import numpy as np

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
if __package__:  # imported as bench.bench_natural: sys.path stays as the importer set it
    from . import bench_solver as bs
else:  # run as a script
    sys.path.insert(0, os.path.dirname(BENCH_DIR))
    sys.path.insert(0, BENCH_DIR)
    import bench_solver as bs  # noqa: E402
from solver import SolverSettings, preset_limits, preset_stiffness, solve  # noqa: E402
from tests.support import mocap  # noqa: E402
from tests.support.kusudamas import joint_limits  # noqa: E402
from tests.support.mocap_frames import (  # noqa: E402
    EFFECTORS,
    HIPS,
    RIG_HEIGHT,
    FrameSolve,
    frame_pins,
    hips_given_start,
    load_clip,
    solve_sequence,
)
from tests.support.natural_measures import (  # noqa: E402
    BEND_MIN_DEG,
    Solved,
    body_of,
    captured_heads,
    heads_of,
    measure,
)

NATURAL_BEGIN = "<!-- bench:natural -->"
NATURAL_END = "<!-- /bench:natural -->"
TARGETS = {
    "hips_free_mm": 50.0,
    "free_vs_blender": 0.6,
    "flip_share": 0.05,
    "limited_pins_p95_mm": 2.0,
    "unlimited_warm_pins_p95_mm": 0.5,
    "limited_ms_ratio": 2.0,
}
BLENDER_VENV = "bpy-5.2"


class Skipped(Exception):
    """A run that cannot be made yet (its solver API is not there); the table prints why."""


def solve_rows(
    clip, body, truth, settings, rest_settings, limits, warm, start=None, stiff=None, hips_free=False
):
    """Solve the sampled frames in order (`solve_sequence`: warm from the previous
    solution, seeded from `start`; otherwise every frame from `start`). `stiff`: {bone:
    stiffness} beside the given hips. `hips_free`: the hips are solved too (`hips_free_sequence`)."""
    stiffness = np.zeros(len(clip.skeleton))
    for name, value in (stiff or {}).items():
        stiffness[clip.skeleton.index[name]] = value
    hips = clip.skeleton.index[HIPS]
    if hips_free:
        sequence = hips_free_sequence(clip, settings, warm, rest_settings, limits, stiffness)
    else:
        stiffness[hips] = 1.0
        sequence = solve_sequence(clip, settings, warm, rest_settings, limits, stiffness, start=start)
    out = {"heads": [], "position_mm": [], "orientation_deg": [], "cpu_ms": [], "pelvis_mm": []}
    pelvis = captured_pelvis(clip)
    for solved in sequence:
        result = solved.result
        out["heads"].append(heads_of(clip, body, result.rotations, result.locations))
        out["position_mm"].append(result.position_errors * 1e3)
        out["orientation_deg"].append(result.orientation_errors_deg)
        out["cpu_ms"].append(solved.cpu_ms)
        solved_pelvis = clip.skeleton.forward(result.rotations, result.locations)[1][hips]
        out["pelvis_mm"].append(1e3 * np.linalg.norm(solved_pelvis - pelvis[solved.row]))
    if not hips_free:
        del out["pelvis_mm"]
    counted = slice(1, None) if warm else slice(None)
    return Solved(truth=truth[counted], **{k: np.array(v) for k, v in out.items()})


def captured_pelvis(clip):
    """(frames, 3) the captured hips' heads at the clip's sampled frames."""
    hips = clip.skeleton.index[HIPS]
    return np.array(
        [
            clip.skeleton.forward(*hips_given_start(clip, row, clip.clip_rotations[row]))[1][hips]
            for row in range(len(clip.frames))
        ]
    )


def hips_free_sequence(clip, settings, warm, rest_settings, limits, stiffness):
    """`solve_sequence` with the hips solved: only hands, feet and head pinned, root
    translation on, each row (warm: the first, not counted) solved from the clip's first frame,
    hips included, as Blender solves from the pose underneath; warm rows from the previous
    solution. Yields `FrameSolve`s."""
    start = hips_given_start(clip, 0, clip.clip_rotations[0])
    settings, rest_settings = (dataclasses.replace(s, translate_root=True) for s in (settings, rest_settings))
    previous = None
    for row in range(len(clip.frames)):
        pins = frame_pins(clip, row)
        seeding = warm and previous is None
        rotations, locations = start if previous is None else previous
        used = rest_settings if seeding else settings
        started = time.process_time()
        result = solve(clip.skeleton, pins, rotations, locations, used, limits=limits, stiffness=stiffness)
        cpu_ms = (time.process_time() - started) * 1e3
        if warm:
            previous = (result.rotations, result.locations)
        if not seeding:
            yield FrameSolve(row, rotations, locations, used, result, cpu_ms, 0.0)


def no_limits(source, stride):
    return source["clip"], None, {}


def humanoid_preset(source, stride):
    """The preset as Presets > Humanoid sets it: limits, and the stiffness it gives some roles."""
    clip = source["clip"]
    return clip, joint_limits(clip.skeleton.names, preset_limits(clip.bones)), preset_stiffness(clip.bones)


def fitted_on_other_clip(source, stride):
    try:
        from solver import fit_limits
    except ImportError:
        raise Skipped("solver.fit_limits is not merged yet") from None
    other = source["other"]
    if other is None:
        raise Skipped("needs a second clip to fit on")
    return (
        source["clip"],
        joint_limits(source["clip"].skeleton.names, fit_limits(other.bones, other.rotations)),
        {},
    )


def straight_rest_clip(source, stride):
    """(the clip on a straight-line rest rig, that rig's Mocap); Skipped while mocap.py lacks it."""
    straight_line_rest = getattr(mocap, "straight_line_rest", None)
    if straight_line_rest is None:
        raise Skipped("tests/support/mocap.py has no straight_line_rest yet")
    straight = straight_line_rest(source["mocap"])
    return load_clip(source["clip"].path, stride, loaded=straight), straight


def no_limits_on_straight_rest(source, stride):
    """What starting from a straight line costs by itself, for the limited runs on that rig."""
    return straight_rest_clip(source, stride)[0], None, {}


def preset_on_straight_rest(source, stride):
    """The preset built from a straight-line rest alone: what a rig without a natural rest gets."""
    clip, straight = straight_rest_clip(source, stride)
    try:
        return (
            clip,
            joint_limits(clip.skeleton.names, preset_limits(straight.bones)),
            preset_stiffness(straight.bones),
        )
    except ValueError as error:
        raise Skipped(f"the preset refuses this rest ({error})") from None


def preset_on_straight_rest_with_pose(source, stride):
    """The preset on the straight-line rest, oriented by the clip's first frame."""
    clip, straight = straight_rest_clip(source, stride)
    first = {
        b["name"]: {
            "rotation": straight.rotations[0, k].tolist(),
            "location": straight.locations[0, k].tolist(),
        }
        for k, b in enumerate(straight.bones)
    }
    try:
        per_bone = preset_limits(straight.bones, pose=first)
    except TypeError as error:
        raise Skipped(f"preset_limits takes no pose yet ({error})") from None
    return clip, joint_limits(clip.skeleton.names, per_bone), preset_stiffness(straight.bones)


# (label, how to build the clip and limits, whether the targets for limited runs apply, where solves
# start: "rest", "first frame" (a straight-line rest is no body to start from) or "hips free" (the
# first frame too, hips and all, and the hips solved with root translation on: `hips_free_sequence`))
EWBIK_RUNS = (
    ("EWBIK, no limits", no_limits, False, "rest"),
    ("EWBIK, humanoid preset", humanoid_preset, True, "rest"),
    ("EWBIK, humanoid preset, solves start from the first frame", humanoid_preset, False, "first frame"),
    (
        "EWBIK, humanoid preset, hips free, solves start from the first frame",
        humanoid_preset,
        False,
        "hips free",
    ),
    ("EWBIK, limits fitted on the other clip", fitted_on_other_clip, True, "rest"),
    (
        "EWBIK, limits fitted on the other clip, hips free, solves start from the first frame",
        fitted_on_other_clip,
        False,
        "hips free",
    ),
    ("EWBIK, no limits, straight-line rest", no_limits_on_straight_rest, False, "rest"),
    ("EWBIK, humanoid preset, straight-line rest", preset_on_straight_rest, False, "rest"),
    (
        "EWBIK, humanoid preset, straight-line rest + first frame as pose, solves start from the first frame",
        preset_on_straight_rest_with_pose,
        True,
        "first frame",
    ),
    (
        "EWBIK, humanoid preset, straight-line rest + first frame as pose, solves start from the straight line",
        preset_on_straight_rest_with_pose,
        False,
        "rest",
    ),
)
HIPS_GIVEN = {  # each hips-free run beside the run that gives the same solves their hips
    "EWBIK, humanoid preset, hips free, solves start from the first frame": (
        "EWBIK, humanoid preset, solves start from the first frame"
    ),
    "EWBIK, limits fitted on the other clip, hips free, solves start from the first frame": (
        "EWBIK, limits fitted on the other clip"
    ),
}


def run_blender(python, clip, body, repeats):
    """({"warm": Solved, "rest": Solved}, the bpy run's document) for Blender's IK on the clip."""
    doc = bs.blender_ik_document(
        python, clip, repeats, "--modes", "rest,warm", "--joints", ",".join(body.joints)
    )
    truth = np.array(doc["captured_heads"])
    solved = {}
    for mode, data in doc["modes"].items():
        counted = slice(1, None) if mode == "warm" else slice(None)
        solved[mode] = Solved(
            heads=np.array(data["heads"])[counted],
            truth=truth[counted],
            position_mm=np.array(data["position_error"])[counted] * 1e3,
            orientation_deg=np.array(data["orientation_error_deg"])[counted],
            cpu_ms=np.array(data["cpu_ms"])[counted],
        )
    return solved, doc


def load_sources(names, stride):
    """Per clip: its Mocap, its sampled bench Clip and the Mocaps of the other clips (for fitting)."""
    mocaps = {name: mocap.load_bvh(os.path.join(bs.MOCAP_DIR, name), height=RIG_HEIGHT) for name in names}
    return [
        {
            "mocap": mocaps[name],
            "clip": load_clip(os.path.join(bs.MOCAP_DIR, name), stride, loaded=mocaps[name]),
            "other": next((mocaps[n] for n in names if n != name), None),
        }
        for name in names
    ]


def run_ewbik(make, starts, sources, stride, warm_settings, rest_settings):
    """({clip name: {"warm": Solved, "rest": Solved}}, {clip name: {bone: share of test frames whose
    captured pose lies over 1 deg outside the limits}}) for one EWBIK configuration (raises Skipped);
    `starts` as EWBIK_RUNS says."""
    out, outside = {}, {}
    for source in sources:
        clip, limits, stiffness = make(source, stride)
        start = None if starts == "rest" else clip.clip_rotations[0]
        body = body_of(clip.skeleton)
        truth = captured_heads(clip, body)
        out[clip.name] = {
            mode: solve_rows(
                clip,
                body,
                truth,
                warm_settings,
                rest_settings,
                limits,
                mode == "warm",
                start,
                stiffness,
                starts == "hips free",
            )
            for mode in ("warm", "rest")
        }
        if limits is not None:
            outside[clip.name] = bs.clip_violations(clip, limits)
    return out, outside


def measured(results, body):
    """{label: {clip name or "all": {mode: Measures}}}, skipping the skipped runs."""
    out = {}
    for label, per_clip in results.items():
        if isinstance(per_clip, str):
            continue
        out[label] = {
            name: {mode: measure([s], body) for mode, s in modes.items()} for name, modes in per_clip.items()
        }
        out[label]["all"] = {
            mode: measure([modes[mode] for modes in per_clip.values()], body) for mode in ("warm", "rest")
        }
    return out


def pair(values, fmt):
    return " / ".join(format(v, fmt) for v in values)


def table(results, numbers, blender_label):
    header = [
        "run",
        "clip",
        "free joints mm warm / rest",
        "x Blender warm / rest",
        "wrong-way bends % warm / rest",
        "added jitter mm/frame^2 warm / rest",
        "pins p95 mm warm / rest",
        "pins p95 deg warm / rest",
        "CPU ms median warm / rest",
        "frames warm / rest",
    ]
    rows = []
    for label, per_clip in results.items():
        if isinstance(per_clip, str):
            rows.append([label, f"skipped: {per_clip}"] + [""] * (len(header) - 2))
            continue
        for name, modes in numbers[label].items():
            m = [modes["warm"], modes["rest"]]
            reference = numbers.get(blender_label, {}).get(name)
            ratio = (
                pair(
                    [m[k].free_mm / reference[mode].free_mm for k, mode in enumerate(("warm", "rest"))], ".2f"
                )
                if reference
                else "n/a"
            )
            rows.append(
                [
                    label,
                    name,
                    pair([x.free_mm for x in m], ".1f"),
                    ratio,
                    pair([100 * x.flip_share for x in m], ".1f"),
                    pair([x.jitter_mm for x in m], ".2f"),
                    pair([x.pins_p95_mm for x in m], ".3f"),
                    pair([x.pins_p95_deg for x in m], ".3f"),
                    pair([x.cpu_ms for x in m], ".2f"),
                    pair([x.frames for x in m], "d"),
                ]
            )
    return bs.markdown_table(header, rows)


def limb_table(numbers, body):
    """Wrong-way bends per elbow and knee over all clips: which limb flips."""
    limbs = [body.joints[k] for k in body.bends[:, 1]]
    rows = [
        [label]
        + [
            pair([100 * per_clip["all"][m].limb_flip_shares[k] for m in ("warm", "rest")], ".1f")
            for k in range(len(limbs))
        ]
        for label, per_clip in numbers.items()
    ]
    return bs.markdown_table(["run"] + [f"{name} % warm / rest" for name in limbs], rows)


def outside_lines(outside, shown=6):
    """One line per limited run and clip: the bones whose captured pose most often leaves the limits
    (runs with the same limits as an earlier one are left out)."""
    lines, seen = [], []
    for label, per_clip in outside.items():
        if per_clip in seen:
            continue
        seen.append(per_clip)
        for name, shares in per_clip.items():
            worst = sorted(shares.items(), key=lambda kv: -kv[1])[:shown]
            text = ", ".join(f"{bone} {100 * share:.0f}%" for bone, share in worst) or "none"
            lines.append(f"- {label}, {name}: {text}")
    return lines


def check(name, values, limit):
    """A pass/fail line: every value (warm / rest, or per clip) at most `limit`."""
    ok = all(v <= limit for v in values)
    return f"- {name}: {pair(values, '.3f')} (target <= {limit:.3g}) {'PASS' if ok else 'FAIL'}"


def limited_checks(label, numbers, blender_label, unlimited_label):
    """The naturalness targets of one run with limits, against Blender and the unlimited run."""
    run, modes = numbers[label], ("warm", "rest")
    lines = [
        check(
            f"{label}: pins p95 mm, warm / rest",
            [run["all"][m].pins_p95_mm for m in modes],
            TARGETS["limited_pins_p95_mm"],
        ),
        check(
            f"{label}: wrong-way bends share of frames, warm / rest",
            [run["all"][m].flip_share for m in modes],
            TARGETS["flip_share"],
        ),
    ]
    if unlimited_label in numbers:
        lines.append(
            check(
                f"{label}: warm CPU ms / no-limits warm CPU ms",
                [run["all"]["warm"].cpu_ms / numbers[unlimited_label]["all"]["warm"].cpu_ms],
                TARGETS["limited_ms_ratio"],
            )
        )
    blender = numbers.get(blender_label)
    if blender is None:
        return lines + [f"- {label}: Blender comparisons skipped (no Blender run)"]
    ratios = {name: [run[name][m].free_mm / blender[name][m].free_mm for m in modes] for name in run}
    lines.append(
        check(
            f"{label}: free joints / Blender's, all clips, warm / rest",
            ratios["all"],
            TARGETS["free_vs_blender"],
        )
    )
    lines.append(
        check(
            f"{label}: free joints / Blender's, worst clip, warm / rest",
            [max(r[k] for name, r in ratios.items() if name != "all") for k in range(2)],
            1.0,
        )
    )
    lines.append(
        check(
            f"{label}: added jitter minus Blender's (mm/frame^2), warm / rest",
            [run["all"][m].jitter_mm - blender["all"][m].jitter_mm for m in modes],
            0.0,
        )
    )
    return lines


def target_lines(results, numbers, blender_label):
    unlimited = EWBIK_RUNS[0][0]
    lines = ["Targets:"]
    if unlimited in numbers:
        lines.append(
            check(
                f"{unlimited}: warm pins p95 mm",
                [numbers[unlimited]["all"]["warm"].pins_p95_mm],
                TARGETS["unlimited_warm_pins_p95_mm"],
            )
        )
    for label, _, checked, _ in EWBIK_RUNS:
        if not checked:
            continue
        if label in numbers:
            lines += limited_checks(label, numbers, blender_label, unlimited)
        else:
            lines.append(f"- {label}: skipped: {results[label]}")
    return lines


def hips_free_lines(numbers):
    """The hips-free runs beside their hips-given counterparts (`HIPS_GIVEN`): where the solved
    hips land, the free joints and the added jitter, and the targets they are held to."""
    header = [
        "run (hips free)",
        "clip",
        "hips mm warm / rest",
        "free joints mm warm / rest",
        "hips given: free joints mm warm / rest",
        "added jitter mm/frame^2 warm / rest",
        "hips given: added jitter warm / rest",
        "pins p95 mm warm / rest",
        "wrong-way bends % warm / rest",
        "CPU ms median warm / rest",
    ]
    rows, checks = [], []
    for label, given_label in HIPS_GIVEN.items():
        if label not in numbers:
            continue
        given = numbers.get(given_label, {})
        for name, modes in numbers[label].items():
            m = [modes[mode] for mode in ("warm", "rest")]
            g = [given[name][mode] for mode in ("warm", "rest")] if name in given else None
            rows.append(
                [
                    label,
                    name,
                    pair([x.pelvis_mm for x in m], ".1f"),
                    pair([x.free_mm for x in m], ".1f"),
                    pair([x.free_mm for x in g], ".1f") if g else "n/a",
                    pair([x.jitter_mm for x in m], ".2f"),
                    pair([x.jitter_mm for x in g], ".2f") if g else "n/a",
                    pair([x.pins_p95_mm for x in m], ".3f"),
                    pair([100 * x.flip_share for x in m], ".1f"),
                    pair([x.cpu_ms for x in m], ".2f"),
                ]
            )
        warm, rest = (numbers[label]["all"][mode] for mode in ("warm", "rest"))
        limit = TARGETS["hips_free_mm"]
        for quantity, field in (
            ("hips mm", "pelvis_mm"),
            ("free joints mm", "free_mm"),
            ("added jitter mm/frame^2", "jitter_mm"),
        ):
            checks.append(
                check(
                    f"{label}: {quantity} from the first frame, as the add-on solves "
                    f"(warm-started, for comparison: {getattr(warm, field):.1f})",
                    [getattr(rest, field)],
                    limit,
                )
            )
    if not rows:
        return []
    return [
        "Hips free: only hands, feet and head pinned, root translation on, every frame (warm: the "
        "first) solved from the clip's first frame, hips included:",
        "",
        bs.markdown_table(header, rows),
        "",
        *checks,
        "",
    ]


ONE_POSE_RUNS = (
    ("EWBIK, humanoid preset", humanoid_preset),
    ("EWBIK, limits fitted on the other clip", fitted_on_other_clip),
)
ONE_POSE_STRIDES = (4, 10)


def passes_apart(clip, body, settings, limits, stiffness, warm):
    """(mean mm, max mm) between the joints solved forward and backward over the sampled frames:
    what a solve keeps of its history (0 when each frame depends on its targets alone)."""
    stiff = np.zeros(len(clip.skeleton))
    for name, value in (stiffness or {}).items():
        stiff[clip.skeleton.index[name]] = value
    stiff[clip.skeleton.index[HIPS]] = 1.0
    rows = np.arange(len(clip.frames))
    heads = {}
    for order in (rows, rows[::-1]):
        for solved in solve_sequence(clip, settings[0], warm, settings[1], limits, stiff, rows=order):
            result = solved.result
            heads.setdefault(solved.row, []).append(heads_of(clip, body, result.rotations, result.locations))
    apart = np.array(
        [np.linalg.norm(pair[0] - pair[1], axis=-1) for pair in heads.values() if len(pair) == 2]
    )
    return 1e3 * float(apart.mean()), 1e3 * float(apart.max())


def one_pose_lines(args, settings, body):
    """The one-pose table: per configuration, history (forward vs backward) and added jitter at
    each stride, for solves from the pose underneath (what live solving, Solve and the bake run)
    and, for comparison, warm-started ones; Blender's IK from the pose underneath (its own way)."""
    lines = [
        "One pose per set of targets (each frame solved from the pose underneath: rest, hips given), "
        "against solves warm-started from the previous frame and Blender's IK:",
        "",
        "| run | stride | history mean / max mm, from the pose underneath | history mean / max mm, warm |"
        " added jitter mm/frame^2, from the pose underneath / warm | Blender's IK jitter, from the pose "
        "underneath / warm |",
        "|---|---|---|---|---|---|",
    ]
    for stride in ONE_POSE_STRIDES:
        sources = load_sources(args.clips, stride)
        blender = {} if args.no_blender else run_all_blender(sources, body, 1)[0]
        blender_measures = (
            {mode: measure([m[mode] for m in blender.values()], body) for mode in ("rest", "warm")}
            if isinstance(blender, dict) and blender
            else None
        )
        for label, make in ONE_POSE_RUNS:
            per_clip, _ = run_ewbik(make, "rest", sources, stride, *settings)
            jitter = {
                mode: measure([m[mode] for m in per_clip.values()], body).jitter_mm
                for mode in ("rest", "warm")
            }
            history = {}
            for warm in (False, True):
                spans = [
                    passes_apart(clip, body, settings, limits, stiff, warm)
                    for clip, limits, stiff in (make(source, stride) for source in sources)
                ]
                history[warm] = (np.mean([m for m, _ in spans]), max(x for _, x in spans))
            theirs = (
                pair((blender_measures["rest"].jitter_mm, blender_measures["warm"].jitter_mm), ".2f")
                if blender_measures
                else "n/a"
            )
            lines.append(
                f"| {label} | {stride} | {pair(history[False], '.2f')} | {pair(history[True], '.1f')} | "
                f"{pair((jitter['rest'], jitter['warm']), '.2f')} | {theirs} |"
            )
    return lines + [""]


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stride", type=int, default=4, help="solve every STRIDE-th clip frame")
    parser.add_argument("--clips", nargs="*", default=list(bs.CLIPS))
    parser.add_argument(
        "--blender-repeats", type=int, default=3, help="timing passes of Blender's IK per frame"
    )
    parser.add_argument("--no-blender", action="store_true")
    parser.add_argument(
        "--runs", nargs="*", help="run only the EWBIK runs whose label contains one of these texts"
    )
    parser.add_argument("--no-write", action="store_true", help="do not update docs/BENCHMARKS.md")
    parser.add_argument(
        "--no-one-pose",
        action="store_true",
        help="leave out the one-pose table (solves each clip 8 more times)",
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: every 32nd frame; writes no files")
    return parser.parse_args(argv)


def run_all_blender(sources, body, repeats):
    """({clip name: {mode: Solved}}, one bpy document, max mm between Blender's and the solver's captured
    joints) or (a skip reason, None, None) when the bpy venv is missing."""
    python = os.path.join(bs.VENV_DIR, BLENDER_VENV, "bin", "python")
    if not os.path.exists(python):
        return f"no interpreter at {python}", None, None
    per_clip, doc, mismatch = {}, None, 0.0
    for source in sources:
        clip = source["clip"]
        t = time.perf_counter()
        per_clip[clip.name], doc = run_blender(python, clip, body, repeats)
        mismatch = max(
            mismatch, 1e3 * float(np.abs(np.array(doc["captured_heads"]) - captured_heads(clip, body)).max())
        )
        print(f"{clip.name}: Blender {doc['blender']} in {time.perf_counter() - t:.1f} s", flush=True)
    return per_clip, doc, mismatch


def straight_rest_mismatch(sources, body, stride):
    """Max mm between the captured joints on the straight-line rest rig and on the clip's own rig
    (the straight rig must pose the same body), or None while there is no straight-line rest."""
    try:
        rigs = [(straight_rest_clip(source, stride)[0], source["clip"]) for source in sources]
    except Skipped:
        return None
    return max(
        1e3 * float(np.abs(captured_heads(straight, body) - captured_heads(own, body)).max())
        for straight, own in rigs
    )


def notes(args, sources, body, settings, blender_doc, mismatch):
    clip_text = ", ".join(f"{s['clip'].name} ({len(s['clip'].frames)} frames)" for s in sources)
    lines = [
        f"Machine: {bs.machine_line(bs.solver_fingerprint())}",
        "",
        f"Clips: {clip_text}: one clip frame in {args.stride}; pins {', '.join(EFFECTORS)} (position + "
        f"orientation), hips given. Free joints: {', '.join(body.joints[k] for k in body.free)}.",
        f"EWBIK warm: {bs.settings_text(settings[0])}; from rest: iterations={settings[1].iterations}.",
        f"Wrong-way bends: elbows and knees; a limb bent under {BEND_MIN_DEG:.0f} deg (solved or captured) is "
        f"not counted; share of frames with a countable limb where any countable limb flips.",
    ]
    straight = straight_rest_mismatch(sources, body, args.stride)
    if straight is not None:
        lines.append(
            f"The straight-line rest rig poses the captured joints within {straight:.3f} mm of the clip's own rig."
        )
    if blender_doc is not None:
        lines.append(
            f"Blender {blender_doc['blender']}: Standard IK, {blender_doc['iterations']} iterations, measured "
            f"against its own captured joints (they match the solver's within {mismatch:.3f} mm); its warm "
            f"start is the previous IK result written to the pose channels."
        )
    return lines + [""]


def main(argv=None):
    args = parse_args(argv)
    if args.quick:
        args.stride, args.no_write, args.blender_repeats = 32, True, 1
    started = time.perf_counter()
    settings = (SolverSettings(iterations=50, tolerance=1e-5), SolverSettings(iterations=500, tolerance=1e-5))
    sources = load_sources(args.clips, args.stride)
    body = body_of(sources[0]["clip"].skeleton)
    results, outside = {}, {}
    for label, make, _, starts in EWBIK_RUNS:
        if args.runs and not any(text in label for text in args.runs):
            results[label] = "not selected (--runs)"
            continue
        t = time.perf_counter()
        try:
            results[label], outside[label] = run_ewbik(make, starts, sources, args.stride, *settings)
        except Skipped as why:
            results[label] = str(why)
        print(f"{label}: {time.perf_counter() - t:.1f} s", flush=True)
    blender_label = "Blender IK (Standard)"
    blender, doc, mismatch = (
        ("--no-blender", None, None)
        if args.no_blender
        else run_all_blender(sources, body, args.blender_repeats)
    )
    results[blender_label] = blender
    numbers = measured(results, body)
    lines = notes(args, sources, body, settings, doc, mismatch)
    lines += [table(results, numbers, blender_label), ""] + target_lines(results, numbers, blender_label)
    lines += [""] + hips_free_lines(numbers)
    if not (args.quick or args.no_one_pose):
        lines += [""] + one_pose_lines(args, settings, body)
    lines += [
        "",
        "Captured pose outside the limits by more than 1 deg (share of test frames; bones the pins move):",
        "",
    ]
    lines += outside_lines(outside)
    lines += [
        "",
        "Wrong-way bends by limb (share of the frames where that limb is countable):",
        "",
        limb_table(numbers, body),
    ]
    lines += ["", f"Bench wall time {time.perf_counter() - started:.0f} s."]
    markdown = "\n".join(lines)
    print()
    print(markdown)
    if not args.no_write:
        bs.write_results(markdown, NATURAL_BEGIN, NATURAL_END)


if __name__ == "__main__":
    main(sys.argv[1:])
