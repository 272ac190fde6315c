#!/usr/bin/env bash
# The whole suite: solver tests under numpy 2 and under numpy 1.26 with another OpenBLAS kernel
# (LAPACK rounds differently there), Blender tests under every supported Blender.
# Exits non-zero when any run fails; pytest's exit 5 ("no tests collected") counts as a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV_DIR=${EWBIK_VENV_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ewbik/venvs}
PY42=$VENV_DIR/bpy-4.2/bin/python
PY45=$VENV_DIR/bpy-4.5/bin/python
PY52=$VENV_DIR/bpy-5.2/bin/python
status=0
run() {  # run LABEL COMMAND...
    local label=$1; shift
    echo "=== $label"
    "$@"
    local rc=$?
    if [ $rc -ne 0 ]; then echo "=== $label failed (exit $rc)"; status=1; fi
}
run "solver (Python 3.13, numpy 2)" "$PY52" -m pytest tests/solver "$@"
run "solver (Python 3.11, numpy 1.26, OpenBLAS SandyBridge kernels)" \
    env OPENBLAS_CORETYPE=SandyBridge "$PY42" -m pytest tests/solver "$@"
run "Blender 4.2 LTS" "$PY42" -m pytest tests/blender "$@"
run "Blender 4.5 LTS (slotted actions through the 4.x API)" "$PY45" -m pytest tests/blender "$@"
run "Blender 5.2 LTS" "$PY52" -m pytest tests/blender "$@"
exit $status
