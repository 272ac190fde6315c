"""Stepping through frames: the bake into keys, which armatures it must write through Blender, F-curve keys, and limits fitted to an action."""
