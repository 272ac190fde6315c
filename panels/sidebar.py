"""Placeholder module until the sidebar lands; exposes no classes yet."""

CLASSES = ()
