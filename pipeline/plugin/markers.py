"""The two pluggy markers. Plugins import ``hookimpl`` from :mod:`pipeline.plugin`."""

from __future__ import annotations

import pluggy

__all__ = ["PROJECT", "hookimpl", "hookspec"]

PROJECT = "batonpass"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)
