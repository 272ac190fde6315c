#!/usr/bin/env bash
# The whole suite: lint and type checks; solver tests under numpy 2 and under numpy 1.26 with another OpenBLAS kernel
# (LAPACK rounds differently there), again on an ASan+UBSan build of the native loop; the glue's
# maths without Blender under both numpys; the other platforms' builds of the loop; the farm jobs
# (Open Job Description template, Flamenco job type); Blender tests under every supported Blender.
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

sanitized() {  # sanitized PYTEST_ARGS...: the solving tests on the compiled loop under ASan+UBSan
    local scratch libasan rc
    scratch=$(mktemp -d)
    libasan=$(${CC:-cc} -print-file-name=libasan.so)
    if ! "$PY52" tools/build_native.py --sanitized "$scratch/_ewbik_native-asan.so" >/dev/null || [ ! -f "$libasan" ]; then
        echo "no ASan+UBSan build (needs gcc's libasan)"; rm -rf "$scratch"
        [ "${CI:-}" = "true" ] && return 1  # CI installs gcc: a missing sanitizer build is a failure there
        echo "skipped"; return 0
    fi
    # Python itself is not built with ASan: its allocations look leaked, so leak checks stay off.
    env LD_PRELOAD="$libasan" ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
        EWBIK_NATIVE_LIBRARY="$scratch/_ewbik_native-asan.so" EWBIK_TEST_BACKENDS=native \
        "$PY52" -m pytest tests/solver "$@"
    rc=$?
    rm -rf "$scratch"
    return $rc
}

run "lint: ruff on the tree, mypy on the solver and the bpy-free glue" bash tools/lint.sh
run "solver (Python 3.13, numpy 2)" "$PY52" -m pytest tests/solver "$@"
run "solver (Python 3.11, numpy 1.26, OpenBLAS SandyBridge kernels)" \
    env OPENBLAS_CORETYPE=SandyBridge "$PY42" -m pytest tests/solver "$@"
run "solver, compiled loop under AddressSanitizer and UndefinedBehaviorSanitizer" sanitized "$@"
run "the glue without Blender (numpy 2)" "$PY52" -m pytest tests/glue "$@"
run "the glue without Blender (numpy 1.26)" "$PY42" -m pytest tests/glue "$@"
run "the native loop built for every Blender platform" "$PY52" -m pytest tests/native_targets -rs "$@"
run "farm jobs: the Open Job Description template and the Flamenco job type" "$PY52" -m pytest tests/farm -rs "$@"
run "Blender 4.2 LTS" "$PY42" -m pytest tests/blender "$@"
run "Blender 4.5 LTS (slotted actions through the 4.x API)" "$PY45" -m pytest tests/blender "$@"
run "Blender 5.2 LTS" "$PY52" -m pytest tests/blender "$@"
exit $status
