"""Joint limits edited in Blender: humanoid presets, mirroring, which bones sit at their limits, cone directions as body angles."""
