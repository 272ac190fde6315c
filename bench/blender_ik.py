"""Blender's own IK on the mocap targets: the baseline `make bench` compares EWBIK with.

Runs inside a bpy interpreter (any supported version) as a subprocess of
bench_solver.py, so each Blender version gets a clean process and its own
BLENDER_USER_RESOURCES. It imports the clip with Blender's BVH importer,
records the effectors' pose matrices by forward kinematics, drops the action,
gives the hips the clip's pose, and lets IK constraints (Standard solver,
rotation on, chains ending just below the hips) pull hands, feet and head to
empties at the recorded matrices. What is timed is `view_layer.update()`: the
depsgraph evaluation Blender pays per change, IK included, as wall-clock
time and as process CPU time (all threads). The same update
with the constraints muted is timed too, so the IK share can be told apart.

With --joints it also records those bones' head positions (armature space), as captured and
after each solve, so the naturalness bench (bench_natural.py) can compare the body Blender
builds with the captured one in Blender's own space.

Blender's Standard solver keeps no state between evaluations: it starts from
the pose channels. "rest" leaves them at identity (what an animator gets on an
unkeyed rig); "warm" writes the previous frame's IK result into them before
the update, the same warm start EWBIK gets. Writing that pose is not timed.

Prints nothing but a JSON document to --out.
"""

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time

CMU_METRES_PER_UNIT = 0.056444
HIPS = "Hips"


def _parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clip", required=True)
    parser.add_argument("--frames", required=True, help="comma-separated 0-based clip frame indices")
    parser.add_argument("--scale", type=float, default=1.0, help="extra factor on the CMU metre scale")
    parser.add_argument("--effectors", required=True, help="comma-separated bone names")
    parser.add_argument("--iterations", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=3, help="timing passes per mode (median per frame)")
    parser.add_argument(
        "--modes", default="rest,warm,muted", help="comma-separated subset of rest,warm,muted"
    )
    parser.add_argument(
        "--joints", default="", help="comma-separated bones whose heads are recorded per frame"
    )
    parser.add_argument("--out", required=True)
    return parser.parse_args(argv)


@dataclasses.dataclass
class _Scene:
    """The imported clip's armature with IK constraints, and what was captured at each frame."""

    rig: object
    effectors: list
    joints: list
    targets: list  # per frame: each effector's captured pose matrix
    tails: list  # per frame: each effector's captured tail
    hips_basis: list  # per frame: the hips' captured matrix_basis
    captured_heads: list  # per frame: each recorded joint's head
    chains: dict = None  # effector -> the bones its IK constraint turns
    constraints: list = None
    empties: list = None
    chain_bones: list = None  # every chain bone, parents first


def main(argv=None):
    args = _parse_args(argv)
    os.environ["BLENDER_USER_RESOURCES"] = tempfile.mkdtemp(prefix="ewbik-bench-")
    import bpy
    import numpy as np

    frames = [int(f) for f in args.frames.split(",")]
    scene = _capture(bpy, args, frames)
    _add_ik_constraints(bpy, scene, args.iterations)
    bpy.context.view_layer.update()
    result = {
        "blender": bpy.app.version_string,
        "python": sys.version.split()[0],
        "effectors": scene.effectors,
        "chains": scene.chains,
        "iterations": args.iterations,
        "frames": frames,
        "joints": scene.joints,
        "captured_heads": scene.captured_heads,
        "modes": {},
    }
    for mode in args.modes.split(","):
        passes = [_run(bpy, scene, mode) for _ in range(max(1, args.repeats))]
        ms = np.median(np.array([p[0] for p in passes]), axis=0)
        result["modes"][mode] = {
            "ms": ms[:, 0].tolist(),
            "cpu_ms": ms[:, 1].tolist(),
            "position_error": passes[0][1],
            "orientation_error_deg": passes[0][2],
            "heads": passes[0][3],
        }
    with open(args.out, "w") as f:
        json.dump(result, f)


def _capture(bpy, args, frames):
    """Import the clip and record the effectors, the hips and the joints at each frame."""
    import numpy as np
    from mathutils import Matrix

    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.import_anim.bvh(
        filepath=args.clip,
        global_scale=CMU_METRES_PER_UNIT * args.scale,
        rotate_mode="NATIVE",
        axis_forward="-Z",
        axis_up="Y",
    )
    rig = bpy.context.object
    bones = rig.pose.bones
    first_frame = int(rig.animation_data.action.frame_range[0])
    scene = _Scene(rig, args.effectors.split(","), [j for j in args.joints.split(",") if j], [], [], [], [])
    for f in frames:
        bpy.context.scene.frame_set(first_frame + f)
        scene.captured_heads.append([list(bones[j].head) for j in scene.joints])
        scene.targets.append([np.array(bones[e].matrix) for e in scene.effectors])
        scene.tails.append([np.array(bones[e].tail) for e in scene.effectors])
        scene.hips_basis.append(Matrix(bones[HIPS].matrix_basis))
    return scene


def _add_ik_constraints(bpy, scene, iterations):
    """Drop the action, rest every bone, and pull each effector to an empty with an IK constraint."""
    rig = scene.rig
    bones = rig.pose.bones
    rig.animation_data_clear()
    for pb in bones:
        pb.matrix_basis.identity()
        if pb.name != HIPS:
            pb.rotation_mode = "QUATERNION"
    rig.pose.ik_solver = "LEGACY"
    scene.chains, scene.constraints, scene.empties = {}, [], []
    for name in scene.effectors:
        empty = bpy.data.objects.new(f"target_{name}", None)
        bpy.context.scene.collection.objects.link(empty)
        scene.empties.append(empty)
        constraint = bones[name].constraints.new("IK")
        constraint.target = empty
        constraint.use_tail = True
        constraint.use_rotation = True
        constraint.use_stretch = False
        constraint.iterations = iterations
        chain, bone = [], bones[name]
        while bone.name != HIPS:
            chain.append(bone.name)
            bone = bone.parent
        constraint.chain_count = len(chain)
        scene.chains[name] = chain
        scene.constraints.append(constraint)
    scene.chain_bones = sorted(
        {b for chain in scene.chains.values() for b in chain}, key=lambda n: _depth(bones[n])
    )


def _place(scene, i):
    """The hips and the effectors' empties as captured at frame i."""
    from mathutils import Matrix

    scene.rig.pose.bones[HIPS].matrix_basis = scene.hips_basis[i]
    for k, empty in enumerate(scene.empties):
        m = scene.targets[i][k].copy()
        m[:3, 3] = scene.tails[i][k]
        empty.matrix_world = Matrix(m.tolist())


def _errors(scene, i):
    """(position errors, orientation errors in degrees) of the effectors against frame i's capture."""
    import numpy as np

    pos, ang = [], []
    for k, name in enumerate(scene.effectors):
        m = np.array(scene.rig.pose.bones[name].matrix)
        t = scene.targets[i][k]
        pos.append(float(np.linalg.norm(m[:3, 3] - t[:3, 3])))
        ang.append(rotation_angle_deg(t[:3, :3], m[:3, :3]))
    return pos, ang


def _solved_rotations(scene):
    bones = scene.rig.pose.bones
    return {
        n: scene.rig.convert_space(
            pose_bone=bones[n], matrix=bones[n].matrix, from_space="POSE", to_space="LOCAL"
        )
        .to_quaternion()
        .normalized()
        for n in scene.chain_bones
    }


def _run(bpy, scene, mode):
    """One timed pass over the frames: (ms and CPU ms, position errors, angle errors, joint heads)."""
    view_layer = bpy.context.view_layer
    bones = scene.rig.pose.bones
    for c in scene.constraints:
        c.enabled = mode != "muted"
    for pb in bones:
        pb.matrix_basis.identity()
    view_layer.update()
    ms, pos, ang, heads = [], [], [], []
    for i in range(len(scene.targets)):
        if mode != "warm" or i == 0:
            for n in scene.chain_bones:
                bones[n].matrix_basis.identity()
        _place(scene, i)
        start, start_cpu = time.perf_counter(), time.process_time()
        view_layer.update()
        ms.append(((time.perf_counter() - start) * 1e3, (time.process_time() - start_cpu) * 1e3))
        p, a = _errors(scene, i)
        pos.append(p)
        ang.append(a)
        heads.append([list(bones[j].head) for j in scene.joints])
        if mode == "warm":
            for n, rotation in _solved_rotations(scene).items():
                bones[n].rotation_quaternion = rotation
    return ms, pos, ang, heads


def rotation_angle_deg(a, b):
    """Angle of the rotation between two 3x3 bases; atan2 keeps it accurate near 0 (float32 input)."""
    import numpy as np

    r = np.asarray(a, dtype=float).T @ np.asarray(b, dtype=float)
    sine = 0.5 * np.linalg.norm([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
    cosine = 0.5 * (np.trace(r) - 1.0)
    return float(np.degrees(np.arctan2(sine, cosine)))


def _depth(pose_bone):
    depth = 0
    while pose_bone.parent is not None:
        depth += 1
        pose_bone = pose_bone.parent
    return depth


if __name__ == "__main__":
    main(sys.argv[1:])
