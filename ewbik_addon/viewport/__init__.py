"""The 3D viewport: joint limits drawn as shaded spheres, their drag handles, and the mesh of a limit region."""
