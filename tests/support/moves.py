"""The moves animators make, defined once for the pose gallery (tools/pose_gallery.py) and the tests.

A move pins some bones through `ewbik.pin` (mostly hands, feet and head), drags some targets in
a few live-solved steps as a mouse drag would, then presses `ewbik.solve`. Every offset is a
fraction of the rig's own leg or arm length (or height), so a Rigify metarig and a CMU mocap rig
get the same move. Each move runs in some configurations (`prepare`): "free" and "humanoid" set
the solver up themselves (without limits, with Presets > Humanoid); "default" leaves every
setting as a new user finds it. `measure` turns the result into what an animator checks: pin
errors, planted-foot slide, elbow and knee bends and whether each bends the anatomical way, how
the trunk leans.

Body frame (read from the pose): up = world +Z, left = right hip joint -> left hip joint made
horizontal, forward = left x up.

Knee: bends the anatomical way when, seen from the side (the plane of forward and up), the knee
joint lies on the forward side of the hip-ankle line (`knee_front_mm` > 0).

Elbow: the hinge axis is the normal of the bend plane, side * (forearm x upper arm), side = +1
left, -1 right; with the arm hanging and the forearm flexed forward it points outward (lateral).
The reference axis is that outward axis carried along by the upper arm's swing (shortest arc
from hanging straight down to its current direction). The elbow bends the anatomical way when
the hinge axis is within 90 degrees of the reference (`elbow_hinge_deg` < 90): the humerus is
turned less than 90 degrees from neutral, inside the human range, so the forearm folds to the
front of the arm, never backward or across the back. A straight joint (bend < 5 degrees, the
over-straightening a human joint has) has no bend plane and counts as anatomical.

Trunk: `lean_deg` is how far the line from the hips' head to the middle of the shoulder joints
leans forward from upright, seen from the side (negative: arched back); `head_front_mm` how far
the head joint is in front of the hips' head.

Also measured, for the eye rather than as rules: how high each elbow is above its shoulder and
how far the chest is twisted against the hips.
"""

import dataclasses
import math

import bpy
from mathutils import Matrix, Vector

from tests.support.blender_helpers import build_metarig, import_mocap_rig, pin, settle

UP = Vector((0.0, 0.0, 1.0))
DRAG_STEPS = 6
LIVE_ITERATIONS = 15
SOLVE_ITERATIONS = 500
STRAIGHT_DEG = 5.0  # a human elbow or knee over-straightens by about this much


@dataclasses.dataclass(frozen=True)
class RigSpec:
    """Which bones of a rig play which part: pinned ends, limb joints (a limb's bone head is its joint).

    hand_ends: the bones whose tails end the hands (knuckles), so a hand's direction is wrist -> there
    whatever way the wrist bone itself points (CMU's wrists are zero-length stubs).
    """

    name: str
    hips: str
    head: str
    hands: tuple  # (left, right)
    feet: tuple
    upper_arms: tuple
    forearms: tuple
    thighs: tuple
    shins: tuple
    hand_ends: tuple

    @property
    def pinned(self):
        return (*self.hands, *self.feet, self.head)


RIGS = {
    "metarig": RigSpec(
        "metarig",
        "spine",
        "spine.006",
        ("hand.L", "hand.R"),
        ("foot.L", "foot.R"),
        ("upper_arm.L", "upper_arm.R"),
        ("forearm.L", "forearm.R"),
        ("thigh.L", "thigh.R"),
        ("shin.L", "shin.R"),
        ("hand.L", "hand.R"),
    ),
    "cmu": RigSpec(
        "cmu",
        "Hips",
        "Head",
        ("LeftWrist", "RightWrist"),
        ("LeftAnkle", "RightAnkle"),
        ("LeftShoulder", "RightShoulder"),
        ("LeftElbow", "RightElbow"),
        ("LeftHip", "RightHip"),
        ("LeftKnee", "RightKnee"),
        ("lhand", "rhand"),
    ),
}
CONFIGS = ("free", "humanoid", "default")


def build_rig(rig_name):
    """A fresh rig, active, in object mode; the CMU clip is frozen at frame 1 (its action removed)."""
    if rig_name == "metarig":
        return build_metarig()
    obj = import_mocap_rig()
    bpy.context.scene.frame_set(1)
    obj.animation_data_clear()
    return obj


@dataclasses.dataclass(frozen=True)
class Body:
    """The rig's proportions and body frame, read from its pose before anything is pinned."""

    height: float
    leg: float
    arm: float
    forward: Vector
    mouth: Vector


def _head(obj, bone):
    return obj.matrix_world @ obj.pose.bones[bone].head


def _tail(obj, bone):
    return obj.matrix_world @ obj.pose.bones[bone].tail


def body_frame(obj, spec):
    """(left, forward): left from the right to the left hip joint made horizontal, forward = left x up."""
    left = _head(obj, spec.thighs[0]) - _head(obj, spec.thighs[1])
    left.z = 0.0
    left.normalize()
    return left, left.cross(UP)


def read_body(obj, spec):
    points = [obj.matrix_world @ p for b in obj.pose.bones for p in (b.head, b.tail)]
    height = max(p.z for p in points) - min(p.z for p in points)
    _, forward = body_frame(obj, spec)
    bones = obj.pose.bones
    leg = bones[spec.thighs[0]].length + bones[spec.shins[0]].length
    arm = bones[spec.upper_arms[1]].length + bones[spec.forearms[1]].length
    mouth = _head(obj, spec.head) + height * (0.03 * UP + 0.05 * forward)
    return Body(height, leg, arm, forward, mouth)


def _moved(start, offset, turn=None):
    """start moved by offset and, given a turn (Quaternion), turned by it."""
    location, rotation, scale = start.decompose()
    if turn is not None:
        rotation = turn @ rotation
    return Matrix.LocRotScale(location + offset, rotation, scale)


def _hand_to(obj, spec, side, start, wrist, direction):
    """The hand's target at wrist, turned by the shortest arc pointing the hand (wrist -> knuckles) along direction."""
    hand = _tail(obj, spec.hand_ends[side]) - _head(obj, spec.hands[side])
    return _moved(start, wrist - start.translation, hand.rotation_difference(direction))


def crouch(obj, spec, body, starts):
    """Hips, head and hands drop 25 % of leg length and move a little back together; feet stay planted.

    The upper body moves as one: with the head and hands left where they were, the hips moving
    back would pull the head farther from them than the straight spine reaches.
    """
    offset = -0.25 * body.leg * UP - 0.06 * body.leg * body.forward
    return {bone: _moved(starts[bone], offset) for bone in (spec.hips, spec.head, *spec.hands)}


def knee_lift(obj, spec, body, starts):
    """Left foot up 40 % of leg length and 30 % forward, the foot kept level."""
    offset = body.leg * (0.4 * UP + 0.3 * body.forward)
    return {spec.feet[0]: _moved(starts[spec.feet[0]], offset)}


def reach(obj, spec, body, starts):
    """Right hand forward and 30 degrees up, 97 % of the arm's length from the shoulder, hand along the reach."""
    shoulder = _head(obj, spec.upper_arms[1])
    direction = math.cos(math.radians(30.0)) * body.forward + math.sin(math.radians(30.0)) * UP
    wrist = shoulder + 0.97 * body.arm * direction
    return {spec.hands[1]: _hand_to(obj, spec, 1, starts[spec.hands[1]], wrist, direction)}


def hand_to_mouth(obj, spec, body, starts):
    """Right wrist in front of and below the mouth, the hand (wrist -> knuckles) pointing at the
    mouth with the palm toward the body's middle (thumb up), as a hand brings a cup or food.

    The turn takes the rest hand (palm down, as in a T or A pose) to that hand. The shortest
    turn that only points the fingers would keep the palm down at the mouth, a hand no elbow
    below the shoulder can hold.
    """
    wrist = body.mouth + body.height * (0.07 * body.forward - 0.04 * UP)
    start = starts[spec.hands[1]]
    rest = _hand_frame(_tail(obj, spec.hand_ends[1]) - _head(obj, spec.hands[1]), -UP)
    left, _ = body_frame(obj, spec)
    goal = _hand_frame(body.mouth - wrist, left)
    return {
        spec.hands[1]: _moved(start, wrist - start.translation, (goal @ rest.transposed()).to_quaternion())
    }


def _hand_frame(pointing, palm):
    """Rotation matrix with columns: the hand's direction, its palm normal made perpendicular, their cross."""
    x = pointing.normalized()
    y = (palm - palm.dot(x) * x).normalized()
    return Matrix((x, y, x.cross(y))).transposed()


def crouch_low(obj, spec, body, starts):
    """Head and hands 40 % of leg length down and 8 % forward (40 and 8 cm on the metarig), the
    hips left free: the legs must bend and the hips drop, since the straight legs cannot take
    the head there."""
    offset = body.leg * (0.08 * body.forward - 0.4 * UP)
    return {bone: _moved(starts[bone], offset) for bone in (spec.head, *spec.hands)}


def squat(obj, spec, body, starts):
    """The hips alone pinned and dragged 25 % of leg length straight down: nothing but the legs
    can take them there."""
    return {spec.hips: _moved(starts[spec.hips], -0.25 * body.leg * UP)}


def reach_knee(obj, spec, body, starts):
    """Right wrist to 10 % of leg length in front of the right knee, the hand's turn kept; the
    left hand held where it hangs."""
    knee_joint = _head(obj, spec.shins[1])
    start = starts[spec.hands[1]]
    return {spec.hands[1]: _moved(start, knee_joint + 0.1 * body.leg * body.forward - start.translation)}


def reach_floor(obj, spec, body, starts):
    """Both wrists down to the floor in front of the feet, as to pick up a box: each 25 % of leg
    length ahead of its own foot's toes, 5 % above them, the hands' turn kept. The body must
    bend at the hips and the knees."""
    ends = {}
    for hand, foot in zip(spec.hands, spec.feet):
        wrist = _tail(obj, foot) + body.leg * (0.25 * body.forward + 0.05 * UP)
        ends[hand] = _moved(starts[hand], wrist - starts[hand].translation)
    return ends


def lone_hand(obj, spec, body, starts):
    """The right hand, the only bone pinned, dragged 70 % of the arm's length forward and 20 % up:
    the feet must stay on the floor."""
    offset = body.arm * (0.7 * body.forward + 0.2 * UP)
    return {spec.hands[1]: _moved(starts[spec.hands[1]], offset)}


@dataclasses.dataclass(frozen=True)
class Move:
    """targets: (obj, spec, body, starts) -> {bone: end matrix}; pinned: spec -> the bones the
    animator pins with Pin; configs: the configurations it runs in (`prepare`)."""

    targets: object
    pinned: object
    configs: tuple


def _hands_feet_head(spec):
    return spec.pinned


def _hands_and_feet(spec):
    return (*spec.hands, *spec.feet)


MOVES = {
    "crouch": Move(crouch, lambda spec: (*spec.pinned, spec.hips), ("free", "humanoid")),
    "knee_lift": Move(knee_lift, _hands_feet_head, ("free", "humanoid", "default")),
    "reach": Move(reach, _hands_feet_head, ("free", "humanoid")),
    "hand_to_mouth": Move(hand_to_mouth, _hands_feet_head, ("free", "humanoid")),
    "crouch_low": Move(crouch_low, _hands_feet_head, ("default",)),
    "squat": Move(squat, lambda spec: (spec.hips,), ("default",)),
    "reach_knee": Move(reach_knee, _hands_and_feet, ("default",)),
    "reach_floor": Move(reach_floor, _hands_and_feet, ("default",)),
    "lone_hand": Move(lone_hand, lambda spec: (spec.hands[1],), ("default",)),
}
EDGE_OF_REACH = {"reach"}


def prepare(obj, spec, move, config):
    """Settings, limits and pins as a user sets them; returns {bone: target empty}.

    "default" touches no setting: what a new user gets from Pin (Humanoid Limits on Pin, and
    Stand on Pin: Move Root on, the feet on the floor planted). "free" and "humanoid" set the
    solver up themselves, Move Root only for the crouch, which pins the hips.
    """
    if config != "default":
        obj.ewbik.time_budget_ms = 0.0  # the same poses on every machine
        obj.ewbik.iterations = LIVE_ITERATIONS
        obj.ewbik.translate_root = move == "crouch"
        obj.ewbik.auto_limits = False  # "free" means free; "humanoid" applies the preset itself
        obj.ewbik.stand_on_pin = False
    if config == "humanoid":
        result = bpy.ops.ewbik.apply_limit_preset(preset="humanoid")
        assert result == {"FINISHED"}, result
    targets = pin(obj, *MOVES[move].pinned(spec))
    planted = {foot: obj.pose.bones[foot].ewbik.target for foot in spec.feet if foot not in targets}
    targets.update({foot: target for foot, target in planted.items() if target is not None})
    bpy.ops.object.mode_set(mode="OBJECT")
    bpy.context.view_layer.update()
    return targets


def drag(targets, ends):
    """Move targets to their ends in DRAG_STEPS eased steps, Blender evaluating (live solve) after each."""
    starts = {bone: targets[bone].matrix_world.copy() for bone in ends}
    for step in range(1, DRAG_STEPS + 1):
        t = step / DRAG_STEPS
        ease = t * t * (3.0 - 2.0 * t)
        for bone, end in ends.items():
            loc0, rot0, scale = starts[bone].decompose()
            loc1, rot1, _ = end.decompose()
            targets[bone].matrix_world = Matrix.LocRotScale(
                loc0.lerp(loc1, ease), rot0.slerp(rot1, ease), scale
            )
        bpy.context.view_layer.update()


@dataclasses.dataclass
class Outcome:
    """What an animator checks after a move (lengths in mm, angles in degrees)."""

    rig: str
    move: str
    config: str
    height_mm: float
    dragged: tuple
    pin_error_mm: dict
    foot_slide_mm: dict
    elbow_bend_deg: tuple
    elbow_hinge_deg: tuple
    knee_bend_deg: tuple
    knee_front_mm: tuple
    elbow_above_shoulder_mm: tuple
    torso_twist_deg: float
    lean_deg: float
    head_front_mm: float
    finite: bool
    solve_status: str

    @property
    def knees_forward(self):
        return tuple(
            bend < STRAIGHT_DEG or front > 0.0 for bend, front in zip(self.knee_bend_deg, self.knee_front_mm)
        )

    @property
    def elbows_anatomical(self):
        return tuple(
            bend < STRAIGHT_DEG or hinge < 90.0
            for bend, hinge in zip(self.elbow_bend_deg, self.elbow_hinge_deg)
        )


def perform(rig_name, move, config):
    """Build the rig, pin, drag the move's targets, press Solve; returns (rig object, targets, Outcome).

    The move is worked out on the untouched rig, so every configuration gets the same targets.
    """
    spec = RIGS[rig_name]
    obj = build_rig(rig_name)
    body = read_body(obj, spec)
    starts = {bone: obj.matrix_world @ obj.pose.bones[bone].matrix for bone in MOVES[move].pinned(spec)}
    ends = MOVES[move].targets(obj, spec, body, starts)
    planted = {foot: (_head(obj, foot), _tail(obj, foot)) for foot in spec.feet if foot not in ends}
    targets = prepare(obj, spec, move, config)
    drag(targets, ends)
    if config != "default":
        obj.ewbik.iterations = SOLVE_ITERATIONS
    result = bpy.ops.ewbik.solve()
    assert result == {"FINISHED"}, (result, obj.ewbik.status)
    bpy.context.view_layer.update()
    settle()  # the default time budget may cut a live update; the refinement timer then solves it
    outcome = Outcome(
        rig=rig_name,
        move=move,
        config=config,
        height_mm=body.height * 1e3,
        dragged=tuple(ends),
        solve_status=obj.ewbik.status,
        **measure(obj, spec, targets, planted),
    )
    return obj, targets, outcome


def _angle_deg(a, b):
    return math.degrees(a.angle(b, 0.0))


def elbow(obj, spec, side):
    """(bend, hinge) in degrees of the left (side 0) or right (side 1) elbow; see the module docstring."""
    shoulder, joint = _head(obj, spec.upper_arms[side]), _head(obj, spec.forearms[side])
    wrist = _head(obj, spec.hands[side])
    upper, fore = joint - shoulder, wrist - joint
    bend = _angle_deg(upper, fore)
    if bend < STRAIGHT_DEG:
        return bend, 0.0
    sign = 1.0 if side == 0 else -1.0
    hinge = sign * fore.cross(upper).normalized()
    left, _ = body_frame(obj, spec)
    swing = Vector((0.0, 0.0, -1.0)).rotation_difference(upper.normalized())
    return bend, _angle_deg(hinge, swing @ (sign * left))


def knee(obj, spec, side):
    """(bend in degrees, signed mm of the knee in front of the hip-ankle line seen from the side)."""
    hip, joint, ankle = (_head(obj, bone) for bone in (spec.thighs[side], spec.shins[side], spec.feet[side]))
    bend = _angle_deg(joint - hip, ankle - joint)
    _, forward = body_frame(obj, spec)
    line, offset = ankle - hip, joint - hip
    line2 = (line.dot(forward), line.z)
    offset2 = (offset.dot(forward), offset.z)
    cross = line2[0] * offset2[1] - line2[1] * offset2[0]
    front = cross / max(math.hypot(*line2), 1e-9) * (1.0 if line2[1] < 0.0 else -1.0)
    return bend, front * 1e3


def torso_twist(obj, spec):
    """Degrees between the shoulder line and the hip line seen from above (0 = chest square over the hips)."""
    shoulders = _head(obj, spec.upper_arms[0]) - _head(obj, spec.upper_arms[1])
    hips = _head(obj, spec.thighs[0]) - _head(obj, spec.thighs[1])
    shoulders.z = hips.z = 0.0
    return _angle_deg(shoulders, hips)


def trunk(obj, spec):
    """(lean in degrees, mm of the head in front of the hips); see the module docstring."""
    _, forward = body_frame(obj, spec)
    hips = _head(obj, spec.hips)
    shoulders = (_head(obj, spec.upper_arms[0]) + _head(obj, spec.upper_arms[1])) / 2.0 - hips
    lean = math.degrees(math.atan2(shoulders.dot(forward), shoulders.z))
    return lean, (_head(obj, spec.head) - hips).dot(forward) * 1e3


def measure(obj, spec, targets, planted_start):
    """The measured fields of an Outcome; planted_start: {foot: (head, tail) in world space before the move}."""
    pin_error = {
        bone: (_head(obj, bone) - target.matrix_world.translation).length * 1e3
        for bone, target in targets.items()
    }
    slide = {
        foot: max((_head(obj, foot) - head).length, (_tail(obj, foot) - tail).length) * 1e3
        for foot, (head, tail) in planted_start.items()
    }
    elbows = [elbow(obj, spec, side) for side in (0, 1)]
    knees = [knee(obj, spec, side) for side in (0, 1)]
    values = [*pin_error.values(), *slide.values(), *(x for pair in elbows + knees for x in pair)]
    values += [c for b in obj.pose.bones for c in (*b.rotation_quaternion, *b.rotation_euler, *b.location)]
    raised = tuple(
        (_head(obj, spec.forearms[side]).z - _head(obj, spec.upper_arms[side]).z) * 1e3 for side in (0, 1)
    )
    return {
        "pin_error_mm": pin_error,
        "foot_slide_mm": slide,
        "elbow_bend_deg": tuple(e[0] for e in elbows),
        "elbow_hinge_deg": tuple(e[1] for e in elbows),
        "knee_bend_deg": tuple(k[0] for k in knees),
        "knee_front_mm": tuple(k[1] for k in knees),
        "elbow_above_shoulder_mm": raised,
        "torso_twist_deg": torso_twist(obj, spec),
        **dict(zip(("lean_deg", "head_front_mm"), trunk(obj, spec))),
        "finite": all(math.isfinite(v) for v in values),
    }
