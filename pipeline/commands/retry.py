"""``baton retry KEY``: type a failed hand-off again (its key from ``baton history --outcome failed
--json``), with ``baton send``'s checks, journaled on its own row; once (:mod:`pipeline.engine.actions`)."""

from __future__ import annotations

import argparse

from pipeline.cmdline.action import run_action

__all__ = ["retry_command"]


def retry_command(args: argparse.Namespace) -> int:
    return run_action(args, "retry", args.handoff)
