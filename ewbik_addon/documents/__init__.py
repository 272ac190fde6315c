"""Scene documents: an armature written out as one (export, bug reports) and read back into Blender (import)."""
