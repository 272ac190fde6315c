"""EWBIK solver: numpy plus an optional compiled loop (csrc/), no Blender.

The public surface is flat: build a `Skeleton`, describe `Pin`s, pick
`SolverSettings`, optionally give `JointLimits`, and call `solve`; or hand a
scene document to `solve_scene`. Where `tools/build_native.py` has compiled
the loop, `solve` iterates in C (the same steps); elsewhere in numpy.
"""

from .errors import EwbikError
from .fit_limits import FitError, fit_limits
from .kusudama import JointLimits, Kusudama, LimitCone, TwistLimit
from .native import available as compiled_loop_available
from .pins import Pin
from .presets import PresetError, apply_limit_preset, available_presets, preset_limits, preset_stiffness
from .qcp import qcp_rotations
from .scene import Scene, parse_scene, pose_document, solve_scene
from .settings import SolverSettings
from .skeleton import Skeleton
from .solve import SolveResult, solve
from .two_bone import two_bone_ik
from .validation import SceneError

__all__ = [
    "EwbikError",
    "FitError",
    "JointLimits",
    "Kusudama",
    "LimitCone",
    "Pin",
    "PresetError",
    "Scene",
    "SceneError",
    "Skeleton",
    "SolveResult",
    "SolverSettings",
    "TwistLimit",
    "apply_limit_preset",
    "available_presets",
    "compiled_loop_available",
    "fit_limits",
    "parse_scene",
    "pose_document",
    "preset_limits",
    "preset_stiffness",
    "qcp_rotations",
    "solve",
    "solve_scene",
    "two_bone_ik",
]
