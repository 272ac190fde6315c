"""The generic T-pose test rig as scene-document bones, named by any bone-name convention the
presets know, and the standing character built from it (the presets', balance and pole tests)."""

import numpy as np

from solver import quat
from solver.presets import preset_limits
from solver.skeleton import Skeleton
from tests.support.kusudamas import joint_limits

# Generic T-pose (Z up, facing -Y, character's left = +X): role -> (parent role, head, tail).
LEFT_SIDE = {
    "clavicle": ("chest", (0.02, 0.0, 1.45), (0.17, 0.0, 1.46)),
    "upper_arm": ("clavicle", (0.17, 0.0, 1.46), (0.45, 0.0, 1.46)),
    "forearm": ("upper_arm", (0.45, 0.0, 1.46), (0.70, 0.0, 1.46)),
    "hand": ("forearm", (0.70, 0.0, 1.46), (0.80, 0.0, 1.46)),
    "finger_1": ("hand", (0.80, -0.02, 1.46), (0.84, -0.02, 1.46)),
    "finger_2": ("finger_1", (0.84, -0.02, 1.46), (0.87, -0.02, 1.46)),
    "finger_3": ("finger_2", (0.87, -0.02, 1.46), (0.89, -0.02, 1.46)),
    "thumb_1": ("hand", (0.72, -0.02, 1.45), (0.75, -0.05, 1.44)),
    "thumb_2": ("thumb_1", (0.75, -0.05, 1.44), (0.77, -0.07, 1.44)),
    "thumb_3": ("thumb_2", (0.77, -0.07, 1.44), (0.79, -0.09, 1.44)),
    "thigh": ("hips", (0.10, 0.0, 0.95), (0.10, -0.01, 0.52)),
    "shin": ("thigh", (0.10, -0.01, 0.52), (0.10, 0.0, 0.08)),
    "foot": ("shin", (0.10, 0.0, 0.08), (0.10, -0.13, 0.02)),
    "toes": ("foot", (0.10, -0.13, 0.02), (0.10, -0.19, 0.02)),
}
CENTRE = {
    "hips": (None, (0.0, 0.0, 1.0), (0.0, 0.0, 1.1)),
    "spine": ("hips", (0.0, 0.0, 1.1), (0.0, 0.0, 1.25)),
    "chest": ("spine", (0.0, 0.0, 1.25), (0.0, 0.0, 1.45)),
    "neck": ("chest", (0.0, 0.0, 1.45), (0.0, 0.0, 1.55)),
    "head": ("neck", (0.0, 0.0, 1.55), (0.0, 0.0, 1.75)),
}

CONVENTIONS = {
    "mixamo": {
        "hips": "mixamorig:Hips",
        "spine": "mixamorig:Spine",
        "chest": "mixamorig:Spine1",
        "neck": "mixamorig:Neck",
        "head": "mixamorig:Head",
        "clavicle": "mixamorig:{Side}Shoulder",
        "upper_arm": "mixamorig:{Side}Arm",
        "forearm": "mixamorig:{Side}ForeArm",
        "hand": "mixamorig:{Side}Hand",
        "finger_1": "mixamorig:{Side}HandIndex1",
        "finger_2": "mixamorig:{Side}HandIndex2",
        "finger_3": "mixamorig:{Side}HandIndex3",
        "thumb_1": "mixamorig:{Side}HandThumb1",
        "thumb_2": "mixamorig:{Side}HandThumb2",
        "thumb_3": "mixamorig:{Side}HandThumb3",
        "thigh": "mixamorig:{Side}UpLeg",
        "shin": "mixamorig:{Side}Leg",
        "foot": "mixamorig:{Side}Foot",
        "toes": "mixamorig:{Side}ToeBase",
    },
    "rigify": {
        "hips": "spine",
        "spine": "spine.001",
        "chest": "spine.002",
        "neck": "spine.004",
        "head": "spine.006",
        "clavicle": "shoulder.{S}",
        "upper_arm": "upper_arm.{S}",
        "forearm": "forearm.{S}",
        "hand": "hand.{S}",
        "finger_1": "f_index.01.{S}",
        "finger_2": "f_index.02.{S}",
        "finger_3": "f_index.03.{S}",
        "thumb_1": "thumb.01.{S}",
        "thumb_2": "thumb.02.{S}",
        "thumb_3": "thumb.03.{S}",
        "thigh": "thigh.{S}",
        "shin": "shin.{S}",
        "foot": "foot.{S}",
        "toes": "toe.{S}",
    },
    "rigify_def": {
        "hips": "DEF-spine",
        "spine": "DEF-spine.001",
        "chest": "DEF-spine.002",
        "neck": "DEF-spine.004",
        "head": "DEF-spine.006",
        "clavicle": "DEF-shoulder.{S}",
        "upper_arm": "DEF-upper_arm.{S}",
        "forearm": "DEF-forearm.{S}",
        "hand": "DEF-hand.{S}",
        "finger_1": "DEF-f_index.01.{S}",
        "finger_2": "DEF-f_index.02.{S}",
        "finger_3": "DEF-f_index.03.{S}",
        "thumb_1": "DEF-thumb.01.{S}",
        "thumb_2": "DEF-thumb.02.{S}",
        "thumb_3": "DEF-thumb.03.{S}",
        "thigh": "DEF-thigh.{S}",
        "shin": "DEF-shin.{S}",
        "foot": "DEF-foot.{S}",
        "toes": "DEF-toe.{S}",
    },
    "vrm": {
        "hips": "hips",
        "spine": "spine",
        "chest": "chest",
        "neck": "neck",
        "head": "head",
        "clavicle": "{side}Shoulder",
        "upper_arm": "{side}UpperArm",
        "forearm": "{side}LowerArm",
        "hand": "{side}Hand",
        "finger_1": "{side}IndexProximal",
        "finger_2": "{side}IndexIntermediate",
        "finger_3": "{side}IndexDistal",
        "thumb_1": "{side}ThumbMetacarpal",
        "thumb_2": "{side}ThumbProximal",
        "thumb_3": "{side}ThumbDistal",
        "thigh": "{side}UpperLeg",
        "shin": "{side}LowerLeg",
        "foot": "{side}Foot",
        "toes": "{side}Toes",
    },
    "vroid": {
        "hips": "J_Bip_C_Hips",
        "spine": "J_Bip_C_Spine",
        "chest": "J_Bip_C_Chest",
        "neck": "J_Bip_C_Neck",
        "head": "J_Bip_C_Head",
        "clavicle": "J_Bip_{S}_Shoulder",
        "upper_arm": "J_Bip_{S}_UpperArm",
        "forearm": "J_Bip_{S}_LowerArm",
        "hand": "J_Bip_{S}_Hand",
        "finger_1": "J_Bip_{S}_Index1",
        "finger_2": "J_Bip_{S}_Index2",
        "finger_3": "J_Bip_{S}_Index3",
        "thumb_1": "J_Bip_{S}_Thumb1",
        "thumb_2": "J_Bip_{S}_Thumb2",
        "thumb_3": "J_Bip_{S}_Thumb3",
        "thigh": "J_Bip_{S}_UpperLeg",
        "shin": "J_Bip_{S}_LowerLeg",
        "foot": "J_Bip_{S}_Foot",
        "toes": "J_Bip_{S}_ToeBase",
    },
    "cmu_bvh": {
        "hips": "Hips",
        "spine": "LowerBack",
        "chest": "Spine1",
        "neck": "Neck",
        "head": "Head",
        "clavicle": "{Side}Shoulder",
        "upper_arm": "{Side}Arm",
        "forearm": "{Side}ForeArm",
        "hand": "{Side}Hand",
        "finger_1": "{Side}HandIndex1",
        "finger_2": "{Side}HandIndex2",
        "finger_3": "{Side}HandIndex3",
        "thumb_1": "{S}Thumb1",
        "thumb_2": "{S}Thumb2",
        "thumb_3": "{S}Thumb3",
        "thigh": "{Side}UpLeg",
        "shin": "{Side}Leg",
        "foot": "{Side}Foot",
        "toes": "{Side}ToeBase",
    },
    "unreal": {
        "hips": "pelvis",
        "spine": "spine_01",
        "chest": "spine_02",
        "neck": "neck_01",
        "head": "head",
        "clavicle": "clavicle_{s}",
        "upper_arm": "upperarm_{s}",
        "forearm": "lowerarm_{s}",
        "hand": "hand_{s}",
        "finger_1": "index_01_{s}",
        "finger_2": "index_02_{s}",
        "finger_3": "index_03_{s}",
        "thumb_1": "thumb_01_{s}",
        "thumb_2": "thumb_02_{s}",
        "thumb_3": "thumb_03_{s}",
        "thigh": "thigh_{s}",
        "shin": "calf_{s}",
        "foot": "foot_{s}",
        "toes": "ball_{s}",
    },
    "rigify_controls": {
        "hips": "hips",
        "spine": "spine_fk.001",
        "chest": "chest",
        "neck": "neck",
        "head": "head",
        "clavicle": "shoulder.{S}",
        "upper_arm": "upper_arm_fk.{S}",
        "forearm": "forearm_fk.{S}",
        "hand": "hand_fk.{S}",
        "finger_1": "f_index.01.{S}",
        "finger_2": "f_index.02.{S}",
        "finger_3": "f_index.03.{S}",
        "thumb_1": "thumb.01.{S}",
        "thumb_2": "thumb.02.{S}",
        "thumb_3": "thumb.03.{S}",
        "thigh": "thigh_fk.{S}",
        "shin": "shin_fk.{S}",
        "foot": "foot_fk.{S}",
        "toes": "toe_fk.{S}",
    },
    "auto_rig_pro": {
        "hips": "c_root.x",
        "spine": "c_spine_01.x",
        "chest": "c_spine_02.x",
        "neck": "c_neck.x",
        "head": "c_head.x",
        "clavicle": "c_shoulder.{s}",
        "upper_arm": "c_arm_fk.{s}",
        "forearm": "c_forearm_fk.{s}",
        "hand": "c_hand_fk.{s}",
        "finger_1": "c_index1.{s}",
        "finger_2": "c_index2.{s}",
        "finger_3": "c_index3.{s}",
        "thumb_1": "c_thumb1.{s}",
        "thumb_2": "c_thumb2.{s}",
        "thumb_3": "c_thumb3.{s}",
        "thigh": "c_thigh_fk.{s}",
        "shin": "c_leg_fk.{s}",
        "foot": "c_foot_fk.{s}",
        "toes": "c_toes_fk.{s}",
    },
    "character_creator": {
        "hips": "CC_Base_Hip",
        "spine": "CC_Base_Waist",
        "chest": "CC_Base_Spine02",
        "neck": "CC_Base_NeckTwist01",
        "head": "CC_Base_Head",
        "clavicle": "CC_Base_{S}_Clavicle",
        "upper_arm": "CC_Base_{S}_Upperarm",
        "forearm": "CC_Base_{S}_Forearm",
        "hand": "CC_Base_{S}_Hand",
        "finger_1": "CC_Base_{S}_Index1",
        "finger_2": "CC_Base_{S}_Index2",
        "finger_3": "CC_Base_{S}_Index3",
        "thumb_1": "CC_Base_{S}_Thumb1",
        "thumb_2": "CC_Base_{S}_Thumb2",
        "thumb_3": "CC_Base_{S}_Thumb3",
        "thigh": "CC_Base_{S}_Thigh",
        "shin": "CC_Base_{S}_Calf",
        "foot": "CC_Base_{S}_Foot",
        "toes": "CC_Base_{S}_ToeBase",
    },
    "daz_genesis_8": {
        "hips": "hip",
        "spine": "abdomenLower",
        "chest": "chestLower",
        "neck": "neckLower",
        "head": "head",
        "clavicle": "{s}Collar",
        "upper_arm": "{s}ShldrBend",
        "forearm": "{s}ForearmBend",
        "hand": "{s}Hand",
        "finger_1": "{s}Index1",
        "finger_2": "{s}Index2",
        "finger_3": "{s}Index3",
        "thumb_1": "{s}Thumb1",
        "thumb_2": "{s}Thumb2",
        "thumb_3": "{s}Thumb3",
        "thigh": "{s}ThighBend",
        "shin": "{s}Shin",
        "foot": "{s}Foot",
        "toes": "{s}Toe",
    },
}


def bone_name(convention, role, side):
    words = {
        "S": side,
        "s": side.lower(),
        "Side": "Left" if side == "L" else "Right",
        "side": "left" if side == "L" else "right",
    }
    return CONVENTIONS[convention][role].format(**words)


def rest_matrix(head, tail, roll=0.0):
    head, tail = np.array(head, float), np.array(tail, float)
    rotation = quat.multiply(quat.shortest_arc((0, 1, 0), tail - head), quat.from_axis_angle((0, 1, 0), roll))
    m = np.eye(4)
    m[:3, :3] = quat.to_matrix(rotation)
    m[:3, 3] = head
    return m


def build_rig(convention="mixamo", rolls=None, transform=None):
    """Scene-document bones of the generic T-pose rig; rolls: role.side -> roll angle."""
    rolls = rolls or {}
    bones = []
    layout = [(role, None, spec) for role, spec in CENTRE.items()]
    for side, mirror in (("L", 1.0), ("R", -1.0)):
        for role, (parent, head, tail) in LEFT_SIDE.items():
            m = np.array([mirror, 1.0, 1.0])
            layout.append((role, side, (parent, tuple(np.array(head) * m), tuple(np.array(tail) * m))))
    for role, side, (parent, head, tail) in layout:
        key = role if side is None else f"{role}.{side}"
        rest = rest_matrix(head, tail, rolls.get(key, 0.0))
        if transform is not None:
            rest = transform @ rest
        parent_side = None if parent in CENTRE else side
        bones.append(
            {
                "name": bone_name(convention, role, side or "L"),
                "parent": None if parent is None else bone_name(convention, parent, parent_side or "L"),
                "rest": rest.tolist(),
                "length": float(np.linalg.norm(np.subtract(tail, head))),
            }
        )
    return bones


PINNED = (
    "mixamorig:Head",
    "mixamorig:LeftHand",
    "mixamorig:RightHand",
    "mixamorig:LeftFoot",
    "mixamorig:RightFoot",
)


def standing_character():
    """The T-pose test rig in metres (straight legs) and its humanoid preset limits (the knees
    are hinges that bend one way)."""
    bones = build_rig("mixamo")
    skeleton = Skeleton(
        [b["name"] for b in bones],
        [b["parent"] for b in bones],
        [np.array(b["rest"]) for b in bones],
        [b["length"] for b in bones],
    )
    limits = joint_limits(skeleton.names, preset_limits(bones))
    return skeleton, limits
