"""``baton hold ROUTE``: keep a route's hand-offs queued (journaled ``held``) until ``baton resume``;
the running daemon honours it (:mod:`pipeline.engine.actions`)."""

from __future__ import annotations

import argparse

from pipeline.cmdline.action import run_action

__all__ = ["hold_command"]


def hold_command(args: argparse.Namespace) -> int:
    return run_action(args, "hold", args.route)
