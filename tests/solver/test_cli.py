"""`python -m solver solve SCENE.json [-o POSE.json]` as a user runs it: a real subprocess."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from tests.solver.conftest import EXAMPLES, REPO, load_example


def run_cli(*args, cwd=REPO):
    return subprocess.run(
        [sys.executable, "-m", "solver", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def write_json(path, doc):
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def assert_clean_failure(proc, *fragments):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr
    assert proc.stdout == ""


def test_solve_prints_a_pose_document():
    proc = run_cli("solve", EXAMPLES / "two_arms.json")
    assert proc.returncode == 0, proc.stderr
    pose = json.loads(proc.stdout)
    assert pose["format"] == "ewbik-pose" and pose["version"] == 1
    assert set(pose["bones"]) == {b["name"] for b in load_example("two_arms.json")["bones"]}
    assert set(pose["stats"]["pins"]) == {"hand.L", "hand.R"}
    assert "hand.L" in proc.stderr  # the per-pin summary goes to stderr, keeping stdout pure JSON


def test_solve_writes_the_output_file(tmp_path):
    out = tmp_path / "pose.json"
    proc = run_cli("solve", EXAMPLES / "humanoid_reach.json", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    pose = json.loads(out.read_text(encoding="utf-8"))
    assert len(pose["bones"]) == len(load_example("humanoid_reach.json")["bones"])
    assert pose["stats"]["converged"] is True


def test_output_matches_the_library_call(tmp_path):
    from solver.scene import solve_scene

    out = tmp_path / "pose.json"
    assert run_cli("solve", EXAMPLES / "whole_chain_reference.json", "--output", out).returncode == 0
    from_cli = json.loads(out.read_text(encoding="utf-8"))
    direct = solve_scene(load_example("whole_chain_reference.json"))
    assert from_cli["bones"] == json.loads(json.dumps(direct["bones"]))


def test_bad_scene_exits_2_naming_the_bone(tmp_path):
    doc = load_example("whole_chain_reference.json")
    doc["bones"][2]["parent"] = "elbow"
    proc = run_cli("solve", write_json(tmp_path / "bad.json", doc))
    assert_clean_failure(proc, "'b2'", "'elbow'")


def test_bad_pin_exits_2_naming_the_pin(tmp_path):
    doc = load_example("whole_chain_reference.json")
    doc["pins"][1]["weight"] = -1
    proc = run_cli("solve", write_json(tmp_path / "bad.json", doc))
    assert_clean_failure(proc, "pin 'b3'", "weight")


def test_bad_limits_exit_2(tmp_path):
    doc = load_example("whole_chain_reference.json")
    doc["bones"][1]["limits"] = {"cones": "wide"}
    proc = run_cli("solve", write_json(tmp_path / "bad.json", doc))
    assert_clean_failure(proc, "'b1'")


def test_missing_file_exits_2(tmp_path):
    missing = tmp_path / "nowhere.json"
    proc = run_cli("solve", missing)
    assert_clean_failure(proc, "nowhere.json")


@pytest.mark.parametrize("text", ["{not json", "[1, 2, 3]", '{"format": "ewbik-scene", "version": 1}'])
def test_invalid_json_or_wrong_shape_exits_2(tmp_path, text):
    path = tmp_path / "broken.json"
    path.write_text(text, encoding="utf-8")
    proc = run_cli("solve", path)
    assert_clean_failure(proc, "broken.json")


def test_usage_errors_exit_2():
    assert run_cli().returncode == 2
    assert run_cli("solve").returncode == 2
    assert run_cli("bake", EXAMPLES / "two_arms.json").returncode == 2


def test_runs_from_another_directory(tmp_path):
    """The module works from any working directory when the repository is on the path."""
    import os

    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, "-m", "solver", "solve", str(EXAMPLES / "two_arms.json")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    json.loads(proc.stdout)


def test_unwritable_output_exits_2_without_a_traceback(tmp_path):
    out = tmp_path / "no" / "such" / "dir" / "pose.json"
    proc = run_cli("solve", EXAMPLES / "two_arms.json", "-o", out)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "pose.json" in proc.stderr


def assert_one_line_failure(proc, *fragments):
    assert_clean_failure(proc, *fragments)
    assert len(proc.stderr.splitlines()) == 1, proc.stderr


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"format": "ewbik-scene", "version": ' + "9" * 400 + "}", "version"),
        ('{"format": "ewbik-scene", "version": ' + "9" * 5000 + "}", "digits"),
        ('{"format": "ewbik-scene", "version": 1, "bones": ' + "[" * 900 + "]" * 900 + "}", "bones[0]"),
        ("\xff\xfe not text", "bad.json"),
    ],
)
def test_hostile_json_exits_2_with_one_line(tmp_path, text, fragment):
    path = tmp_path / "bad.json"
    path.write_bytes(text.encode("latin-1"))
    assert_one_line_failure(run_cli("solve", path), fragment)


@pytest.mark.parametrize(
    "change, field",
    [
        (lambda d: d["pins"][1].update(weight=9e307), "pins[1].weight"),
        (lambda d: d["settings"].update(tolerance=1.35e154), "settings.tolerance"),
        (lambda d: d["pins"][1]["target"][0].__setitem__(3, 1.34e154), "pins[1].target[0][3]"),
        (lambda d: d["bones"][1].update(length=10**400), "bones[1].length"),
    ],
)
def test_values_beyond_what_the_arithmetic_carries_exit_2_naming_the_field(tmp_path, change, field):
    doc = load_example("whole_chain_reference.json")
    change(doc)
    assert_one_line_failure(run_cli("solve", write_json(tmp_path / "bad.json", doc)), f"{field}:")


@pytest.mark.skipif(not pathlib.Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_disk_exits_2_with_one_line():
    assert_one_line_failure(run_cli("solve", EXAMPLES / "two_arms.json", "-o", "/dev/full"), "/dev/full")
    with open("/dev/full", "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "solver", "solve", str(EXAMPLES / "two_arms.json")],
            cwd=REPO,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == ["error: standard output: No space left on device"]


def limited_memory():
    """A child under a 2 GiB address-space limit: an unbounded read fails there instead of eating the machine."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.skipif(not pathlib.Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_an_endless_input_is_refused_at_the_size_cap_with_one_line():
    proc = subprocess.run(
        [sys.executable, "-m", "solver", "solve", "/dev/zero"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limited_memory,
        env=unsanitized({**os.environ, "OPENBLAS_NUM_THREADS": "1"}),
    )
    assert_one_line_failure(proc, "/dev/zero", "MiB")


def unsanitized(env):
    """The environment without a preloaded sanitizer or the sanitized build of the loop:
    AddressSanitizer reserves terabytes of shadow memory, which the address-space cap refuses
    before the CLI runs (the size cap is Python code, nothing of the compiled loop runs)."""
    return {name: value for name, value in env.items() if name not in ("LD_PRELOAD", "EWBIK_NATIVE_LIBRARY")}


def test_a_failed_write_keeps_the_previous_output(tmp_path):
    import resource

    out = tmp_path / "pose.json"
    out.write_text('{"previous": true}\n', encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "solver", "solve", str(EXAMPLES / "two_arms.json"), "-o", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64)),
    )
    assert_one_line_failure(proc, "pose.json")
    assert json.loads(out.read_text(encoding="utf-8")) == {"previous": True}
    assert [path.name for path in tmp_path.iterdir()] == ["pose.json"]


def test_concurrent_runs_leave_one_whole_output(tmp_path):
    out = tmp_path / "pose.json"
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "solver", "solve", str(EXAMPLES / "humanoid_reach.json"), "-o", str(out)],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(4)
    ]
    assert [run.wait(timeout=120) for run in runs] == [0] * 4
    assert json.loads(out.read_text(encoding="utf-8"))["format"] == "ewbik-pose"
    assert [path.name for path in tmp_path.iterdir()] == ["pose.json"]
