#!/usr/bin/env bash
# The whole suite: solver tests once, Blender tests under every supported Blender.
# Exits non-zero when any run fails; pytest's exit 5 ("no tests collected") counts as a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV_DIR=${EWBIK_VENV_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ewbik/venvs}
status=0
run() {  # run LABEL PYTHON ARGS...
    local label=$1 py=$2; shift 2
    echo "=== $label"
    "$py" -m pytest "$@"
    local rc=$?
    if [ $rc -ne 0 ]; then echo "=== $label failed (pytest exit $rc)"; status=1; fi
}
run "solver (Python 3.13, numpy 2)" "$VENV_DIR/bpy-5.2/bin/python" tests/solver "$@"
run "Blender 4.2 LTS" "$VENV_DIR/bpy-4.2/bin/python" tests/blender "$@"
run "Blender 4.5 LTS (slotted actions through the 4.x API)" "$VENV_DIR/bpy-4.5/bin/python" tests/blender "$@"
run "Blender 5.2 LTS" "$VENV_DIR/bpy-5.2/bin/python" tests/blender "$@"
exit $status
