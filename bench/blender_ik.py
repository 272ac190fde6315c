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
    parser.add_argument("--modes", default="rest,warm,muted", help="comma-separated subset of rest,warm,muted")
    parser.add_argument("--joints", default="", help="comma-separated bones whose heads are recorded per frame")
    parser.add_argument("--out", required=True)
    return parser.parse_args(argv)


def main(argv=None):
    args = _parse_args(argv)
    os.environ["BLENDER_USER_RESOURCES"] = tempfile.mkdtemp(prefix="ewbik-bench-")
    import bpy
    import numpy as np
    from mathutils import Matrix

    frames = [int(f) for f in args.frames.split(",")]
    effectors = args.effectors.split(",")
    joints = [j for j in args.joints.split(",") if j]

    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.import_anim.bvh(
        filepath=args.clip,
        global_scale=CMU_METRES_PER_UNIT * args.scale,
        rotate_mode="NATIVE",
        axis_forward="-Z",
        axis_up="Y",
    )
    scene = bpy.context.scene
    view_layer = bpy.context.view_layer
    rig = bpy.context.object
    bones = rig.pose.bones
    first_frame = int(rig.animation_data.action.frame_range[0])

    targets, tails, hips_basis, captured_heads = [], [], [], []
    for f in frames:
        scene.frame_set(first_frame + f)
        captured_heads.append([list(bones[j].head) for j in joints])
        targets.append([np.array(bones[e].matrix) for e in effectors])
        tails.append([np.array(bones[e].tail) for e in effectors])
        hips_basis.append(Matrix(bones[HIPS].matrix_basis))

    rig.animation_data_clear()
    for pb in bones:
        pb.matrix_basis.identity()
        if pb.name != HIPS:
            pb.rotation_mode = "QUATERNION"
    rig.pose.ik_solver = "LEGACY"
    chains, constraints, empties = {}, [], []
    for name in effectors:
        empty = bpy.data.objects.new(f"target_{name}", None)
        scene.collection.objects.link(empty)
        empties.append(empty)
        constraint = bones[name].constraints.new("IK")
        constraint.target = empty
        constraint.use_tail = True
        constraint.use_rotation = True
        constraint.use_stretch = False
        constraint.iterations = args.iterations
        chain, bone = [], bones[name]
        while bone.name != HIPS:
            chain.append(bone.name)
            bone = bone.parent
        constraint.chain_count = len(chain)
        chains[name] = chain
        constraints.append(constraint)
    chain_bones = sorted({b for chain in chains.values() for b in chain}, key=lambda n: _depth(bones[n]))
    view_layer.update()

    def place(i):
        bones[HIPS].matrix_basis = hips_basis[i]
        for k, empty in enumerate(empties):
            m = targets[i][k].copy()
            m[:3, 3] = tails[i][k]
            empty.matrix_world = Matrix(m.tolist())

    def errors(i):
        pos, ang = [], []
        for k, name in enumerate(effectors):
            m = np.array(bones[name].matrix)
            t = targets[i][k]
            pos.append(float(np.linalg.norm(m[:3, 3] - t[:3, 3])))
            ang.append(rotation_angle_deg(t[:3, :3], m[:3, :3]))
        return pos, ang

    def solved_rotations():
        return {
            n: rig.convert_space(pose_bone=bones[n], matrix=bones[n].matrix, from_space="POSE", to_space="LOCAL")
            .to_quaternion()
            .normalized()
            for n in chain_bones
        }

    def run(mode):
        for c in constraints:
            c.enabled = mode != "muted"
        for pb in bones:
            pb.matrix_basis.identity()
        view_layer.update()
        ms, pos, ang, heads = [], [], [], []
        for i in range(len(frames)):
            if mode != "warm" or i == 0:
                for n in chain_bones:
                    bones[n].matrix_basis.identity()
            place(i)
            start, start_cpu = time.perf_counter(), time.process_time()
            view_layer.update()
            ms.append(((time.perf_counter() - start) * 1e3, (time.process_time() - start_cpu) * 1e3))
            p, a = errors(i)
            pos.append(p)
            ang.append(a)
            heads.append([list(bones[j].head) for j in joints])
            if mode == "warm":
                for n, rotation in solved_rotations().items():
                    bones[n].rotation_quaternion = rotation
        return ms, pos, ang, heads

    result = {
        "blender": bpy.app.version_string,
        "python": sys.version.split()[0],
        "effectors": effectors,
        "chains": chains,
        "iterations": args.iterations,
        "frames": frames,
        "joints": joints,
        "captured_heads": captured_heads,
        "modes": {},
    }
    for mode in args.modes.split(","):
        passes = [run(mode) for _ in range(max(1, args.repeats))]
        ms = np.median(np.array([p[0] for p in passes]), axis=0)
        result["modes"][mode] = {"ms": ms[:, 0].tolist(), "cpu_ms": ms[:, 1].tolist(),
                                 "position_error": passes[0][1], "orientation_error_deg": passes[0][2],
                                 "heads": passes[0][3]}
    with open(args.out, "w") as f:
        json.dump(result, f)


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
