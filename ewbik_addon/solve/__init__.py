"""Solving armatures: one armature, several at once as a crowd, the live handler, and Solve to convergence."""
