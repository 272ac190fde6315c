#!/usr/bin/env bash
# Create (or reuse) one virtual environment per supported Blender: bpy from PyPI plus the test
# tools at the exact versions of constraints.txt; the emulators that run the foreign builds of the
# native loop; Node for the Flamenco job type. Prints nothing but errors; venvs live outside the
# checkout so clean clones reuse them.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV_DIR=${EWBIK_VENV_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ewbik/venvs}
mkdir -p "$VENV_DIR"

find_python() {  # find_python 3.11 -> path of an interpreter of that version
    local want=$1 cand
    for cand in "python$want" "$(command -v pyenv >/dev/null && pyenv root)/versions/$want"*/bin/python"$want"; do
        if command -v "$cand" >/dev/null 2>&1 && "$cand" -c "import sys,venv; assert sys.version.startswith('$want')" 2>/dev/null; then
            command -v "$cand"; return 0
        fi
    done
    if command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq >/dev/null && apt-get install -y -qq "python$want" "python$want-venv" >/dev/null 2>&1 || true
        command -v "python$want" && return 0
    fi
    echo "bootstrap: no Python $want found (needed for its bpy wheel)" >&2
    return 1
}

make_venv() {  # make_venv NAME PYTHON_VERSION PIP_SPEC...  (the test tools and constraints are added)
    local name=$1 pyver=$2; shift 2
    local dir="$VENV_DIR/$name" stamp
    stamp=$( (printf '%s\n' "$@"; cat requirements-dev.txt constraints.txt) | sha1sum | cut -c1-12)
    if [ -f "$dir/.stamp-$stamp" ]; then return 0; fi
    # An existing venv is brought to the pinned versions in place (bpy is a large download).
    [ -x "$dir/bin/python" ] || "$(find_python "$pyver")" -m venv "$dir"
    "$dir/bin/python" -m pip install -q --disable-pip-version-check "$@" -r requirements-dev.txt -c constraints.txt
    touch "$dir/.stamp-$stamp"
}

apt_install() {  # apt_install WHAT PACKAGE... : install unless present; say what will skip otherwise
    local what=$1; shift
    if dpkg -s "$@" >/dev/null 2>&1; then return 0; fi
    if ! command -v apt-get >/dev/null 2>&1 \
        || ! (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@") >/dev/null 2>&1; then
        echo "bootstrap: could not install $*; $what will skip" >&2
    fi
}

# Mesa's software OpenGL lets headless Blender draw (overlay pixel tests, the demo's render).
if command -v apt-get >/dev/null 2>&1 && ! ldconfig -p 2>/dev/null | grep -q libEGL_mesa; then
    (apt-get update -qq && apt-get install -y -qq libegl1 libegl-mesa0 libgl1-mesa-dri) >/dev/null 2>&1 \
        || echo "bootstrap: could not install Mesa's OpenGL; drawing tests will skip" >&2
fi

# A C compiler builds the solver's native loop (tools/build_native.py).
if ! command -v "${CC:-cc}" >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq gcc libc6-dev) >/dev/null 2>&1 \
        || echo "bootstrap: could not install a C compiler (gcc); make native will fail" >&2
fi

# The other platforms' builds of the native loop run their golden cases under emulation
# (tests/native_targets): linux-arm64 under qemu-user with Debian's arm64 glibc, windows-x64 under Wine.
apt_install "the linux-arm64 library's golden cases" qemu-user-static libc6-arm64-cross
apt_install "the windows-x64 library's golden cases" wine64
# Node runs the Flamenco job type's compiler as the Manager would (tests/farm).
apt_install "the Flamenco job type's test" nodejs

make_venv bpy-4.2 3.11 "bpy==4.2.23"
make_venv bpy-4.5 3.11 "bpy==4.5.15"
# zig cc cross-builds the native loop; ruff and mypy lint; openjd checks and runs the farm job template
make_venv bpy-5.2 3.13 "bpy==5.2.3" ziglang ruff mypy openjd-cli
