"""The bake operator as Blender's event loop holds it while it runs modal (the loop never runs
headless): `modal` is the operator's own code, fed events by hand."""

import types

import bpy

from tests.support.blender_helpers import addon_module


class RunningBake:
    """Built the way `invoke` leaves the operator: `bake` is the PoseBake or CrowdBake it drives."""

    def __init__(self, bake):
        context = bpy.context
        self._bake = bake
        self._timer = context.window_manager.event_timer_add(1.0, window=context.window)
        self.reports = []
        operator = addon_module("operators.bake").EWBIK_OT_bake
        for name in ("modal", "_end", "_show_status"):
            setattr(self, name, types.MethodType(getattr(operator, name), self))

    def report(self, kinds, message):
        self.reports.append((set(kinds), message))

    def send(self, event_type):
        return self.modal(bpy.context, types.SimpleNamespace(type=event_type))
