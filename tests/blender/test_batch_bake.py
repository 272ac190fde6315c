"""`blender -b -c ewbik bake`: the command line bake of .blend files.

`blender -c` does not exist in the bpy module, so these tests call the callback the extension
registers (`batch.cli_command`) with the arguments Blender would pass it, on small shots saved
in a temporary folder: the Rigify metarig with a hand and the opposite foot pinned, the hand's
target animated over frames 1-6.
"""

import shutil

import bpy
import numpy as np
import pytest
from mathutils import Vector

from tests.support.blender_helpers import (
    addon_module,
    build_metarig,
    disable_extension,
    fcurve_keys,
    make_active,
    pin,
)

FRAMES = (1, 6)


@pytest.fixture
def batch():
    return addon_module("ewbik_addon.bake.batch")


def save_shot(path, armatures=1, pinned=True, hidden_target=False):
    """A new file with `armatures` metarigs side by side (metarig, metarig.001, ...), saved as `path`;
    a hidden target is disabled in viewports, which the bake refuses once it reaches the frames."""
    bpy.ops.wm.read_homefile(use_empty=True)
    for i in range(armatures):
        rig = build_metarig(location=(1.5 * i, 0.0, 0.0))
        if not pinned:
            continue
        rig.ewbik.stand_on_pin = False
        hand = pin(rig, "hand.L", "foot.R")["hand.L"]
        bpy.ops.object.mode_set(mode="OBJECT")
        start = hand.location.copy()
        hand.keyframe_insert("location", frame=FRAMES[0])
        hand.location = start + Vector((0.1, -0.15, 0.2 + 0.05 * i))
        hand.keyframe_insert("location", frame=FRAMES[1])
        hand.hide_viewport = hidden_target
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = FRAMES
    scene.frame_set(FRAMES[0])
    bpy.ops.wm.save_as_mainfile(filepath=str(path), copy=True)
    return path


def baked_keys(path):
    """{armature: {(data path, index): (frame, value) keys}} of every armature in the file at `path`."""
    bpy.ops.wm.open_mainfile(filepath=str(path))
    return open_file_keys()


def open_file_keys():
    keys = {}
    for obj in bpy.data.objects:
        fcurves = fcurve_keys().action_fcurves(obj.animation_data) if obj.type == "ARMATURE" else None
        if fcurves:
            keys[obj.name] = {
                (fcurve.data_path, fcurve.array_index): fcurve_keys().read_keys(fcurve.keyframe_points)["co"]
                for fcurve in fcurves
                if fcurve.data_path.startswith("pose.bones")
            }
    return keys


def key_count(path):
    return sum(len(co) for channels in baked_keys(path).values() for co in channels.values())


def keyed_frames(keys):
    return {frame for channels in keys.values() for co in channels.values() for frame in co[:, 0]}


def operator_bake(path, names):
    """The oracle: `ewbik.bake` with these armatures selected, the first by name active."""
    bpy.ops.wm.open_mainfile(filepath=str(path))
    objects = bpy.context.view_layer.objects
    make_active(objects[min(names)])
    for name in names:
        objects[name].select_set(True)
    assert bpy.ops.ewbik.bake() == {"FINISHED"}
    return open_file_keys()


def run(batch, capsys, *argv):
    """Bake these files (and flags): (exit status, stdout lines, stderr lines)."""
    capsys.readouterr()
    status = batch.cli_command(["bake", *map(str, argv)])
    out, err = capsys.readouterr()
    return status, out.splitlines(), err.splitlines()


def test_the_command_is_registered_while_the_extension_is_enabled(capfd):
    """Blender warns when an id is registered twice: a probe registered as "ewbik" finds the
    extension's command (unregistering the probe gives the command back), and finds none once
    the extension is disabled (the autouse fixture enables it again)."""
    capfd.readouterr()
    probe = bpy.utils.register_cli_command("ewbik", lambda argv: 0)
    bpy.utils.unregister_cli_command(probe)
    assert 'registered duplicate command "ewbik"' in capfd.readouterr().err

    disable_extension()
    probe = bpy.utils.register_cli_command("ewbik", lambda argv: 0)
    bpy.utils.unregister_cli_command(probe)
    assert "duplicate" not in capfd.readouterr().err


def test_each_file_is_baked_in_place_with_the_keys_the_operator_writes(batch, capsys, tmp_path):
    shots = [save_shot(tmp_path / "one.blend"), save_shot(tmp_path / "two.blend", armatures=2)]
    oracles = tmp_path / "oracle"
    oracles.mkdir()
    for shot in shots:
        shutil.copy(shot, oracles / shot.name)

    status, out, err = run(batch, capsys, *shots)

    assert (status, err) == (0, [])
    assert [line.split(":")[0] for line in out] == [str(shot) for shot in shots]
    assert "baked 6 frames (1-6) of 1 armature, " in out[0]
    assert "baked 6 frames (1-6) of 2 armatures, " in out[1]
    for shot, line, names in zip(shots, out, (["metarig"], ["metarig", "metarig.001"])):
        baked = baked_keys(shot)
        assert sorted(baked) == names
        assert keyed_frames(baked) == set(range(1, 7))
        written = sum(len(co) for channels in baked.values() for co in channels.values())
        assert f", {written} keys written, " in line
        expected = operator_bake(oracles / shot.name, names)
        for name in names:
            assert baked[name].keys() == expected[name].keys()
            for channel, co in expected[name].items():
                np.testing.assert_array_equal(baked[name][channel], co, err_msg=f"{name} {channel}")


def test_a_file_that_fails_is_left_alone_and_the_others_bake(batch, capsys, tmp_path):
    first = save_shot(tmp_path / "first.blend")
    unpinned = save_shot(tmp_path / "unpinned.blend", pinned=False)
    hidden = save_shot(tmp_path / "hidden.blend", hidden_target=True)
    last = save_shot(tmp_path / "last.blend")
    garbage = tmp_path / "notes.blend"
    garbage.write_text("not a blend file")
    truncated = tmp_path / "truncated.blend"
    truncated.write_bytes(first.read_bytes()[:20000])
    before = {path: path.read_bytes() for path in (unpinned, hidden, garbage, truncated)}

    status, out, err = run(batch, capsys, first, garbage, unpinned, hidden, truncated, last)

    assert status == 1
    assert [line.split(":")[0] for line in out] == [str(first), str(last)]
    assert err == [
        f'{garbage}: not baked: cannot be opened: File format is not supported in file "{garbage}"',
        f"{unpinned}: not baked: View layer 'ViewLayer' has no armature with pinned bones; nothing to bake",
        f"{hidden}: not baked: Frame 1: pin 'hand.L': target 'metarig hand.L target' is disabled in viewports or "
        "excluded from the view layer, so Blender does not move it; enable it to bake",
        f"{truncated}: not baked: cannot be opened: " + err[3].partition("cannot be opened: ")[2],
    ]
    assert all(path.read_bytes() == data for path, data in before.items())
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(
        path.name for path in (first, unpinned, hidden, last, garbage, truncated)
    )
    for shot in (first, last):
        assert keyed_frames(baked_keys(shot)) == set(range(1, 7))


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        ([], "the following arguments are required: COMMAND"),
        (["bake"], "the following arguments are required: FILE.blend"),
        (["frobnicate", "{shot}"], "argument COMMAND: invalid choice: 'frobnicate'"),
        (["bake", "{shot}", "--step", "0"], "argument --step: '0' is not a whole number of 1 or more"),
        (["bake", "{shot}", "--frames", "6"], "argument --frames: '6' is not START-END, e.g. 1-250"),
        (["bake", "{shot}", "--frames", "6-2"], "argument --frames: start frame 6 is after end frame 2"),
        (["bake", "{shot}", "--tolerance-typo", "1"], "unrecognized arguments: --tolerance-typo 1"),
        (["bake", "{shot}", "--tolerance", "-1"], "argument --tolerance: '-1' is not a number of 0 or more"),
        (
            ["bake", "{shot}", "--tolerance", "nan"],
            "argument --tolerance: 'nan' is not a number of 0 or more",
        ),
        (["bake", "{shot}", "--output-dir", "{shot}"], "--output-dir: '{shot}' is not a folder"),
        (
            ["bake", "{shot}", "{other}", "--output-dir", "{out}"],
            "--output-dir: more than one file is named shot.blend",
        ),
    ],
)
def test_bad_arguments_say_why_show_the_usage_and_bake_nothing(batch, capfd, tmp_path, argv, error):
    shot = save_shot(tmp_path / "shot.blend")
    (tmp_path / "other").mkdir()
    other = shutil.copy(shot, tmp_path / "other" / "shot.blend")
    before = shot.read_bytes()
    paths = {"shot": shot, "other": other, "out": tmp_path}
    capfd.readouterr()

    status = batch.cli_command([word.format(**paths) for word in argv])

    out, err = capfd.readouterr()
    assert (status, out) == (2, "")
    assert err.startswith("usage: blender -b -c ewbik")
    assert f"error: {error.format(**paths)}" in err.splitlines()[-1]
    assert shot.read_bytes() == before


@pytest.mark.parametrize("argv", [["--help"], ["bake", "--help"]])
def test_help_prints_the_usage(batch, capsys, argv):
    assert batch.cli_command(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: blender -b -c ewbik")
    assert ("--frames START-END" in out) == (argv[0] == "bake")


def test_named_armatures_are_the_only_ones_baked(batch, capsys, tmp_path):
    shot = save_shot(tmp_path / "two.blend", armatures=2)
    status, out, err = run(batch, capsys, shot, "--armature", "metarig.001")
    assert (status, err) == (0, [])
    assert "of 1 armature, " in out[0]
    assert sorted(baked_keys(shot)) == ["metarig.001"]

    before = shot.read_bytes()
    status, out, err = run(batch, capsys, shot, "--armature", "metarig.002")
    assert (status, out) == (1, [])
    assert err == [f"{shot}: not baked: 'metarig.002' is not in view layer 'ViewLayer'"]
    assert shot.read_bytes() == before


def test_frames_and_step_choose_the_keyed_frames(batch, capsys, tmp_path):
    shot = save_shot(tmp_path / "shot.blend")
    status, out, err = run(batch, capsys, shot, "--frames", "2-5", "--step", "2")
    assert (status, err) == (0, [])
    assert "baked 3 frames (2-5) of 1 armature" in out[0]
    assert keyed_frames(baked_keys(shot)) == {2, 4, 5}


def test_keys_only_keys_the_targets_key_frames(batch, capsys, tmp_path):
    shot = save_shot(tmp_path / "shot.blend")
    status, out, err = run(batch, capsys, shot, "--keys-only")
    assert (status, err) == (0, [])
    assert keyed_frames(baked_keys(shot)) == set(FRAMES)


def test_a_tolerance_writes_fewer_keys_than_every_frame(batch, capsys, tmp_path):
    every, reduced = save_shot(tmp_path / "every.blend"), save_shot(tmp_path / "reduced.blend")
    assert run(batch, capsys, every)[0] == 0
    status, out, err = run(batch, capsys, reduced, "--tolerance", "5", "--tolerance-deg", "2")
    assert (status, err) == (0, [])
    assert 0 < key_count(reduced) < key_count(every)


def test_bake_into_a_new_action_keeps_the_original(batch, capsys, tmp_path):
    shot = save_shot(tmp_path / "shot.blend")
    bpy.ops.wm.open_mainfile(filepath=str(shot))
    rig = bpy.data.objects["metarig"]
    rig.pose.bones["spine"].keyframe_insert("location", frame=FRAMES[0])
    original = rig.animation_data.action.name
    bpy.ops.wm.save_as_mainfile(filepath=str(shot))
    kept = {channel: co.tolist() for channel, co in open_file_keys()["metarig"].items()}

    status, out, err = run(batch, capsys, shot, "--new-action")

    assert (status, err) == (0, [])
    bpy.ops.wm.open_mainfile(filepath=str(shot))
    rig = bpy.data.objects["metarig"]
    assert rig.animation_data.action.name != original
    rig.animation_data.action = bpy.data.actions[original]
    assert {channel: co.tolist() for channel, co in open_file_keys()["metarig"].items()} == kept
    assert kept and all(len(co) == 1 for co in kept.values())  # the original's keys, as they were


def test_output_dir_gets_the_baked_files_and_the_originals_stay(batch, capsys, tmp_path):
    shots = [save_shot(tmp_path / "one.blend"), save_shot(tmp_path / "two.blend")]
    before = [shot.read_bytes() for shot in shots]
    output = tmp_path / "baked" / "shots"  # made by the command

    status, out, err = run(batch, capsys, *shots, "--output-dir", output)

    assert (status, err) == (0, [])
    assert [shot.read_bytes() for shot in shots] == before
    assert sorted(path.name for path in output.iterdir()) == ["one.blend", "two.blend"]
    for shot, line in zip(shots, out):
        assert f", saved as {output / shot.name}, " in line
        assert keyed_frames(baked_keys(output / shot.name)) == set(range(1, 7))
        assert baked_keys(shot) == {}
