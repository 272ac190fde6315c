"""Keyboard and mouse shortcuts, and the add-on preferences where users rebind them.

The shortcuts live in the add-on key configuration (`keyconfigs.addon`), so Blender lists
them under Preferences > Keymap as well as in this add-on's preferences, and a user's
rebinding survives as a user keymap override. A keymap item's operator properties exist only
once its operator is registered, so `operators` adds the shortcuts after its operators
(`add_shortcuts`) and removes them before (`remove_shortcuts`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import bpy
import rna_keymap_ui


@dataclasses.dataclass(frozen=True)
class Shortcut:
    """One binding of an operator in one of Blender's keymaps."""

    keymap: tuple[str, str]  # (name, space type) of the keymap it is added to
    operator: str
    key: str
    value: str = "PRESS"
    shift: bool = False
    ctrl: bool = False
    alt: bool = False
    properties: tuple[tuple[str, Any], ...] = ()  # (name, value) of the operator properties the item sets


POSE = ("Pose", "EMPTY")  # the keymap that is active in Pose Mode
VIEW_3D = ("3D View", "VIEW_3D")  # active in every mode; an operator passes on what is not its click
SHORTCUTS = (
    # keys the default Pose Mode keymaps leave free
    Shortcut(POSE, "ewbik.toggle_pin", "P", shift=True, ctrl=True),
    Shortcut(POSE, "ewbik.jump_to_target", "J", shift=True, ctrl=True),
    # Ctrl+click adds a limit cone, Ctrl+Shift+click removes one: clicks Blender's default keymaps
    # leave free (only Ctrl+drag is bound, to lasso select)
    Shortcut(
        VIEW_3D, "ewbik.cone_at_cursor", "LEFTMOUSE", "CLICK", ctrl=True, properties=(("remove", False),)
    ),
    Shortcut(
        VIEW_3D,
        "ewbik.cone_at_cursor",
        "LEFTMOUSE",
        "CLICK",
        shift=True,
        ctrl=True,
        properties=(("remove", True),),
    ),
)
ADDON_PACKAGE = __package__.removesuffix(".ewbik_addon.ui")  # the extension's top package

_added: list[
    tuple[Shortcut, bpy.types.KeyMap, bpy.types.KeyMapItem]
] = []  # (shortcut, keymap, keymap item) of every shortcut added


class EWBIK_AP_preferences(bpy.types.AddonPreferences):
    """The add-on's preferences: its shortcuts, rebindable in place."""

    bl_idname = ADDON_PACKAGE

    def draw(self, context: bpy.types.Context) -> None:
        layout = self.layout
        layout.label(text="Shortcuts")
        user_keyconfig = context.window_manager.keyconfigs.user
        for shortcut, keymap, item in _added:
            user_keymap = user_keyconfig.keymaps.get(keymap.name)
            user_item = _matching_item(user_keymap, shortcut) if user_keymap is not None else None
            if user_item is None:
                layout.label(text=f"{item.name}: {_shortcut_text(item)}")
            else:
                rna_keymap_ui.draw_kmi([], user_keyconfig, user_keymap, user_item, layout, 0)


def _matching_item(keymap: bpy.types.KeyMap, shortcut: Shortcut) -> bpy.types.KeyMapItem | None:
    """The user keymap's copy of a shortcut's item (same operator and operator properties)."""
    return next(
        (
            candidate
            for candidate in keymap.keymap_items
            if candidate.idname == shortcut.operator
            and all(getattr(candidate.properties, name) == value for name, value in shortcut.properties)
        ),
        None,
    )


def _shortcut_text(item: bpy.types.KeyMapItem) -> str:
    modifiers = [name for name, on in (("Shift", item.shift), ("Ctrl", item.ctrl), ("Alt", item.alt)) if on]
    return " ".join([*modifiers, item.type])


def add_shortcuts() -> None:
    """Add every shortcut to the add-on key configuration (call once their operators are registered)."""
    keyconfig = bpy.context.window_manager.keyconfigs.addon
    if keyconfig is None:  # Blender run in the background without a window manager's key configs
        return
    for shortcut in SHORTCUTS:
        name, space = shortcut.keymap
        keymap = keyconfig.keymaps.new(name=name, space_type=space)
        modifiers = {name: getattr(shortcut, name) for name in ("shift", "ctrl", "alt")}
        item = keymap.keymap_items.new(shortcut.operator, shortcut.key, shortcut.value, **modifiers)
        for property_name, value in shortcut.properties:
            setattr(item.properties, property_name, value)
        _added.append((shortcut, keymap, item))


def remove_shortcuts() -> None:
    for _shortcut, keymap, item in _added:
        keymap.keymap_items.remove(item)
    _added.clear()


def register() -> None:
    bpy.utils.register_class(EWBIK_AP_preferences)


def unregister() -> None:
    bpy.utils.unregister_class(EWBIK_AP_preferences)
