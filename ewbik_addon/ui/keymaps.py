"""Keyboard shortcuts in Pose Mode, and the add-on preferences where users rebind them.

The shortcuts live in the add-on key configuration (`keyconfigs.addon`), so Blender lists
them under Preferences > Keymap > Pose as well as in this add-on's preferences, and a user's
rebinding survives as a user keymap override. They are removed again on unregister.
"""

import bpy
import rna_keymap_ui

KEYMAP = ("Pose", "EMPTY")  # name and space of the keymap that is active in Pose Mode
SHORTCUTS = (  # (operator, key, shift, ctrl, alt): keys the default Pose Mode keymaps leave free
    ("ewbik.toggle_pin", "P", True, True, False),
    ("ewbik.jump_to_target", "J", True, True, False),
)
ADDON_PACKAGE = __package__.removesuffix(".ewbik_addon.ui")  # the extension's top package

_registered = []  # (keymap, keymap item) pairs this add-on added


class EWBIK_AP_preferences(bpy.types.AddonPreferences):
    """The add-on's preferences: its Pose Mode shortcuts, rebindable in place."""

    bl_idname = ADDON_PACKAGE

    def draw(self, context):
        layout = self.layout
        layout.label(text="Pose Mode shortcuts")
        user_keyconfig = context.window_manager.keyconfigs.user
        for keymap, item in _registered:
            user_keymap = user_keyconfig.keymaps.get(keymap.name)
            user_item = _matching_item(user_keymap, item) if user_keymap is not None else None
            if user_item is None:
                layout.label(text=f"{item.name}: {_shortcut_text(item)}")
            else:
                rna_keymap_ui.draw_kmi([], user_keyconfig, user_keymap, user_item, layout, 0)


def _matching_item(keymap, item):
    """The user keymap's copy of an add-on keymap item (same operator)."""
    return next((candidate for candidate in keymap.keymap_items if candidate.idname == item.idname), None)


def _shortcut_text(item):
    modifiers = [name for name, on in (("Shift", item.shift), ("Ctrl", item.ctrl), ("Alt", item.alt)) if on]
    return " ".join([*modifiers, item.type])


def register():
    bpy.utils.register_class(EWBIK_AP_preferences)
    keyconfig = bpy.context.window_manager.keyconfigs.addon
    if keyconfig is None:  # Blender run in the background without a window manager's key configs
        return
    name, space = KEYMAP
    keymap = keyconfig.keymaps.new(name=name, space_type=space)
    for operator, key, shift, ctrl, alt in SHORTCUTS:
        item = keymap.keymap_items.new(operator, key, "PRESS", shift=shift, ctrl=ctrl, alt=alt)
        _registered.append((keymap, item))


def unregister():
    for keymap, item in _registered:
        keymap.keymap_items.remove(item)
    _registered.clear()
    bpy.utils.unregister_class(EWBIK_AP_preferences)
