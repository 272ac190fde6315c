"""Placeholder module until it lands."""


def register():
    pass


def unregister():
    pass
