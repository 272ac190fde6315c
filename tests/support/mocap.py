"""BVH motion capture as scene-document bones plus per-frame local rotations (numpy only).

The result matches what Blender's BVH importer builds (axis_forward='-Z', axis_up='Y', so the
character stands along +Z), expressed the way the solver sees an armature: armature-space rest
matrices whose +Y runs head to tail, and local rotations relative to rest.

A BVH joint becomes a bone from that joint to its child joint (the mean of the non-zero child
offsets when it branches). When every child offset is zero (CMU's collar/hip helper joints, the
hips) the bone gets a short tail along its parent's direction, so no bone has zero length.
"""

import pathlib
from dataclasses import dataclass, field

import numpy as np

from solver import quat
from solver.scene import scene_bone
from solver.scene import scene_document as document

MOCAP_DIR = pathlib.Path(__file__).resolve().parents[1] / "data" / "mocap"
CLIPS = (MOCAP_DIR / "cmu_131_01.bvh", MOCAP_DIR / "cmu_131_03.bvh")
"""The CMU clips committed in tests/data/mocap: a walk and a hop."""

BVH_TO_BLENDER = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
_Y = np.array([0.0, 1.0, 0.0])
_FALLBACK_FRACTION = 0.25
_ROOT_FALLBACK = 0.05


@dataclass
class Joint:
    name: str
    parent: int
    offset: np.ndarray
    channels: list
    end_offsets: list = field(default_factory=list)


@dataclass
class Mocap:
    """A loaded clip. rotations/locations are per frame and bone, in scene-document convention."""

    bones: list
    rotations: np.ndarray
    locations: np.ndarray
    frame_time: float
    scale: float

    @property
    def names(self):
        return [b["name"] for b in self.bones]


def _parse(text):
    tokens = text.split()
    joints, stack, i = [], [], 0
    pending_end = False
    while tokens[i] != "MOTION":
        token = tokens[i]
        if token in ("ROOT", "JOINT"):
            joints.append(Joint(tokens[i + 1], stack[-1] if stack else -1, np.zeros(3), []))
            i += 2
        elif token == "End":
            pending_end = True
            i += 2
        elif token == "{":
            stack.append(-2 if pending_end else len(joints) - 1)
            i += 1
        elif token == "}":
            stack.pop()
            pending_end = False
            i += 1
        elif token == "OFFSET":
            offset = np.array([float(v) for v in tokens[i + 1 : i + 4]])
            if pending_end:
                joints[stack[-2]].end_offsets.append(offset)
            else:
                joints[stack[-1]].offset = offset
            i += 4
        elif token == "CHANNELS":
            count = int(tokens[i + 1])
            joints[stack[-1]].channels = tokens[i + 2 : i + 2 + count]
            i += 2 + count
        else:
            i += 1
    n_frames = int(tokens[i + 2])
    frame_time = float(tokens[i + 5])
    n_channels = sum(len(j.channels) for j in joints)
    values = np.array(tokens[i + 6 : i + 6 + n_frames * n_channels], dtype=float)
    return joints, values.reshape(n_frames, n_channels), frame_time


def _channel_rotations(joint, values):
    """Per-frame rotation (F, 4) in BVH space: the product of the rotation channels in file order."""
    q = np.tile(quat.IDENTITY, (len(values), 1))
    axes = {"Xrotation": (1.0, 0.0, 0.0), "Yrotation": (0.0, 1.0, 0.0), "Zrotation": (0.0, 0.0, 1.0)}
    for k, channel in enumerate(joint.channels):
        if channel in axes:
            step = quat.from_axis_angle(
                np.broadcast_to(axes[channel], (len(values), 3)), np.radians(values[:, k])
            )
            q = quat.multiply(q, step)
    return q


def _root_position(joint, values):
    position = np.zeros((len(values), 3))
    for k, channel in enumerate(joint.channels):
        if channel.endswith("position"):
            position[:, "XYZ".index(channel[0])] = values[:, k]
    return position


def load_bvh(path, height=1.75):
    """Read a BVH file; scale so that the rest pose stands `height` metres tall."""
    with open(path) as f:
        joints, values, frame_time = _parse(f.read())
    rest_joint = _rest_joints(joints)
    scale = _scale_to_height(joints, rest_joint, height)
    head = rest_joint @ BVH_TO_BLENDER.T * scale
    bones, rest_rotation = _scene_bones(joints, head, _tails(joints, head, scale, height))
    rotations, locations = _local_motion(joints, values, rest_rotation, head, scale)
    return Mocap(bones, rotations, locations, frame_time, scale)


def _rest_joints(joints):
    """Each joint's rest position in the file's units and axes (offsets summed from the root)."""
    rest_joint = np.zeros((len(joints), 3))
    for j, joint in enumerate(joints):
        rest_joint[j] = joint.offset + (rest_joint[joint.parent] if joint.parent >= 0 else 0.0)
    return rest_joint


def _scale_to_height(joints, rest_joint, height):
    """The factor that makes the rest pose, end sites included, `height` tall along Blender's Z."""
    ends = [rest_joint[j] + e for j, joint in enumerate(joints) for e in joint.end_offsets]
    every_point = (np.concatenate((rest_joint, np.array(ends))) if ends else rest_joint) @ BVH_TO_BLENDER.T
    return height / float(np.ptp(every_point[:, 2]))


def _tails(joints, head, scale, height):
    """Each bone's tail: the mean of its children's (and end sites') offsets; a leaf without one
    continues its parent's direction, a lone root points up."""
    n = len(joints)
    children = [[c for c in range(n) if joints[c].parent == j] for j in range(n)]
    tail = np.zeros((n, 3))
    for j, joint in enumerate(joints):
        offsets = [joints[c].offset for c in children[j]] + list(joint.end_offsets)
        offsets = [o for o in offsets if np.linalg.norm(o) > 1e-9]
        if offsets:
            tail[j] = head[j] + BVH_TO_BLENDER @ np.mean(offsets, axis=0) * scale
        elif joint.parent >= 0:
            p = joint.parent
            direction = (tail[p] - head[p]) / np.linalg.norm(tail[p] - head[p])
            tail[j] = head[j] + direction * _FALLBACK_FRACTION * np.linalg.norm(tail[p] - head[p])
        else:
            tail[j] = head[j] + np.array([0.0, 0.0, _ROOT_FALLBACK * height])
    return tail


def _scene_bones(joints, head, tail):
    """(scene-document bones, rest rotations): each bone's +Y runs head to tail."""
    direction = tail - head
    lengths = np.linalg.norm(direction, axis=1)
    rest_rotation = quat.shortest_arc(_Y, direction)
    rest_matrix = np.tile(np.eye(4), (len(joints), 1, 1))
    rest_matrix[:, :3, :3] = quat.to_matrix(rest_rotation)
    rest_matrix[:, :3, 3] = head
    bones = [
        scene_bone(
            joint.name, None if joint.parent < 0 else joints[joint.parent].name, rest_matrix[j], lengths[j]
        )
        for j, joint in enumerate(joints)
    ]
    return bones, rest_rotation


def _local_motion(joints, values, rest_rotation, head, scale):
    """Per frame, each bone's rotation relative to its rest and the root's location."""
    n = len(joints)
    convert = quat.from_matrix(BVH_TO_BLENDER)
    rotations = np.empty((len(values), n, 4))
    column = 0
    locations = np.zeros((len(values), n, 3))
    for j, joint in enumerate(joints):
        joint_values = values[:, column : column + len(joint.channels)]
        column += len(joint.channels)
        local = quat.multiply(
            quat.multiply(convert, _channel_rotations(joint, joint_values)), quat.conjugate(convert)
        )
        bone = rest_rotation[j]
        rotations[:, j] = quat.normalize(quat.multiply(quat.multiply(quat.conjugate(bone), local), bone))
        if joint.parent < 0:
            world = (_root_position(joint, joint_values) + joint.offset) @ BVH_TO_BLENDER.T * scale
            locations[:, j] = quat.rotate(quat.conjugate(bone), world - head[j])
    return rotations, locations


def forward_kinematics(mocap, frame):
    """Armature-space pose matrices (N, 4, 4) of every bone at `frame` (Blender's pose maths)."""
    rest = np.array([b["rest"] for b in mocap.bones])
    index = {b["name"]: i for i, b in enumerate(mocap.bones)}
    pose = np.empty_like(rest)
    for i, bone in enumerate(mocap.bones):
        local = np.eye(4)
        local[:3, :3] = quat.to_matrix(mocap.rotations[frame, i])
        local[:3, 3] = mocap.locations[frame, i]
        if bone["parent"] is None:
            pose[i] = rest[i] @ local
        else:
            p = index[bone["parent"]]
            pose[i] = pose[p] @ np.linalg.inv(rest[p]) @ rest[i] @ local
    return pose


def effector_targets(mocap, frame, bone_names):
    """{bone name: armature-space 4x4 pose matrix} at `frame`, for pinning those bones."""
    pose = forward_kinematics(mocap, frame)
    index = {b["name"]: i for i, b in enumerate(mocap.bones)}
    return {name: pose[index[name]] for name in bone_names}


def scene_document(mocap, frame=None):
    """A scene document of the clip's skeleton, posed at `frame` (rest pose when None)."""
    rotations = [None] * len(mocap.bones) if frame is None else mocap.rotations[frame]
    locations = [None] * len(mocap.bones) if frame is None else mocap.locations[frame]
    return document(
        scene_bone(**bone, rotation=rotation, location=location)
        for bone, rotation, location in zip(mocap.bones, rotations, locations)
    )


def straight_line_rest(mocap, axis=(1.0, 0.0, 0.0)):
    """The same clip on a rig whose rest pose is a straight line, as LAFAN-style BVH exports build.

    Every bone's rest points along `axis` (armature space) and each joint sits its original
    distance from its parent's head along that line; bone lengths are kept. The local rotations
    are re-expressed so that every frame's armature-space bone matrices, hence world joint
    positions, are unchanged: with all rest rotations equal, a child's new local rotation is
    inv(old parent rest) @ old rest @ old local rotation. That keeps child heads in place only if
    each child sits on its parent's bone axis (or on its head), which holds for CMU clips;
    other skeletons raise ValueError.
    """
    rest = np.array([b["rest"] for b in mocap.bones])
    index = {b["name"]: i for i, b in enumerate(mocap.bones)}
    line = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    line_rotation = quat.shortest_arc(_Y, line)
    old_rotation = quat.from_matrix(rest[:, :3, :3])
    head = rest[:, :3, 3]
    new_head = np.empty_like(head)
    rotations = np.empty_like(mocap.rotations)
    locations = mocap.locations.copy()
    for i, bone in enumerate(mocap.bones):
        if bone["parent"] is None:
            new_head[i] = head[i]
            to_line = quat.multiply(quat.conjugate(line_rotation), old_rotation[i])
            rotations[:, i] = quat.multiply(
                np.broadcast_to(to_line, (len(rotations), 4)), mocap.rotations[:, i]
            )
            locations[:, i] = quat.rotate(to_line, mocap.locations[:, i])
            continue
        p = index[bone["parent"]]
        offset = quat.rotate(quat.conjugate(old_rotation[p]), head[i] - head[p])
        distance = float(np.linalg.norm(offset))
        if np.linalg.norm(offset - distance * _Y) > 1e-6 * max(1.0, distance):
            raise ValueError(
                f"{bone['name']}: joint is off its parent's bone axis; "
                "a straight-line rest cannot keep its position"
            )
        new_head[i] = new_head[p] + distance * line
        relative = quat.multiply(quat.conjugate(old_rotation[p]), old_rotation[i])
        rotations[:, i] = quat.multiply(np.broadcast_to(relative, (len(rotations), 4)), mocap.rotations[:, i])
    new_rest = np.tile(np.eye(4), (len(rest), 1, 1))
    new_rest[:, :3, :3] = quat.to_matrix(line_rotation)
    new_rest[:, :3, 3] = new_head
    bones = [dict(b, rest=new_rest[i].tolist()) for i, b in enumerate(mocap.bones)]
    return Mocap(bones, quat.normalize(rotations), locations, mocap.frame_time, mocap.scale)


def rolled_rest(mocap, seed=0):
    """The same clip on a rig whose every bone is rolled by its own random angle about its +Y.

    Exporters disagree on bone rolls, so the same motion reaches the solver in other local
    frames. With a bone's rest frame turned by Q (rest' = rest Q), its local rotation q becomes
    inv(Q) q Q and its location inv(Q) location: every frame's armature-space bone matrices are
    then the old ones times Q, so joint positions are unchanged and pinned bones' targets turn
    with their frames.
    """
    rng = np.random.default_rng(seed)
    rolls = quat.from_axis_angle(
        np.broadcast_to(_Y, (len(mocap.bones), 3)), rng.uniform(-np.pi, np.pi, len(mocap.bones))
    )
    inverse = quat.conjugate(rolls)
    rotations = quat.multiply(quat.multiply(inverse[None], mocap.rotations), rolls[None])
    locations = quat.rotate(inverse[None], mocap.locations)
    bones = []
    for i, bone in enumerate(mocap.bones):
        rest = np.array(bone["rest"], dtype=float)
        rest[:3, :3] = rest[:3, :3] @ quat.to_matrix(rolls[i])
        bones.append(dict(bone, rest=rest.tolist()))
    return Mocap(bones, quat.normalize(rotations), locations, mocap.frame_time, mocap.scale)
