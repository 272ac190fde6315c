"""Live-handler benchmark: what one target move costs with EWBIK live vs Blender's IK.

Run with the Python of a bpy venv, e.g. `~/.cache/ewbik/venvs/bpy-5.2/bin/python bench/bench_live.py`.
Builds the extension zip and installs it into a throw-away user-resources
directory, like the Blender tests do. On the Rigify human metarig (its bones
span 1.98 m from the feet to the top of the head) hands, feet and head (`spine.006`) are
pinned with `ewbik.pin`, and the targets are dragged along a scripted motion:
each step moves the five empties and calls `view_layer.update()`, which is the
depsgraph evaluation plus the live handler's solve and its write-back; that call
is timed (wall and process CPU time, the machine being shared), and after it
every pin's error is read from Blender's evaluated `pose.bones[...].matrix`.

The same motion drives a second metarig with Blender's IK constraints (Standard
solver) on the same five bones, with the extension disabled so its handler
costs Blender nothing; and once more with those constraints muted, which is the
depsgraph's fixed cost. Blender's Standard solver cannot move the root `spine`,
so EWBIK's `spine` gets stiffness 1 and Blender's chains end just below it:
both solvers move exactly the same bones.

The 1000-bone rows drag the same five targets over the metarig grown to 1000 bones: chains of
extra bones hang from the chest and the hips (accessories a production rig carries: cloth,
straps, face), so the pinned chains, the targets and the solve are the metarig's while every
per-bone cost (pose read and write, Blender's evaluation) is paid for 1000 bones.

What each control (pole, aim, soft reach, stretch, Balance) adds is measured apart, in pairs of
back-to-back drags of the control's row and its baseline's, and held to 0.2 ms.

Results go to stdout and into docs/BENCHMARKS.md between the live markers.
"""

import os
import pathlib
import sys
import tempfile

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
USER_RESOURCES = tempfile.mkdtemp(prefix="ewbik-bench-live-")
os.environ["BLENDER_USER_RESOURCES"] = USER_RESOURCES  # before bpy: never touch the real config

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import itertools  # noqa: E402
import math  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402

import bpy  # noqa: E402  (first: it makes addon_utils importable)

# isort: split
import addon_utils  # noqa: E402
import numpy as np  # noqa: E402
from mathutils import Euler, Matrix, Vector  # noqa: E402

sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "bench"))
from bench_solver import machine_line, markdown_table, solver_fingerprint, stats  # noqa: E402
from blender_ik import rotation_angle_deg  # noqa: E402

from solver import SolverSettings  # noqa: E402
from tests.support.blender_helpers import (  # noqa: E402
    addon_module,
    build_metarig,
    disable_extension,
    enable_extension,
    extension_enabled,
    load_build_tool,
    make_active,
    pin,
    select_pose_bones,
)

BENCHMARKS_MD = REPO_ROOT / "docs" / "BENCHMARKS.md"
LIVE_BEGIN = "<!-- bench:live -->"
LIVE_END = "<!-- /bench:live -->"
PINS = ("hand.L", "hand.R", "foot.L", "foot.R", "spine.006")
ROOT = "spine"
BLENDER_IK_ITERATIONS = 500
LARGE_RIG_BONES = 1000
EXTRA_CHAIN_BONES = 20  # bones per extra chain of the 1000-bone rig
EXTRA_CHAIN_PARENTS = ("spine.003", "spine")

# The drag, as key poses the figure passes through in order (smoothstep between keys): per bone,
# a turn in degrees about the armature's X, Y, Z axes (XYZ Euler) as seen in the rest pose.
# The targets are the pinned bones' pose matrices along this motion, so every target is
# reachable, with the root where it is. X bends the spine, neck and knees forward, Z swings
# the arms forward and turns the head; the figure faces -Y and its left is +X.
KEY_POSES = (
    {},
    {  # crouch, lean in and reach forward with both hands, head bowed
        "thigh.L": (-70, 0, 0),
        "shin.L": (110, 0, 0),
        "foot.L": (-40, 0, 0),
        "thigh.R": (-70, 0, 0),
        "shin.R": (110, 0, 0),
        "foot.R": (-40, 0, 0),
        "spine.001": (8, 0, 0),
        "spine.002": (8, 0, 0),
        "spine.003": (8, 0, 0),
        "spine.006": (15, 0, 0),
        "upper_arm.L": (0, 0, -60),
        "forearm.L": (0, 0, -50),
        "hand.L": (0, 0, -20),
        "upper_arm.R": (0, 0, 60),
        "forearm.R": (0, 0, 50),
        "hand.R": (0, 0, 20),
    },
    {  # head turns left, left hand reaches up, right hand down, weight on the right leg
        "thigh.L": (-30, 0, 0),
        "shin.L": (50, 0, 0),
        "foot.L": (-20, 0, 0),
        "spine.001": (0, -5, 10),
        "spine.002": (0, -5, 10),
        "spine.003": (0, -5, 10),
        "spine.004": (0, 0, 15),
        "spine.005": (0, 0, 15),
        "spine.006": (0, 0, 15),
        "upper_arm.L": (0, -60, -40),
        "forearm.L": (0, 0, -30),
        "hand.L": (30, 0, 0),
        "upper_arm.R": (0, -60, 0),
        "forearm.R": (0, 0, 40),
        "hand.R": (0, 0, -30),
    },
    {  # head turns right, hands cross in front of the chest, a shallow crouch
        "thigh.L": (-40, 0, 0),
        "shin.L": (70, 0, 0),
        "foot.L": (-30, 0, 0),
        "thigh.R": (-40, 0, 0),
        "shin.R": (70, 0, 0),
        "foot.R": (-30, 0, 0),
        "spine.004": (0, 0, -13),
        "spine.005": (0, 0, -13),
        "spine.006": (0, 0, -13),
        "upper_arm.L": (0, 0, -80),
        "forearm.L": (0, 0, -70),
        "hand.L": (0, 30, 0),
        "upper_arm.R": (0, 0, 80),
        "forearm.R": (0, 0, 70),
        "hand.R": (0, -30, 0),
    },
    {},  # back to the rest pose
)


CONTROL_TARGET_MS = 0.2  # what each control may add to a median live update, wall ms


@dataclasses.dataclass(frozen=True)
class Config:
    """One row of the table: which IK drives the pinned bones, and how."""

    label: str
    kind: str  # "ewbik", "blender" or "none"
    time_budget_ms: float = 4.0
    iterations: int = SolverSettings().iterations  # the armature's default
    limits: bool = False
    bones: int = 159  # the metarig's own; more: extra chains (`grow_rig`)
    control: str = ""  # one control on top of the default row (`with_control`)


CONFIGS = (
    Config("EWBIK live, 10 ms budget (the default)", "ewbik", time_budget_ms=10.0),
    Config("EWBIK live, 4 ms budget", "ewbik"),
    Config("EWBIK live, 4 ms budget, humanoid limits", "ewbik", limits=True),
    Config("EWBIK live, no budget (15 iterations)", "ewbik", time_budget_ms=0.0, iterations=15),
    Config(
        "EWBIK live, no budget (15 iterations), humanoid limits",
        "ewbik",
        time_budget_ms=0.0,
        limits=True,
        iterations=15,
    ),
    *(
        Config(f"EWBIK live, 10 ms budget, {control}", "ewbik", time_budget_ms=10.0, control=control)
        for control in ("pole", "aim", "soft reach", "stretch", "root free", "root free + balance")
    ),
    Config(f"Blender IK, Standard ({BLENDER_IK_ITERATIONS} iterations)", "blender"),
    Config("no IK (Blender constraints muted)", "none"),
    Config(
        f"EWBIK live, 10 ms budget, {LARGE_RIG_BONES} bones",
        "ewbik",
        time_budget_ms=10.0,
        bones=LARGE_RIG_BONES,
    ),
    Config(
        f"Blender IK, Standard ({BLENDER_IK_ITERATIONS} iterations), {LARGE_RIG_BONES} bones",
        "blender",
        bones=LARGE_RIG_BONES,
    ),
    Config(f"no IK (Blender constraints muted), {LARGE_RIG_BONES} bones", "none", bones=LARGE_RIG_BONES),
)


@dataclasses.dataclass
class Samples:
    """Everything measured for one config, pooled over rounds: one row per update."""

    wall_ms: list = dataclasses.field(default_factory=list)
    cpu_ms: list = dataclasses.field(default_factory=list)
    position_mm: list = dataclasses.field(default_factory=list)  # per update: one value per pin
    orientation_deg: list = dataclasses.field(default_factory=list)
    # EWBIK only, wall time per update: the live handler, solve_armature inside it (read pose and
    # pins, solve, write back), and solve() inside that as it times itself (what the budget limits).
    handler_ms: list = dataclasses.field(default_factory=list)
    solve_armature_ms: list = dataclasses.field(default_factory=list)
    solve_ms: list = dataclasses.field(default_factory=list)
    solve_iterations: list = dataclasses.field(default_factory=list)


def install_extension():
    """Build the zip and install it like a user, as the test session does; enable Rigify for the metarig."""
    zip_path = load_build_tool().build(pathlib.Path(USER_RESOURCES) / "dist")
    result = bpy.ops.extensions.package_install_files(
        filepath=str(zip_path), repo="user_default", enable_on_install=True
    )
    if result != {"FINISHED"} or not extension_enabled():
        raise SystemExit(f"bench_live: installing {zip_path} failed: {result}")
    addon_utils.enable("rigify", default_set=True)


def target_path(steps):
    """World matrices of the pinned bones at steps 1..steps of the motion, by Blender's own FK.

    Poses a scratch metarig along KEY_POSES and reads the pinned bones' evaluated
    matrices. Returns (path: list of {bone: matrix}, rig height in metres).
    """
    bpy.ops.wm.read_homefile(use_empty=True)
    rig = build_metarig()
    moving = sorted({bone for key in KEY_POSES for bone in key})
    keys = []
    for key in KEY_POSES:
        rotations = {}
        for bone in moving:
            rest = rig.data.bones[bone].matrix_local.to_quaternion()
            turn = Euler([math.radians(d) for d in key.get(bone, (0, 0, 0))]).to_quaternion()
            rotations[bone] = rest.inverted() @ turn @ rest
        keys.append(rotations)
    bpy.context.view_layer.update()
    height = rig.dimensions.z
    segments = len(KEY_POSES) - 1
    path = []
    for step in range(1, steps + 1):
        position = step / steps * segments
        segment = min(int(position), segments - 1)
        u = position - segment
        ease = u * u * (3.0 - 2.0 * u)
        for bone in moving:
            rotation = keys[segment][bone].slerp(keys[segment + 1][bone], ease)
            rig.pose.bones[bone].matrix_basis = rotation.to_matrix().to_4x4()
        bpy.context.view_layer.update()
        path.append({bone: rig.matrix_world @ rig.pose.bones[bone].matrix for bone in PINS})
    return path, height


def grown_metarig(bones):
    """The metarig with chains of EXTRA_CHAIN_BONES bones added under EXTRA_CHAIN_PARENTS in turn
    until it has `bones` bones; active, in object mode."""
    rig = build_metarig()
    extra = bones - len(rig.data.bones)
    if extra <= 0:
        return rig
    bpy.ops.object.mode_set(mode="EDIT")
    edit_bones = rig.data.edit_bones
    for c in range(math.ceil(extra / EXTRA_CHAIN_BONES)):
        parent = edit_bones[EXTRA_CHAIN_PARENTS[c % len(EXTRA_CHAIN_PARENTS)]]
        side = 1.0 if c % 4 < 2 else -1.0
        head = parent.head.copy()
        for j in range(min(EXTRA_CHAIN_BONES, extra - c * EXTRA_CHAIN_BONES)):
            bone = edit_bones.new(f"extra.{c:03d}.{j:02d}")
            bone.head = head
            bone.tail = head + Matrix.Rotation(0.3 * c, 3, "Z") @ Vector((0.1 * side, 0.0, -0.01))
            bone.parent, bone.use_connect = parent, j > 0
            parent, head = bone, bone.tail.copy()
    bpy.ops.object.mode_set(mode="OBJECT")
    return rig


def ewbik_rig(config):
    """Metarig pinned with the operator; root frozen so it moves the bones Blender's IK moves.

    Returns (rig, {bone: target empty}, {bone: matrix from the bone's pose to its empty}).
    """
    enable_extension()
    bpy.ops.wm.read_homefile(use_empty=True)
    rig = grown_metarig(config.bones)
    rig.ewbik.time_budget_ms = config.time_budget_ms
    rig.ewbik.iterations = config.iterations
    rig.pose.bones[ROOT].ewbik.stiffness = 1.0
    rig.ewbik.auto_limits = False
    targets = pin(rig, *PINS)
    if config.limits and bpy.ops.ewbik.apply_limit_preset(preset="humanoid") != {"FINISHED"}:
        raise SystemExit("bench_live: ewbik.apply_limit_preset(preset='humanoid') failed")
    bpy.ops.object.mode_set(mode="OBJECT")
    with_control(rig, config.control)
    offsets = {bone: Matrix.Identity(4) for bone in PINS}
    if config.control == "aim":  # the looked-at empty half a metre along the head's own Y
        offsets["spine.006"] = Matrix.Translation((0.0, 0.5, 0.0))
    return rig, targets, offsets


def with_control(rig, control):
    """One control on the pinned metarig: a pole beside the left hand's elbow, the head an AIM pin
    (its empty half a metre along the head's Y, which it points at), soft reach 0.03,
    the arms stretching up to 1.2, or the root free (Move Root on, its stiffness 0) with or without
    Balance."""
    if control == "pole":
        bpy.context.view_layer.objects.active = rig
        bpy.ops.object.mode_set(mode="POSE")
        select_pose_bones(rig, ["hand.L"])
        rig.data.bones.active = rig.data.bones["hand.L"]
        if bpy.ops.ewbik.add_pole() != {"FINISHED"}:
            raise SystemExit("bench_live: ewbik.add_pole failed")
        bpy.ops.object.mode_set(mode="OBJECT")
    elif control == "aim":
        props = rig.pose.bones["spine.006"].ewbik
        props.pin_kind, props.aim_axis = "AIM", "Y"
    elif control == "soft reach":
        rig.ewbik.soft_reach = 0.03
    elif control == "stretch":
        for bone in ("upper_arm.L", "forearm.L", "upper_arm.R", "forearm.R"):
            rig.pose.bones[bone].ewbik.stretch = 1.2
    elif control.startswith("root free"):
        rig.ewbik.translate_root = True
        rig.pose.bones[ROOT].ewbik.stiffness = 0.0
        rig.ewbik.balance = control.endswith("balance")
    bpy.context.view_layer.update()


def blender_ik_rig(muted, bones):
    """Metarig with one IK constraint per pinned bone, the extension disabled.

    use_tail with the empty at the bone's tail: the owner bone is the chain's last
    link and its tail and rotation go to the empty, which places its head and
    rotation exactly where EWBIK's pin puts them. (Without use_tail the chain
    stops at the parent, the rotation goal applies to the parent, and the pinned
    bone keeps its own local rotation: hand.L ends ~4 degrees off.) The chains
    run down to just below the root and share the spine, so Blender merges them
    into one tree.
    """
    if extension_enabled():
        disable_extension()
    bpy.ops.wm.read_homefile(use_empty=True)
    rig = grown_metarig(bones)
    rig.pose.ik_solver = "LEGACY"
    scene = bpy.context.scene
    targets, offsets = {}, {}
    for bone in PINS:
        pose_bone = rig.pose.bones[bone]
        empty = bpy.data.objects.new(f"{bone} IK target", None)
        scene.collection.objects.link(empty)
        constraint = pose_bone.constraints.new("IK")
        constraint.target = empty
        constraint.use_tail = True
        constraint.use_rotation = True
        constraint.use_stretch = False
        constraint.iterations = BLENDER_IK_ITERATIONS
        constraint.chain_count = chain_length(pose_bone)
        constraint.enabled = not muted
        targets[bone] = empty
        offsets[bone] = Matrix.Translation((0.0, pose_bone.bone.length, 0.0))
    make_active(rig)
    return rig, targets, offsets


def chain_length(pose_bone):
    """Bones from pose_bone up to, not including, the root."""
    count = 0
    while pose_bone.name != ROOT:
        count += 1
        pose_bone = pose_bone.parent
    return count


def solve_recorder(samples):
    """Time the installed extension's live handler and the solve_armature it calls (wall), and keep
    each live solve's own time and iterations.

    Returns a function that undoes the wraps.
    """
    armature_solve = addon_module("ewbik_addon.solve.armature_solve")
    live = addon_module("ewbik_addon.solve.live")
    original = armature_solve.solve_armature
    handlers = bpy.app.handlers.depsgraph_update_post
    slot = next(i for i, handler in enumerate(handlers) if handler is live.on_depsgraph_update)

    def recording(obj, **kwargs):
        wall = time.perf_counter()
        result = original(obj, **kwargs)
        samples.solve_armature_ms.append((time.perf_counter() - wall) * 1e3)
        samples.solve_ms.append(result.ms)
        samples.solve_iterations.append(result.iterations)
        return result

    def timed_handler(scene, depsgraph):
        wall = time.perf_counter()
        live.on_depsgraph_update(scene, depsgraph)
        samples.handler_ms.append((time.perf_counter() - wall) * 1e3)

    def restore():
        armature_solve.solve_armature = original
        handlers[slot] = live.on_depsgraph_update

    armature_solve.solve_armature = recording
    handlers[slot] = timed_handler
    return restore


def wall_breakdown(samples):
    """Median wall ms per update of: solve(), the rest of solve_armature (the bridge), the rest of
    the live handler, and everything else in view_layer.update() (Blender's evaluation and the
    other handlers); None unless every update ran the handler and one solve."""
    updates = len(samples.wall_ms)
    if not (len(samples.handler_ms) == len(samples.solve_armature_ms) == updates):
        return None
    wall, handler = np.array(samples.wall_ms), np.array(samples.handler_ms)
    solve_armature, solve = np.array(samples.solve_armature_ms), np.array(samples.solve_ms)
    parts = (solve, solve_armature - solve, handler - solve_armature, wall - handler)
    return tuple(float(np.median(part)) for part in parts)


def drag(config, path, samples):
    """Build the config's rig, then move its targets along the path, timing each update."""
    if config.kind == "ewbik":
        rig, targets, offsets = ewbik_rig(config)
    else:
        rig, targets, offsets = blender_ik_rig(muted=config.kind == "none", bones=config.bones)
    view_layer = bpy.context.view_layer
    view_layer.update()
    restore = solve_recorder(samples) if config.kind == "ewbik" else None
    try:
        for frame in path:
            for bone in PINS:
                targets[bone].matrix_world = frame[bone] @ offsets[bone]
            wall, cpu = time.perf_counter(), time.process_time()
            view_layer.update()
            samples.wall_ms.append((time.perf_counter() - wall) * 1e3)
            samples.cpu_ms.append((time.process_time() - cpu) * 1e3)
            positions, angles = [], []
            for bone in PINS:
                pose = rig.matrix_world @ rig.pose.bones[bone].matrix
                positions.append((pose.translation - frame[bone].translation).length * 1e3)
                angles.append(rotation_angle_deg(np.array(frame[bone].to_3x3()), np.array(pose.to_3x3())))
            samples.position_mm.append(positions)
            samples.orientation_deg.append(angles)
    finally:
        if restore is not None:
            restore()
    if config.kind == "ewbik" and rig.ewbik.status.startswith("Live solve failed"):
        raise SystemExit(f"bench_live: {config.label}: {rig.ewbik.status}")


FIRST_UPDATES = (
    "ewbik.pin (5 bones)",
    "update, rig not cached",
    "update after a stiffness edit",
    "update after a cone edit",
    "update, targets moved",
)


def timed_update(rig, targets):
    """Wall ms of one view_layer.update() after every target moved 1 mm; fails on a live error."""
    for target in targets.values():
        target.location.z += 1e-3
    wall = time.perf_counter()
    bpy.context.view_layer.update()
    elapsed = (time.perf_counter() - wall) * 1e3
    if rig.ewbik.status_is_error:
        raise SystemExit(f"bench_live: first updates: {rig.ewbik.status}")
    return elapsed


def first_updates(limits, bones):
    """Wall ms of the updates that rebuild something, on a fresh metarig grown to `bones` bones,
    in FIRST_UPDATES order.

    Pinning builds the rig's solver objects (skeleton, limits) inside the operator; the rig cache
    is then cleared to time that build in an update as a file load or an armature edit causes it
    (each bone's Kusudama is kept per distinct limits, so only the first rig with them pays for it).
    """
    enable_extension()
    bpy.ops.wm.read_homefile(use_empty=True)
    rig = grown_metarig(bones)
    rig.ewbik.auto_limits = limits
    make_active(rig)
    bpy.ops.object.mode_set(mode="POSE")
    for bone in rig.pose.bones:
        bone.select = bone.name in PINS
    wall = time.perf_counter()
    if bpy.ops.ewbik.pin() != {"FINISHED"}:
        raise SystemExit("bench_live: first updates: ewbik.pin failed")
    times = [(time.perf_counter() - wall) * 1e3]
    bpy.ops.object.mode_set(mode="OBJECT")
    targets = {bone: rig.pose.bones[bone].ewbik.target for bone in PINS}
    timed_update(rig, targets)
    addon_module("ewbik_addon.bridge.rig_cache").clear_cache()
    times.append(timed_update(rig, targets))
    rig.pose.bones["spine.001"].ewbik.stiffness = 0.25
    times.append(timed_update(rig, targets))
    cones = rig.pose.bones["upper_arm.L"].bone.ewbik.cones
    if len(cones):
        cones[0].radius *= 0.9
        times.append(timed_update(rig, targets))
    else:
        times.append(float("nan"))
    times.append(timed_update(rig, targets))
    return times


def first_updates_table(repeats):
    """Median wall ms over `repeats` fresh rigs (the metarig, and grown to LARGE_RIG_BONES bones),
    without and with humanoid limits (on pin)."""
    rows = []
    for bones, limits in itertools.product((0, LARGE_RIG_BONES), (False, True)):
        runs = np.array([first_updates(limits, bones) for _ in range(repeats)])
        rig = f"metarig grown to {bones} bones" if bones else "metarig"
        label = f"{rig}, humanoid limits on pin" if limits else f"{rig}, no limits"
        rows.append([label] + ["n/a" if np.isnan(v) else f"{v:.2f}" for v in np.median(runs, axis=0)])
    return markdown_table(["wall ms median", *FIRST_UPDATES], rows)


def check_finite(config, samples):
    values = np.array(samples.position_mm + samples.orientation_deg, dtype=float)
    if not np.all(np.isfinite(values)):
        raise SystemExit(f"bench_live: {config.label}: non-finite pose after an update")


def blender_cpu_ms(results, bones):
    """Median CPU ms of Blender's IK on the rig with this many bones."""
    config = next(c for c in CONFIGS if c.kind == "blender" and c.bones == bones)
    return float(np.median(results[config].cpu_ms))


def table(results):
    header = [
        "run",
        "wall ms median / p95",
        "CPU ms median / p95",
        "CPU vs Blender IK (same rig)",
        "position mm median / p95 / max",
        "orientation deg median / p95",
        "wall ms median: solve() / bridge / rest of handler / Blender",
        "solve() wall ms median / p95, iterations",
    ]
    rows = []
    for config in CONFIGS:
        samples = results[config]
        wall, cpu = stats(samples.wall_ms), stats(samples.cpu_ms)
        position, orientation = stats(samples.position_mm), stats(samples.orientation_deg)
        bridge, inner = "n/a", "n/a"
        parts = wall_breakdown(samples)
        if parts is not None:
            bridge = " / ".join(f"{part:.2f}" for part in parts)
        if samples.solve_ms:
            inner = (
                f"{np.median(samples.solve_ms):.2f} / {np.percentile(samples.solve_ms, 95):.2f}, "
                f"{np.median(samples.solve_iterations):.0f}"
            )
        blender_cpu = blender_cpu_ms(results, config.bones)
        rows.append(
            [
                config.label,
                f"{wall[0]:.2f} / {wall[1]:.2f}",
                f"{cpu[0]:.2f} / {cpu[1]:.2f}",
                f"{cpu[0] / blender_cpu:.{2 if cpu[0] < 0.1 * blender_cpu else 1}f}x",
                f"{position[0]:.2f} / {position[1]:.2f} / {position[2]:.1f}",
                f"{orientation[0]:.2f} / {orientation[1]:.2f}",
                bridge,
                inner,
            ]
        )
    return markdown_table(header, rows)


def control_baselines():
    """{control: (its row, the row it is measured against)}: the default row, or for Balance
    the root-free row it needs."""
    rows_of = {config.control: config for config in CONFIGS if config.control}
    return {
        control: (config, rows_of["root free"] if control == "root free + balance" else CONFIGS[0])
        for control, config in rows_of.items()
    }


def control_costs(path, pairs):
    """{control: ((P,) wall ms, (P,) solve() ms)} each control adds to a median update, one value
    per pair of drags: the control's row and its baseline's dragged back to back (which goes
    first alternates), so both meet the machine in the same state; rows a few seconds apart in
    the table above differ by more than a control costs when the machine is busy."""
    costs = {}
    for control, (config, base) in control_baselines().items():
        added = []
        for pair in range(pairs):
            runs = {}
            for row in (base, config) if pair % 2 == 0 else (config, base):
                runs[row] = Samples()
                drag(row, path, runs[row])
                check_finite(row, runs[row])
            added.append(
                [
                    np.median(getattr(runs[config], field)) - np.median(getattr(runs[base], field))
                    for field in ("wall_ms", "solve_ms")
                ]
            )
        costs[control] = tuple(np.array(added).T)
    return costs


def controls_table(costs):
    """What each control adds to a median live update (`control_costs`: the median over pairs of
    drags, and its range), each control held to `CONTROL_TARGET_MS` (the root freed is a
    setting Balance needs, not a control)."""
    baselines = control_baselines()
    rows, verdicts = [], []
    for control, (wall, solve) in costs.items():
        rows.append(
            [
                control,
                baselines[control][1].label,
                f"{np.median(wall):+.2f} ({wall.min():+.2f} to {wall.max():+.2f})",
                f"{np.median(solve):+.2f} ({solve.min():+.2f} to {solve.max():+.2f})",
            ]
        )
        if control != "root free":
            verdict = "PASS" if np.median(wall) <= CONTROL_TARGET_MS else "FAIL"
            verdicts.append(
                f"- {control}: adds {np.median(wall):.2f} wall ms to a median update "
                f"(target <= {CONTROL_TARGET_MS}) {verdict}"
            )
    header = ["control", "against", "wall ms median added (range)", "solve() ms median added (range)"]
    return markdown_table(header, rows) + "\n\n" + "\n".join(verdicts)


def per_pin_table(results):
    """p95 position error of each pin: which target the budget leaves behind."""
    rows = []
    for config in CONFIGS:
        position = np.array(results[config].position_mm)
        rows.append([config.label] + [f"{np.percentile(position[:, k], 95):.1f}" for k in range(len(PINS))])
    return markdown_table(["p95 position mm", *PINS], rows)


def step_lengths_mm(path):
    """How far each target moves per step (mm), all pins and steps together."""
    return [
        (b[bone].translation - a[bone].translation).length * 1e3
        for a, b in zip(path, path[1:])
        for bone in PINS
    ]


def report(results, costs, args, rig_height, path, seconds):
    updates = len(results[CONFIGS[0]].wall_ms)
    step = stats(step_lengths_mm(path))
    lines = [
        f"Blender {bpy.app.version_string}, {machine_line(solver_fingerprint())}.",
        f"Rigify human metarig, {rig_height:.2f} m tall; {args.steps} target moves per round (a target moves "
        f"{step[0]:.1f} / {step[1]:.1f} / {step[2]:.1f} mm per move, median / p95 / max), {args.rounds} "
        f"round(s) with the rows interleaved, {updates} updates per row; run took {seconds:.0f} s.",
        "",
        table(results),
        "",
        f"What each control adds to a median update ({args.pairs} pair(s) of drags, each control's row and"
        " its baseline's back to back):",
        "",
        controls_table(costs),
        "",
        per_pin_table(results),
        "",
        f"Updates that rebuild something (median of {args.repeats} fresh metarigs, default settings):",
        "",
        first_updates_table(args.repeats),
    ]
    return "\n".join(lines)


def write_results(markdown):
    """Replace the live block of docs/BENCHMARKS.md, adding a "Live handler" section if it has none."""
    block = f"{LIVE_BEGIN}\n{markdown}\n{LIVE_END}"
    text = BENCHMARKS_MD.read_text() if BENCHMARKS_MD.exists() else "# Benchmarks\n"
    if LIVE_BEGIN in text and LIVE_END in text:
        head, rest = text.split(LIVE_BEGIN, 1)
        text = head + block + rest.split(LIVE_END, 1)[1]
    else:
        text = text.rstrip() + "\n\n## Live handler\n\n`bench/bench_live.py`.\n\n" + block + "\n"
    BENCHMARKS_MD.write_text(text)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="target moves per round")
    parser.add_argument("--rounds", type=int, default=3, help="times the whole drag is repeated per row")
    parser.add_argument(
        "--pairs", type=int, default=9, help="back-to-back drags of each control and its baseline"
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 40 moves, one round, nothing written"
    )
    parser.add_argument("--no-write", action="store_true", help="do not update docs/BENCHMARKS.md")
    parser.add_argument(
        "--repeats", type=int, default=5, help="fresh metarigs timed for the first-update table"
    )
    parser.add_argument(
        "--first-updates-only", action="store_true", help="print only the first-update table, write nothing"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.rounds, args.pairs, args.no_write = 40, 1, 1, True
    return args


def main(argv=None):
    args = parse_args(argv)
    started = time.perf_counter()
    install_extension()
    if args.first_updates_only:
        print(first_updates_table(args.repeats))
        disable_extension()
        shutil.rmtree(USER_RESOURCES, ignore_errors=True)
        return
    path, rig_height = target_path(args.steps)
    results = {config: Samples() for config in CONFIGS}
    for round_index in range(args.rounds):
        for config in CONFIGS:
            drag(config, path, results[config])
            check_finite(config, results[config])
            print(
                f"round {round_index + 1}/{args.rounds}: {config.label}: "
                f"median {np.median(results[config].cpu_ms):.2f} CPU ms",
                flush=True,
            )
    costs = control_costs(path, args.pairs)
    enable_extension()
    markdown = report(results, costs, args, rig_height, path, time.perf_counter() - started)
    print()
    print(markdown)
    if not args.no_write:
        write_results(markdown)
        print(f"\nwrote {BENCHMARKS_MD}")
    disable_extension()
    shutil.rmtree(USER_RESOURCES, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
