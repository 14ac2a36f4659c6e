"""``baton deny TILE``: answer the permission prompt on a tile's screen — refuse it — with the keys
its adapter names for that agent and version (:mod:`pipeline.engine.actions`). No prompt on screen: nothing
typed, exit 1."""

from __future__ import annotations

import argparse

from pipeline.cmdline.action import run_action

__all__ = ["deny_command"]


def deny_command(args: argparse.Namespace) -> int:
    return run_action(args, "deny", args.tile)
