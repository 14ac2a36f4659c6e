"""``baton drop KEY``: discard a hand-off awaiting a person (``gate: person``): it ends ``dropped`` and is
never typed. Exit 1, nothing changed, for a key that is not awaiting (:mod:`pipeline.engine.gate_actions`)."""

from __future__ import annotations

import argparse

from pipeline.cmdline.action import run_action

__all__ = ["drop_command"]


def drop_command(args: argparse.Namespace) -> int:
    return run_action(args, "drop", args.handoff)
