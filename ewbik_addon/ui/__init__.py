"""What Blender registers and shows: the stored settings' property groups, menu entries, keyboard shortcuts."""
