"""``baton approve TILE``: answer the permission prompt on a tile's screen — allow it once — with the keys
its adapter names for that agent and version (:mod:`pipeline.engine.actions`). No prompt on screen: nothing
typed, exit 1."""

from __future__ import annotations

import argparse

from pipeline.cmdline.action import run_action

__all__ = ["approve_command"]


def approve_command(args: argparse.Namespace) -> int:
    return run_action(args, "approve", args.tile)
