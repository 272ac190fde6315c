"""Humanoid presets: name conventions, anatomy on synthetic rigs, roll / up-axis independence."""

import copy
import dataclasses
import math
import pathlib

import numpy as np
import pytest

from solver import PresetError, quat
from solver.kusudama import JointLimits, Kusudama
from solver.presets import (
    apply_limit_preset,
    available_presets,
    body_roles,
    bone_roles,
    has_humanoid_limbs,
    preset_limits,
    preset_stiffness,
)
from tests.support import clinical
from tests.support.kusudamas import joint_limits
from tests.support.mocap import CLIPS, forward_kinematics, load_bvh, straight_line_rest
from tests.support.tpose_rig import CENTRE, CONVENTIONS, LEFT_SIDE, bone_name, build_rig


def expected_roles(convention):
    out = {}
    for role in CENTRE:
        out[bone_name(convention, role, "L")] = role
    for side in "LR":
        for role in LEFT_SIDE:
            out[bone_name(convention, role, side)] = f"{role}.{side}"
    return out


@pytest.mark.parametrize("convention", sorted(CONVENTIONS))
def test_bone_roles_per_convention(convention):
    expected = expected_roles(convention)
    assert bone_roles(list(expected)) == expected


def test_bone_roles_cmu_3dsmax_and_asf_names():
    names = [
        "Hips",
        "LHipJoint",
        "LeftHip",
        "LeftKnee",
        "LeftAnkle",
        "LeftToe",
        "lowerback",
        "Chest",
        "Chest2",
        "lowerneck",
        "Neck",
        "Head",
        "LeftCollar",
        "LeftShoulder",
        "LeftElbow",
        "LeftWrist",
        "lhand",
        "LFingers",
        "LThumb",
        "RightShoulder",
    ]
    roles = bone_roles(names)
    assert roles == {
        "Hips": "hips",
        "LHipJoint": "pelvis_side.L",
        "LeftHip": "thigh.L",
        "LeftKnee": "shin.L",
        "LeftAnkle": "foot.L",
        "LeftToe": "toes.L",
        "lowerback": "spine",
        "Chest": "chest",
        "Chest2": "chest",
        "lowerneck": "neck",
        "Neck": "neck",
        "Head": "head",
        "LeftCollar": "clavicle.L",
        "LeftShoulder": "upper_arm.L",
        "LeftElbow": "forearm.L",
        "LeftWrist": "wrist.L",
        "lhand": "hand.L",
        "LFingers": "fingers.L",
        "LThumb": "thumb.L",
        "RightShoulder": "upper_arm.R",
    }
    asf = bone_roles(
        [
            "root",
            "lfemur",
            "ltibia",
            "lfoot",
            "ltoes",
            "upperback",
            "thorax",
            "upperneck",
            "lclavicle",
            "lhumerus",
            "lradius",
            "lwrist",
            "rhand",
        ]
    )
    assert asf["lfemur"] == "thigh.L" and asf["lhumerus"] == "upper_arm.L"
    assert asf["lradius"] == "forearm.L" and asf["rhand"] == "hand.R" and asf["thorax"] == "chest"


def test_unrecognised_and_segment_names():
    roles = bone_roles(
        [
            "breast.L",
            "heel.02.L",
            "Armature",
            "mixamorig:HeadTop_End",
            "mixamorig:LeftHandIndex4",
            "DEF-upper_arm.L.001",
            "DEF-forearm.R.001",
            "DEF-thigh.L.001",
            "palm.01.L",
            "ORG-hand.L",
            "lowerback",
        ]
    )
    assert roles == {
        "DEF-upper_arm.L.001": "upper_arm_twist.L",
        "DEF-forearm.R.001": "forearm_twist.R",
        "DEF-thigh.L.001": "thigh_twist.L",
        "palm.01.L": "palm.L",
        "lowerback": "spine",
    }


def test_available_presets():
    presets = available_presets()
    assert [p[0] for p in presets] == ["humanoid"]
    assert all(isinstance(p[1], str) and p[2] for p in presets)
    with pytest.raises(PresetError) as caught:
        preset_limits(build_rig(), preset="dragon")
    assert caught.value.field == "preset"


@pytest.mark.parametrize("convention", sorted(CONVENTIONS))
def test_rest_pose_is_inside_and_roots_are_free(convention):
    bones = build_rig(convention)
    limits = preset_limits(bones)
    assert bone_name(convention, "hips", "L") not in limits
    assert len(limits) == len(bones) - 1
    violation = joint_limits([b["name"] for b in bones], limits).violation(
        np.tile(quat.IDENTITY, (len(bones), 1))
    )
    assert np.all(violation == 0.0)


class Posed:
    """Checks world-space directions against one bone's preset, its parent at rest."""

    def __init__(self, bones, limits, name):
        bone = next(b for b in bones if b["name"] == name)
        self.rest = np.array(bone["rest"])[:3, :3]
        self.kusudama = Kusudama.from_dict(limits[name], bone=name)
        self.limits = JointLimits({0: self.kusudama}, 1)

    def allows(self, world_directions):
        """Bool (or array of bools) for world direction(s) (..., 3)."""
        local = np.asarray(world_directions, float) @ self.rest
        out = self.kusudama.allows(local)
        return bool(out) if out.ndim == 0 else out

    def allows_twist(self, angle):
        q = quat.from_axis_angle((0.0, 1.0, 0.0), angle)
        return self.limits.violation(q[None])[0] == 0.0


def direction(deg_from, axis_from, deg, axis_to):
    a, b = np.array(axis_from, float), np.array(axis_to, float)
    return math.cos(math.radians(deg)) * a + math.sin(math.radians(deg)) * b


DOWN, UP, FWD, BACK, OUT, IN = (0, 0, -1), (0, 0, 1), (0, -1, 0), (0, 1, 0), (1, 0, 0), (-1, 0, 0)


def test_anatomy_of_the_left_side():
    bones = build_rig("rigify")
    limits = preset_limits(bones)

    def posed(role):
        return Posed(bones, limits, bone_name("rigify", role, "L"))

    arm = posed("upper_arm")
    for ok in (DOWN, FWD, OUT, UP, direction(0, DOWN, 40, BACK), direction(0, FWD, 25, IN)):
        assert arm.allows(ok), ok
    for bad in (BACK, direction(0, DOWN, 35, IN), direction(0, BACK, 30, IN)):
        assert not arm.allows(bad), bad
    # The rig's rest holds the arm out at 90 degrees of abduction, where the tables measure rotation.
    assert arm.allows_twist(math.radians(70)) and arm.allows_twist(math.radians(-90))
    assert not arm.allows_twist(math.radians(150)) and not arm.allows_twist(math.radians(-150))

    forearm = posed("forearm")
    for ok in (OUT, FWD, direction(0, OUT, 130, FWD)):
        assert forearm.allows(ok), ok
    for bad in (direction(0, OUT, 30, BACK), UP, DOWN, direction(0, OUT, 170, FWD)):
        assert not forearm.allows(bad), bad

    thigh = posed("thigh")
    for ok in (DOWN, FWD, direction(0, DOWN, 40, OUT), direction(0, DOWN, 15, BACK)):
        assert thigh.allows(ok), ok
    for bad in (direction(0, DOWN, 60, BACK), direction(0, DOWN, 45, IN), UP, OUT):
        assert not thigh.allows(bad), bad

    shin = posed("shin")
    for ok in (DOWN, BACK, direction(0, DOWN, 140, BACK)):
        assert shin.allows(ok), ok
    for bad in (direction(0, DOWN, 20, FWD), direction(0, DOWN, 45, OUT), direction(0, DOWN, 45, IN)):
        assert not shin.allows(bad), bad

    foot = posed("foot")
    foot_dir = np.array([0.0, -0.13, -0.06]) / np.linalg.norm([0.0, -0.13, -0.06])
    assert foot.allows(foot_dir)
    assert foot.allows(quat.rotate(quat.from_axis_angle(OUT, math.radians(20)), foot_dir))
    assert not foot.allows(quat.rotate(quat.from_axis_angle(OUT, math.radians(80)), foot_dir))

    head = posed("head")
    assert head.allows(direction(0, UP, 20, FWD)) and not head.allows(direction(0, UP, 70, FWD))
    assert head.allows_twist(math.radians(35)) and not head.allows_twist(math.radians(75))
    spine = posed("spine")
    assert spine.allows(direction(0, UP, 30, FWD)) and not spine.allows(direction(0, UP, 70, FWD))
    assert not spine.allows(direction(0, UP, 40, BACK))

    finger = posed("finger_2")
    assert finger.allows(DOWN) and finger.allows(OUT)
    assert not finger.allows(UP) and not finger.allows(direction(0, OUT, 30, UP))


def clinical_violations(bones):
    """{(bone, motion): radians outside the preset at the sweep's worst angle} of every recognised
    bone moved through its clinical range (tests/support/clinical.py), the rest of the rig at rest."""
    limits = preset_limits(bones)
    joint = joint_limits([b["name"] for b in bones], limits)
    index = {b["name"]: i for i, b in enumerate(bones)}
    body = clinical.Body(bones)
    out = {}
    for name in body.swept():
        for motion, (_, rotations) in body.motions(name).items():
            poses = np.tile(quat.IDENTITY, (len(rotations), len(bones), 1))
            poses[:, index[name]] = rotations
            out[(name, motion)] = max(joint.violation(pose)[index[name]] for pose in poses)
    return out


SWEPT_ROLES = {
    "spine", "chest", "neck", "head", "upper_arm", "forearm", "hand", "thumb_1", "thumb_2", "thumb_3",
    "finger_1", "finger_2", "finger_3", "thigh", "shin", "foot", "toes",
}  # fmt: skip


def unreal_trunk():
    """The Unreal-named test rig with its chest cut into spine_02 ... spine_05, as the Mannequin's."""
    bones = build_rig("unreal")
    chest = next(b for b in bones if b["name"] == "spine_02")
    rest, step = np.array(chest["rest"]), 0.25 * chest["length"]
    parts = []
    for k in range(4):
        moved = rest.copy()
        moved[:3, 3] += k * step * rest[:3, 1]
        parent = "spine_01" if k == 0 else f"spine_0{k + 1}"
        parts.append(dict(chest, name=f"spine_0{k + 2}", parent=parent, rest=moved.tolist(), length=step))
    for bone in bones:
        if bone["parent"] == "spine_02":
            bone["parent"] = "spine_05"
    i = bones.index(chest)
    return bones[:i] + parts + bones[i + 1 :]


CLINICAL_RIGS = {
    "rigify": lambda: build_rig("rigify"),
    "cmu_bvh": lambda: build_rig("cmu_bvh"),
    "unreal": unreal_trunk,
}


@pytest.mark.parametrize("rig", sorted(CLINICAL_RIGS))
def test_a_persons_clinical_ranges_are_inside(rig):
    """Each joint moved through the active range the clinical tables give (docs/limits/humanoid.md)
    stays inside the preset: flexion and extension, abduction and adduction, axial rotation where
    the tables measure it, the spine's ranges shared by its bones (two in the trunk here, five on
    the Unreal rig)."""
    bones = CLINICAL_RIGS[rig]()
    violations = clinical_violations(bones)
    roles = bone_roles([b["name"] for b in bones])
    assert {roles[name].partition(".")[0] for name, _ in violations} == SWEPT_ROLES
    outside = {key: round(math.degrees(v), 3) for key, v in violations.items() if v > 1e-9}
    assert not outside, f"clinical motions outside the preset (degrees): {outside}"


def test_the_spine_shares_its_range_between_its_bones():
    """A trunk of n bones gives each spread / n of the trunk's range (all of it for one bone): the
    whole trunk bends as far as a person's and no bone alone much further than its share."""
    region = clinical.TABLE["regions"]["thoracolumbar"]
    flexion = region["range"]["flex"][1]
    for bones, chest, trunk in (
        (build_rig("mixamo"), "mixamorig:Spine1", 2),
        (unreal_trunk(), "spine_03", 5),
    ):
        share = min(1.0, region["spread"] / trunk)
        bent = Posed(bones, preset_limits(bones), chest)
        assert bent.allows(direction(0, UP, 0.95 * flexion * share, FWD)), chest
        assert not bent.allows(direction(0, UP, 1.1 * flexion * share + 5.0, FWD)), chest


def test_the_hand_turns_the_forearm_unless_a_bone_between_does():
    """Pronation and supination are the twist of the hand where nothing else carries the forearm's
    roll, else of the bone between forearm and hand (a forearm twist bone) with the hand's own
    twist small; the forearm itself stays a hinge with little twist."""
    hand = clinical.TABLE["roles"]["hand"]
    plain = build_rig("rigify_def")
    twisted = copy.deepcopy(plain)
    by_name = {b["name"]: b for b in twisted}
    forearm = by_name["DEF-forearm.L"]
    half = dict(forearm, name="DEF-forearm.L.001", parent="DEF-forearm.L", length=0.5 * forearm["length"])
    rest = np.array(forearm["rest"])
    rest[:3, 3] += 0.5 * forearm["length"] * rest[:3, 1]
    half["rest"] = rest.tolist()
    forearm["length"] *= 0.5
    by_name["DEF-hand.L"]["parent"] = "DEF-forearm.L.001"
    twisted.append(half)

    def width(limits, name):
        return math.degrees(limits[name]["twist"]["max"] - limits[name]["twist"]["min"])

    a, b = preset_limits(plain), preset_limits(twisted)
    roll = hand["twist"][1] - hand["twist"][0]
    assert width(a, "DEF-hand.L") == pytest.approx(roll) and width(a, "DEF-hand.R") == pytest.approx(roll)
    assert width(b, "DEF-forearm.L.001") == pytest.approx(roll)
    assert width(b, "DEF-hand.L") == pytest.approx(hand["twist_below_roll"][1] - hand["twist_below_roll"][0])
    assert width(b, "DEF-hand.R") == pytest.approx(roll)
    assert width(a, "DEF-forearm.L") < 0.5 * roll


def test_the_arms_twist_is_judged_the_same_held_out_or_hanging():
    """The table's rotation is counted from the arm hanging (the anatomical zero), not from the rig's
    rest: an arm rigged in a T pose and the same arm rigged hanging judge every world pose alike."""
    t_pose = build_rig("mixamo")
    hanging = copy.deepcopy(t_pose)
    lower = quat.to_matrix(quat.from_axis_angle((0.0, 1.0, 0.0), math.pi / 2))  # +X (out) to -Z (down)
    shoulder = np.array(LEFT_SIDE["upper_arm"][1])
    arm = [bone_name("mixamo", role, "L") for role in ("upper_arm", "forearm", "hand")]
    for bone in hanging:
        if bone["name"] in arm or bone["parent"] in arm[1:]:
            rest = np.array(bone["rest"])
            rest[:3, :3] = lower @ rest[:3, :3]
            rest[:3, 3] = shoulder + lower @ (rest[:3, 3] - shoulder)
            bone["rest"] = rest.tolist()
    world = {}
    for label, bones in (("t_pose", t_pose), ("hanging", hanging)):
        rest = next(np.array(b["rest"])[:3, :3] for b in bones if b["name"] == arm[0])
        world[label] = (rest, Posed(bones, preset_limits(bones), arm[0]).limits)
    rng = np.random.default_rng(5)
    turns = quat.normalize(rng.normal(size=(400, 4)))
    judged = {}
    for label, (rest, limits) in world.items():
        local = quat.multiply(
            quat.multiply(quat.conjugate(quat.from_matrix(rest)), turns), quat.from_matrix(rest)
        )
        local = quat.multiply(local, quat.from_matrix(rest.T @ world["t_pose"][0]))
        judged[label] = np.array([limits.violation(q[None])[0] for q in local])
    np.testing.assert_allclose(judged["hanging"], judged["t_pose"], atol=1e-6)
    assert 0.2 < np.mean(judged["t_pose"] == 0.0) < 0.8


DOCUMENTED = pathlib.Path(__file__).resolve().parents[2] / "docs" / "limits" / "humanoid.md"
MEASURED_AT = {"abduct": "abduction", "flex": "flexion"}


def test_the_documented_table_is_the_presets():
    """docs/limits/humanoid.md lists each role's clinical range, and the spine's regions', as
    humanoid.json holds them, with where the tables measure rotation."""
    documented = {}
    for line in DOCUMENTED.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.split("|")[1:-1]]
        if cells and cells[0].startswith("`"):
            ranges = {
                m: [int(v) for v in c.split(" / ")]
                for m, c in zip(("flex", "abduct", "twist"), cells[2:5])
                if c
            }
            documented[cells[0].strip("`")] = ranges, cells[5]
    held = {role: spec["range"] for role, spec in clinical.TABLE["roles"].items() if "range" in spec}
    held.update({region: spec["range"] for region, spec in clinical.TABLE["regions"].items()})
    assert documented.keys() == held.keys()
    for role, (ranges, measured_at) in documented.items():
        at = held[role].get("twist_at", {})
        assert ranges == {m: v for m, v in held[role].items() if m != "twist_at"}, role
        assert measured_at == ", ".join(f"{d} degrees of {MEASURED_AT[m]}" for m, d in at.items()), role


def mirror_x(v):
    return np.array(v) * np.array([-1.0, 1.0, 1.0])


def test_left_and_right_mirror():
    bones = build_rig("mixamo")
    limits = preset_limits(bones)
    rng = np.random.default_rng(3)
    dirs = rng.normal(size=(400, 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    for role in LEFT_SIDE:
        left = Posed(bones, limits, bone_name("mixamo", role, "L"))
        right = Posed(bones, limits, bone_name("mixamo", role, "R"))
        np.testing.assert_array_equal(left.allows(dirs), right.allows(mirror_x(dirs)), err_msg=role)
        for angle in np.radians([-100, -60, -20, 0, 20, 60, 100]):
            assert left.allows_twist(angle) == right.allows_twist(-angle), role


def world_cones(bones, limits):
    out = {}
    for b in bones:
        if b["name"] in limits:
            rest = np.array(b["rest"])[:3, :3]
            out[b["name"]] = [rest @ c["direction"] for c in limits[b["name"]]["cones"]]
    return out


def test_independent_of_bone_roll():
    rng = np.random.default_rng(4)
    keys = list(CENTRE) + [f"{r}.{s}" for r in LEFT_SIDE for s in "LR"]
    rolled = build_rig("vrm", rolls={k: rng.uniform(-math.pi, math.pi) for k in keys})
    plain = build_rig("vrm")
    a, b = preset_limits(plain), preset_limits(rolled)
    wa, wb = world_cones(plain, a), world_cones(rolled, b)
    for name in a:
        np.testing.assert_allclose(wa[name], wb[name], atol=1e-9)
        assert a[name]["twist"] == pytest.approx(b[name]["twist"])


def test_independent_of_up_axis_and_placement():
    y_up = np.eye(4)
    y_up[:3, :3] = quat.to_matrix(quat.from_axis_angle((1, 0, 0), -math.pi / 2))
    y_up[:3, 3] = (3.0, -1.0, 0.5)
    plain, moved = build_rig("unreal"), build_rig("unreal", transform=y_up)
    a, b = preset_limits(plain), preset_limits(moved)
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_allclose(
            [c["direction"] for c in a[name]["cones"]], [c["direction"] for c in b[name]["cones"]], atol=1e-9
        )


def test_apply_limit_preset_returns_new_document():
    bones = build_rig("rigify") + [
        {
            "name": "prop",
            "parent": "hand.L",
            "rest": np.eye(4).tolist(),
            "length": 0.1,
            "limits": {"cones": []},
        }
    ]
    scene = {"format": "ewbik-scene", "version": 1, "bones": bones, "pins": []}
    before = copy.deepcopy(scene)
    out = apply_limit_preset(scene)
    assert scene == before
    by_name = {b["name"]: b for b in out["bones"]}
    assert by_name["prop"]["limits"] == {"cones": []}
    assert "limits" not in by_name["spine"]
    assert set(by_name["forearm.L"]["limits"]) == {"cones", "twist"}
    for b in out["bones"]:
        if "limits" in b:
            Kusudama.from_dict(b["limits"], bone=b["name"])
    assert by_name["shoulder.L"]["stiffness"] == by_name["shoulder.R"]["stiffness"] == 0.8
    assert "stiffness" not in by_name["forearm.L"]


def test_preset_stiffness_by_role():
    """Stiff roles follow the names, whatever the convention; roots and other roles get none."""
    cmu = preset_stiffness(load_bvh(CLIPS[0]).bones)
    assert cmu == {"LHipJoint": 1.0, "RHipJoint": 1.0, "LeftCollar": 0.8, "RightCollar": 0.8}
    mixamo = preset_stiffness(build_rig("mixamo"))
    assert {bone_roles([n])[n] for n in mixamo} == {"clavicle.L", "clavicle.R"}
    with pytest.raises(PresetError) as error:
        preset_stiffness(build_rig("mixamo"), preset="quadruped")
    assert error.value.field == "preset"


@pytest.fixture(scope="module", params=CLIPS, ids=lambda p: p.stem)
def clip(request):
    return load_bvh(request.param)


def test_straight_line_rest_keeps_every_frames_joints(clip):
    straight = straight_line_rest(clip)
    rest = np.array([b["rest"] for b in straight.bones])
    heads = rest[:, :3, 3] - rest[0, :3, 3]
    assert np.allclose(heads[:, 1:], 0.0) and np.allclose(rest[:, :3, 1], [1.0, 0.0, 0.0])
    assert [b["length"] for b in straight.bones] == [b["length"] for b in clip.bones]
    for frame in (0, len(clip.rotations) // 2, len(clip.rotations) - 1):
        original = forward_kinematics(clip, frame)[:, :3, 3]
        moved = forward_kinematics(straight, frame)[:, :3, 3]
        np.testing.assert_allclose(moved, original, atol=1e-9)
    assert not np.allclose(straight.rotations[0], clip.rotations[0], atol=0.1)


def pose_of(mocap, frame):
    """The clip's frame as a preset_limits pose: {bone: {rotation, location}}."""
    return {
        b["name"]: {
            "rotation": mocap.rotations[frame, i].tolist(),
            "location": mocap.locations[frame, i].tolist(),
        }
        for i, b in enumerate(mocap.bones)
    }


def stub_wrists(mocap, length=0.006):
    """The clip on a rig whose wrists are stubs pointing back up the forearm (Blender's BVH import).

    Each wrist's rest frame is turned half a turn about its X axis (so +Y runs back along the
    forearm) and its local rotations are conjugated to match: every frame's pose is unchanged.
    """
    flip = quat.from_axis_angle((1.0, 0.0, 0.0), math.pi)
    bones, rotations = [], mocap.rotations.copy()
    for i, bone in enumerate(mocap.bones):
        bone = dict(bone)
        if bone["name"] in ("LeftWrist", "RightWrist"):
            rest = np.array(bone["rest"])
            rest[:3, :3] = rest[:3, :3] @ quat.to_matrix(flip)
            bone.update(rest=rest.tolist(), length=length)
            rotations[:, i] = quat.multiply(quat.multiply(quat.conjugate(flip), rotations[:, i]), flip)
        bones.append(bone)
    return dataclasses.replace(mocap, bones=bones, rotations=rotations)


def captured_violation(mocap, limits):
    """{bone: (F,) radians outside its limits} over every captured frame, for limited bones."""
    joint = joint_limits(mocap.names, limits)
    violation = np.array([joint.violation(r) for r in mocap.rotations])
    return {mocap.bones[i]["name"]: violation[:, i] for i in np.flatnonzero(joint.limited)}


def inside_share(violations, names=None):
    values = [v for n, v in violations.items() if names is None or n in names]
    return float(np.mean(np.concatenate(values) <= 1e-6))


WRISTS = ("LeftWrist", "RightWrist")
ONE_DEGREE = math.radians(1.0)


def test_captured_poses_inside_on_any_rest(clip):
    """Every captured bone-frame of the clip lies inside the preset, on the clip's own rig and with
    its wrists rebuilt as stubs (before the preset held a person's whole range: 98.9 / 99.2 % of
    limited bone-frames, clips 01 / 03, ankles up to 21 degrees and thumbs 80 outside).

    The straight-line rig reads its body from the clip's first frame, a step of a walk rather than
    a standing person: the neck, the feet and the thumbs take their neutral from it, so a few
    frames fall outside (measured 98.5 / 99.9 %, the worst the left ankle, the neck and the thumbs;
    before 98.8 / 99.6 %)."""
    normal = captured_violation(clip, preset_limits(clip.bones))
    straight_clip = straight_line_rest(clip)
    straight = captured_violation(
        straight_clip, preset_limits(straight_clip.bones, pose=pose_of(straight_clip, 0))
    )
    stub_clip = stub_wrists(clip)
    stubs = captured_violation(stub_clip, preset_limits(stub_clip.bones))
    for violations in (normal, stubs):
        worst = {
            name: round(math.degrees(v.max()), 2) for name, v in violations.items() if v.max() > ONE_DEGREE
        }
        assert not worst, f"captured poses outside the preset (degrees): {worst}"
    assert inside_share(straight) >= 0.98
    assert inside_share(straight, WRISTS) == 1.0
    assert set(straight) == set(normal) and set(stubs) == set(normal)


def test_a_persons_clinical_ranges_are_inside_on_a_capture_rig():
    """The same sweeps on the CMU rig: arms hanging at rest, three trunk and three neck bones, the
    forearm's roll on its wrist bone (the hand below it barely twists), whole-digit thumbs and
    fingers."""
    bones = load_bvh(CLIPS[0]).bones
    violations = clinical_violations(bones)
    roles = bone_roles([b["name"] for b in bones])
    assert {roles[name].partition(".")[0] for name, _ in violations} == {
        "spine", "chest", "neck", "head", "upper_arm", "forearm", "wrist", "hand", "thumb", "fingers",
        "thigh", "shin", "foot", "toes",
    }  # fmt: skip
    outside = {key: round(math.degrees(v), 3) for key, v in violations.items() if v > 1e-9}
    assert not outside, f"clinical motions outside the preset (degrees): {outside}"


def test_pose_rule_judges_local_rotations_whatever_the_rest(clip):
    """Limits read from the same standing pose judge each captured frame identically on the
    clip's rig and on its straight-line rebuild, and allow that pose itself."""
    straight_clip = straight_line_rest(clip)
    on_clip = captured_violation(clip, preset_limits(clip.bones, pose=pose_of(clip, 0)))
    limits = preset_limits(straight_clip.bones, pose=pose_of(straight_clip, 0))
    on_straight = captured_violation(straight_clip, limits)
    for name, violation in on_clip.items():
        np.testing.assert_allclose(on_straight[name], violation, atol=1e-7, err_msg=name)
        assert on_straight[name][0] <= 1e-9, name


def test_straight_rest_without_pose_is_an_error(clip):
    with pytest.raises(PresetError, match="rest pose|standing pose") as caught:
        preset_limits(straight_line_rest(clip).bones)
    assert caught.value.field == "rest" and isinstance(caught.value, ValueError)
    assert "standing pose" in str(caught.value)


def test_wrist_stub_gets_a_real_cone_and_twist(clip):
    """A wrist stub aimed back up the forearm gets the wrist's own cone and its forearm roll."""
    stub_clip = stub_wrists(clip)
    stub, normal = preset_limits(stub_clip.bones), preset_limits(clip.bones)
    wrist = clinical.TABLE["roles"]["wrist"]
    for name in WRISTS:
        radii = [c["radius"] for c in stub[name]["cones"]]
        assert radii == pytest.approx([math.radians(r) for _, _, r in wrist["cones"]]), name
        twist = stub[name]["twist"]
        assert twist["max"] - twist["min"] == pytest.approx(
            math.radians(wrist["twist"][1] - wrist["twist"][0])
        )
        assert [c["radius"] for c in normal[name]["cones"]] == pytest.approx(radii)


def test_unreadable_rest_and_bad_pose_entries():
    bones = build_rig("mixamo")
    collapsed = copy.deepcopy(bones)
    for b in collapsed:
        b["rest"] = (np.array(b["rest"]) * np.array([1, 1, 1, 0]) + np.diag([0, 0, 0, 1])).tolist()
        b["rest"][0][3] = 0.0
    with pytest.raises(PresetError) as caught:
        preset_limits(collapsed)
    assert caught.value.field == "rest"
    with pytest.raises(PresetError) as caught:
        preset_limits(bones, pose=[[1, 0, 0, 0]])
    assert caught.value.field == "pose"
    with pytest.raises(PresetError) as caught:
        preset_limits(bones, pose={"mixamorig:Hips": "standing"})
    assert caught.value.field == "pose.mixamorig:Hips"
    with pytest.raises(PresetError) as caught:
        preset_limits(bones, pose={"nobody": {"rotation": [1, 0, 0, 0], "location": [0, 0, 0]}})
    assert caught.value.field == "pose.nobody"
    with pytest.raises(PresetError) as caught:
        preset_limits(bones, pose={"mixamorig:Hips": {"rotation": [0, 0, 0, 0], "location": [0, 0, 0]}})
    assert caught.value.field == "pose.mixamorig:Hips.rotation"
    leg_raised = {"rotation": quat.from_axis_angle((1, 0, 0), math.pi).tolist(), "location": [0, 0, 0]}
    with pytest.raises(PresetError) as caught:
        preset_limits(bones, pose={"mixamorig:LeftUpLeg": leg_raised})
    assert caught.value.field == "pose"


def test_pose_of_a_turned_body_gives_the_rest_limits():
    """Turning and moving the whole body in the reference pose changes nothing."""
    bones = build_rig("rigify")
    turn = quat.from_axis_angle((0.3, -0.5, 0.8), 2.0)
    pose = {"spine": {"rotation": turn.tolist(), "location": [0.4, -1.0, 2.0]}}
    a, b = preset_limits(bones), preset_limits(bones, pose=pose)
    for name in a:
        np.testing.assert_allclose(
            [c["direction"] for c in b[name]["cones"]], [c["direction"] for c in a[name]["cones"]], atol=1e-9
        )
        assert b[name]["twist"]["min"] == pytest.approx(a[name]["twist"]["min"], abs=1e-9)


def test_has_humanoid_limbs():
    legs = ["thigh.L", "shin.L", "thigh.R", "shin.R"]
    arms = ["mixamorig:LeftArm", "mixamorig:LeftForeArm", "mixamorig:RightArm", "mixamorig:RightForeArm"]
    assert has_humanoid_limbs(legs) and has_humanoid_limbs(arms + ["tail"])
    assert not has_humanoid_limbs(legs[:3] + arms[:3]) and not has_humanoid_limbs(["spine", "head"])


def test_twist_segments_and_genesis_9_limbs():
    names = [
        "upperarm_twist_01_l",
        "lowerarm_twist_02_r",
        "calf_twist_01_l",
        "CC_Base_L_UpperarmTwist01",
        "CC_Base_R_ForearmTwist02",
        "lShldrTwist",
        "rThighTwist",
        "c_root_master.x",
        "c_traj",
        "torso",
        "l_upperarm",
        "r_forearm",
        "l_thigh",
        "r_shin",
        "neckUpper",
    ]
    assert bone_roles(names) == {
        "l_upperarm": "upper_arm.L",
        "r_forearm": "forearm.R",
        "l_thigh": "thigh.L",
        "r_shin": "shin.R",
        "neckUpper": "neck",
        "upperarm_twist_01_l": "upper_arm_twist.L",
        "lowerarm_twist_02_r": "forearm_twist.R",
        "calf_twist_01_l": "shin_twist.L",
        "CC_Base_L_UpperarmTwist01": "upper_arm_twist.L",
        "CC_Base_R_ForearmTwist02": "forearm_twist.R",
        "lShldrTwist": "upper_arm_twist.L",
        "rThighTwist": "thigh_twist.R",
    }


def test_overrides_map_unknown_names_and_leave_bones_out():
    bones = build_rig("mixamo")
    renamed = {"mixamorig:LeftForeArm": "Bone.007", "mixamorig:RightForeArm": "Bone.012"}
    for bone in bones:
        bone["name"] = renamed.get(bone["name"], bone["name"])
        bone["parent"] = renamed.get(bone["parent"], bone["parent"])
    names = [bone["name"] for bone in bones]
    assert "Bone.007" not in preset_limits(bones)
    overrides = {"Bone.007": "forearm.L", "Bone.012": "forearm.R", "mixamorig:Neck": "", "Missing": "head"}
    assert bone_roles(names, overrides)["Bone.007"] == "forearm.L"
    assert "mixamorig:Neck" not in bone_roles(names, overrides)
    mapped = preset_limits(bones, overrides=overrides)
    reference = preset_limits(build_rig("mixamo"))
    assert "mixamorig:Neck" not in mapped
    for ours, theirs in renamed.items():
        np.testing.assert_allclose(
            [c["direction"] for c in mapped[theirs]["cones"]],
            [c["direction"] for c in reference[ours]["cones"]],
            atol=1e-12,
        )
    assert has_humanoid_limbs(names, overrides) and not has_humanoid_limbs(
        names, {"mixamorig:LeftUpLeg": "", "mixamorig:LeftArm": ""}
    )


def test_override_with_an_unknown_role_names_the_bone():
    with pytest.raises(PresetError) as caught:
        bone_roles(["Bone"], {"Bone": "tail.L"})
    assert caught.value.field == "overrides.Bone"
    assert set(body_roles()) >= {"hips", "head", "upper_arm.L", "forearm.R", "foot.L"}
