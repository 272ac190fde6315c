# Developer entry points. `make demo` and `make test` are the README's two commands.
SHELL := /bin/bash
VENV_DIR ?= $(or $(EWBIK_VENV_DIR),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/ewbik/venvs)
PY42 := $(VENV_DIR)/bpy-4.2/bin/python
PY52 := $(VENV_DIR)/bpy-5.2/bin/python
PYTEST_ARGS ?=

.PHONY: venvs native native-here lint test test-solver test-blender fuzz demo gallery control-gallery bench build validate clean

venvs:
	@bash tools/bootstrap.sh

# The solver's compiled loop for every Blender platform (solver/_ewbik_native-<platform>.*): this
# machine's by the system compiler, the others by zig; without it the solver runs its numpy loop.
native: venvs
	@$(PY52) tools/build_native.py --cross >/dev/null

# This machine's compiled loop only: all the demo and the pictures need (no cross-builds to wait for).
native-here: venvs
	@$(PY52) tools/build_native.py >/dev/null

# Ruff's rules (pyproject.toml) on the tree, mypy on the solver and on the glue modules without bpy.
lint: venvs
	@bash tools/lint.sh

test: native
	@bash tools/run_tests.sh $(PYTEST_ARGS)

test-solver: native
	$(PY52) -m pytest tests/solver $(PYTEST_ARGS)

# The long fuzz run: FUZZ_DOCUMENTS generated scene documents through both loops and the CLI;
# prints how many were refused (with a named field) and solved. `make test` runs a short one.
FUZZ_DOCUMENTS ?= 100000
fuzz: native
	EWBIK_FUZZ_DOCUMENTS=$(FUZZ_DOCUMENTS) $(PY52) -m pytest tests/solver/test_fuzz.py -k long -s -q -p no:cacheprovider

demo: native-here
	$(PY52) tools/demo.py

# Four moves on two rigs, with and without limits: a table and pictures in docs/gallery.
gallery: native-here
	$(PY52) tools/pose_gallery.py

# One picture per control (pole, aim, balance off and on) in docs/gallery.
control-gallery: native-here
	$(PY52) tools/control_gallery.py

bench: native
	$(PY52) bench/bench_solver.py
	$(PY52) bench/bench_natural.py
	$(PY52) bench/bench_live.py
	$(PY52) bench/bench_bake.py
	$(PY52) bench/bench_bake_keys.py
	$(PY52) bench/bench_farm.py
	$(PY52) bench/bench_scaling.py
	$(PY52) bench/bench_overlay.py

build: native
	$(PY52) tools/build_extension.py --output-dir dist

validate: venvs
	$(PY52) tools/build_extension.py --validate-only

clean:
	rm -rf dist out
