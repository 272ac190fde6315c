#!/usr/bin/env bash
# Ruff's rules and formatting (pyproject.toml) on the tree; mypy with check_untyped_defs on the solver
# package and on the glue modules that import no Blender module (bpy, mathutils, gpu). The
# tools live in the Blender 5.2 venv (tools/bootstrap.sh installs them at the versions of constraints.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
PY52=${EWBIK_VENV_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ewbik/venvs}/bpy-5.2/bin/python
"$PY52" -m ruff check --quiet .
"$PY52" -m ruff format --check --quiet .
"$PY52" -m mypy -p solver

BPY_FREE_GLUE=(
    ewbik_addon
    ewbik_addon.bake.action_limits
    ewbik_addon.bridge.pose_underneath
    ewbik_addon.bridge.standing_body
    ewbik_addon.com.limit_settings
    ewbik_addon.com.live_pause
    ewbik_addon.com.pin_kinds
    ewbik_addon.com.rotation_channels
    ewbik_addon.com.target_names
    ewbik_addon.documents.scene_export
    ewbik_addon.limits.limit_presets
    ewbik_addon.limits.mirror_maths
    ewbik_addon.bake.key_reduction
    ewbik_addon.solve.armature_solve
    ewbik_addon.solve.crowd_solve
    ewbik_addon.solve.solve_now
    ewbik_addon.viewport.kusudama_mesh
)
# The glue's relative imports (`from ...solver import quat`) climb to the extension's root package,
# which a checkout leaves unnamed: mypy reads the checkout as the package `ewbik` (the manifest's id)
# through a link in a temporary directory, and its messages name the checkout's own paths.
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
ln -s "$PWD" "$root/ewbik"
MYPYPATH=$root "$PY52" -m mypy "${BPY_FREE_GLUE[@]/#/--module=ewbik.}" | sed "s|$root/ewbik/||g"
