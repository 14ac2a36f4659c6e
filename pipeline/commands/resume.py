"""``baton resume ROUTE``: let a held route's queued hand-offs go, each once
(:mod:`pipeline.engine.actions`)."""

from __future__ import annotations

import argparse

from pipeline.cmdline.action import run_action

__all__ = ["resume_command"]


def resume_command(args: argparse.Namespace) -> int:
    return run_action(args, "resume", args.route)
