"""The extension as a user gets it: a valid manifest, a clean zip, enable/disable without leftovers."""

import contextlib
import pathlib
import zipfile

import bpy

from tests.support.blender_helpers import (
    PACKAGE,
    addon_module,
    bone_world,
    disable_extension,
    enable_extension,
    extension_enabled,
    load_build_tool,
    pin,
    solve_fully_on_update,
    update,
)

HANDLER_LISTS = (
    "depsgraph_update_pre",
    "depsgraph_update_post",
    "frame_change_pre",
    "frame_change_post",
    "load_pre",
    "load_post",
    "save_pre",
    "save_post",
    "undo_post",
    "redo_post",
)
SPACES_WITH_DRAW_HANDLERS = ("SpaceView3D", "SpaceProperties", "SpaceGraphEditor", "SpaceDopeSheetEditor")


def extension_footprint():
    """Everything the extension can add to Blender's global state, as comparable data."""
    handlers = {
        name: sorted(
            getattr(fn, "__qualname__", repr(fn))
            for fn in getattr(bpy.app.handlers, name)
            if getattr(fn, "__module__", "").startswith(PACKAGE)
        )
        for name in HANDLER_LISTS
    }
    keymap_items = sorted(
        (keymap.name, item.idname)
        for keyconfig in (bpy.context.window_manager.keyconfigs.addon,)
        if keyconfig is not None
        for keymap in keyconfig.keymaps
        for item in keymap.keymap_items
        if item.idname.startswith("ewbik.")
    )
    return {
        "handlers": handlers,
        "keymap_items": keymap_items,
        "types": sorted(name for name in dir(bpy.types) if name.upper().startswith("EWBIK")),
        "operators": sorted(dir(bpy.ops.ewbik)),
        "Object.ewbik": hasattr(bpy.types.Object, "ewbik"),
        "PoseBone.ewbik": hasattr(bpy.types.PoseBone, "ewbik"),
    }


@contextlib.contextmanager
def recorded_draw_handlers():
    """Record the draw handles added and removed on the editors' Space types while inside."""
    added, removed = [], []
    originals = {}
    for space_name in SPACES_WITH_DRAW_HANDLERS:
        space = getattr(bpy.types, space_name)
        add, remove = space.draw_handler_add, space.draw_handler_remove
        originals[space] = (add, remove)

        def recording_add(*args, _add=add, **kwargs):
            handle = _add(*args, **kwargs)
            added.append(handle)
            return handle

        def recording_remove(handle, *args, _remove=remove, **kwargs):
            removed.append(handle)
            return _remove(handle, *args, **kwargs)

        space.draw_handler_add = recording_add
        space.draw_handler_remove = recording_remove
    try:
        yield added, removed
    finally:
        for space, (add, remove) in originals.items():
            space.draw_handler_add = add
            space.draw_handler_remove = remove


def test_a_zip_for_this_machine_compiles_only_its_own_library(tmp_path, monkeypatch):
    """`make demo` on a fresh clone builds the zip this way: no cross-builds to wait for."""
    tool = load_build_tool()
    compiled = []
    monkeypatch.setattr(tool.build_native, "build", lambda platform_name: compiled.append(platform_name))
    assert tool.build(tmp_path, only_here=True).is_file()
    assert compiled == [tool.build_native.native_library.this_platform()]
    compiled.clear()
    tool.build(tmp_path)
    assert sorted(compiled) == sorted(tool.build_native.native_library.PLATFORMS)


def test_manifest_validates_with_this_blenders_cli():
    assert "Success" in load_build_tool().validate()


def test_zip_holds_the_extension_and_no_development_files(extension_zip):
    names = zipfile.ZipFile(extension_zip).namelist()
    assert "blender_manifest.toml" in names and "__init__.py" in names
    for module in (
        "ewbik_addon/solve/armature_solve.py",
        "ewbik_addon/solve/live.py",
        "operators/pin.py",
        "solver/quat.py",
    ):
        assert module in names
    for excluded in (
        "tests/",
        "bench/",
        "docs/",
        "tools/",
        "examples/",
        "dist/",
        "out/",
        ".git/",
        ".hypothesis/",
        ".pytest_cache/",
        "Makefile",
        "pyproject.toml",
    ):
        assert not [name for name in names if name.startswith(excluded)], excluded
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]
    assert not [name for name in names if name.endswith(".tmp")]


def test_the_installed_solver_runs_its_compiled_loop():
    """The zip carries the library built for this machine, and the installed copy loads it."""
    native = addon_module("solver.native")
    assert native.available()
    library = pathlib.Path(addon_module("solver.native_library").library_path())
    user_resources = pathlib.Path(bpy.utils.resource_path("USER")).resolve()
    assert user_resources in library.resolve().parents


def test_installed_into_the_temporary_user_repository():
    assert extension_enabled()
    module = bpy.context.preferences.addons[PACKAGE].module
    package = __import__(module, fromlist=["__file__"])
    user_resources = pathlib.Path(bpy.utils.resource_path("USER")).resolve()
    assert user_resources in pathlib.Path(package.__file__).resolve().parents
    assert hasattr(bpy.types.Object, "ewbik") and hasattr(bpy.types.PoseBone, "ewbik")
    assert {"pin", "unpin", "solve"} <= set(dir(bpy.ops.ewbik))


def test_disable_removes_everything_it_added_and_enable_restores_it():
    enabled = extension_footprint()
    assert enabled["handlers"]["depsgraph_update_post"] and enabled["handlers"]["frame_change_post"]
    live = addon_module("ewbik_addon.solve.live")
    bpy.app.timers.register(live.refine_unconverged, first_interval=60.0)  # as a cut-short live solve does
    with recorded_draw_handlers() as (added, removed):
        disable_extension()
        disabled = extension_footprint()
        enable_extension()
        reenabled = extension_footprint()
        first_removed = len(removed)
        disable_extension()
        disabled_again = extension_footprint()
    enable_extension()

    nothing = {
        "handlers": {name: [] for name in HANDLER_LISTS},
        "keymap_items": [],
        "types": [],
        "operators": [],
        "Object.ewbik": False,
        "PoseBone.ewbik": False,
    }
    assert disabled == nothing
    assert not bpy.app.timers.is_registered(live.refine_unconverged)
    assert disabled_again == nothing
    assert reenabled == enabled
    removed_on_second_disable = removed[first_removed:]
    assert len(removed_on_second_disable) == len(added)
    assert set(map(id, removed_on_second_disable)) == set(map(id, added))
    assert extension_footprint() == enabled


def test_reenabled_extension_still_pins_and_solves(metarig):
    disable_extension()
    assert not hasattr(metarig, "ewbik")
    enable_extension()
    solve_fully_on_update(metarig)
    targets = pin(metarig, "hand.L")
    targets["hand.L"].location.x += 0.1
    update()
    reached = bone_world(metarig, "hand.L").translation
    assert (reached - targets["hand.L"].matrix_world.translation).length < 1e-3


def test_a_reenabled_extension_imports_every_module_afresh():
    """Modules that kept the ones from before (Solve's pause of the live handler lived in the old
    module while the new one's handler solved Solve's write again) are all new."""
    before = addon_module("ewbik_addon.solve.live")
    pause_before = addon_module("ewbik_addon.com.live_pause")
    disable_extension()
    enable_extension()
    live = addon_module("ewbik_addon.solve.live")
    solve_now = addon_module("ewbik_addon.solve.solve_now")
    assert live is not before and solve_now.suspended is not pause_before.suspended
    assert live.is_suspended is addon_module("ewbik_addon.com.live_pause").is_suspended
    assert live.on_depsgraph_update in bpy.app.handlers.depsgraph_update_post
    assert before.on_depsgraph_update not in bpy.app.handlers.depsgraph_update_post


def test_settings_survive_disable_and_enable(metarig):
    metarig.ewbik.iterations = 33
    disable_extension()
    enable_extension()
    assert metarig.ewbik.iterations == 33
