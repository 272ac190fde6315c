"""The glue's modules tested in this folder import without Blender: a fresh interpreter imports
them and has not loaded bpy or mathutils (the venvs have bpy, so an import of it would not fail)."""

import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]

BPY_FREE = ("ewbik_addon.viewport.kusudama_mesh", "ewbik_addon.limits.mirror_maths")


def test_the_tested_glue_modules_load_neither_bpy_nor_mathutils():
    imports = "; ".join(f"import {name}" for name in BPY_FREE)
    check = "import sys; print(sorted({'bpy', 'mathutils'} & set(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", f"{imports}; {check}"], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]", result.stdout + result.stderr
