#!/usr/bin/env bash
# Ruff's rules and formatting (pyproject.toml) on the tree, mypy on the solver package; the tools
# live in the Blender 5.2 venv (tools/bootstrap.sh installs them at the versions of constraints.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
PY52=${EWBIK_VENV_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ewbik/venvs}/bpy-5.2/bin/python
"$PY52" -m ruff check --quiet .
"$PY52" -m ruff format --check --quiet .
"$PY52" -m mypy -p solver
