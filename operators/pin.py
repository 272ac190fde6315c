"""Placeholder module until its operators land; exposes no classes yet."""

CLASSES = ()
