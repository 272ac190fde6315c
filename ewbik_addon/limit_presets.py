"""Humanoid presets onto an armature: where the body is read from, and what the preset writes.

Shared by Presets > Humanoid and by pinning (Humanoid Limits on Pin), so both read the body and
store limits and stiffness the same way.
"""

from ..solver import presets
from . import production_rigs
from .bridge import fixed_bones
from .limit_settings import scene_bones, set_limits


def current_pose(obj):
    """The armature's current pose as a preset pose: {bone: {rotation, location}} local to rest."""
    return {
        pose_bone.name: {
            "rotation": list(pose_bone.matrix_basis.to_quaternion()),
            "location": list(pose_bone.matrix_basis.to_translation()),
        }
        for pose_bone in obj.pose.bones
    }


def preset_overrides(obj):
    """The role mapping a preset uses on this armature: the user's table, with the bones that
    constraints or drivers pose left out (limits there would never act; their controls get them)."""
    return {**production_rigs.role_overrides(obj), **{bone: "" for bone in fixed_bones(obj)}}


def fitted_preset(obj, preset, frame):
    """(limits, where the body was read) from the rest pose, else from the current pose.

    Raises presets.PresetError when neither shows a standing body; its message says why.
    """
    bones = scene_bones(obj)
    overrides = preset_overrides(obj)
    try:
        return presets.preset_limits(bones, preset, overrides=overrides), "from the rest pose"
    except presets.PresetError as rest_error:
        try:
            limits = presets.preset_limits(bones, preset, pose=current_pose(obj), overrides=overrides)
        except presets.PresetError as pose_error:
            why = f"rest pose: {rest_error.why}; current pose (frame {frame}): {pose_error.why}"
            raise presets.PresetError(
                "pose", f"neither the rest pose nor the current pose shows a standing body ({why}); "
                "pose the armature standing, limbs not folded, and try again", why
            ) from None
        return limits, f"from the current pose (frame {frame})"


def has_limits(obj):
    """True when any bone of the armature has a cone or a twist limit."""
    return any(len(pose_bone.ewbik.cones) or pose_bone.ewbik.use_twist_limit for pose_bone in obj.pose.bones)


def set_humanoid_limits_if_none(obj, frame):
    """Humanoid limits on an armature that has none and whose limbs the preset recognises.

    Returns a sentence for the caller's report ("" when nothing applied), so knees and elbows
    bend the right way from the first drag; `Object.ewbik.auto_limits` turns this off.
    """
    if not obj.ewbik.auto_limits or has_limits(obj) or not presets.has_humanoid_limbs(
            [bone.name for bone in obj.data.bones], preset_overrides(obj)):
        return ""
    try:
        limits, source = fitted_preset(obj, "humanoid", frame)
    except presets.PresetError as error:
        return f"; no humanoid limits set: {error.message}"
    store_preset(obj, [pose_bone for pose_bone in obj.pose.bones if pose_bone.name in limits], limits, "humanoid")
    return f"; humanoid limits set on {len(limits)} bones {source} (Humanoid Limits on Pin)"


def store_preset(obj, pose_bones, limits, preset):
    """Write a preset's limits, and the stiffness it gives some roles, onto these pose bones.

    A stiffness the user set (non-zero) is kept: the preset only fills in bones left at 0.
    """
    stiffness = presets.preset_stiffness(scene_bones(obj), preset, preset_overrides(obj))
    for pose_bone in pose_bones:
        set_limits(pose_bone.ewbik, limits[pose_bone.name])
        if pose_bone.name in stiffness and pose_bone.ewbik.stiffness == 0.0:
            pose_bone.ewbik.stiffness = stiffness[pose_bone.name]
