"""The commands that are actions (``baton approve``, ``deny``, ``retry``, ``hold``, ``resume``, ``pass``,
``drop``): each is :func:`pipeline.engine.actions.perform` with routes.yaml (``./routes.yaml`` or ``-c
FILE``), its one line printed — on standard output when done (exit 0), on standard error when not (exit 1)."""

from __future__ import annotations

import argparse
import sys

import anyio

from pipeline.cmdline.config import config_path, no_config_here, tmux_for
from pipeline.engine.actions import Action, ActionKind, perform

__all__ = ["run_action"]


def run_action(args: argparse.Namespace, kind: ActionKind, target: str, text: str | None = None) -> int:
    path = config_path(args)
    if args.config is None and not path.exists():
        print(f"baton {kind}: {no_config_here()}", file=sys.stderr)
        return 1
    action = Action(kind, target, text, origin="cli")
    tmux = tmux_for(args, None) if args.socket or args.socket_path else None  # else routes.yaml's
    result = anyio.run(lambda: perform(action, config_path=path, tmux=tmux))
    if result.ok:
        print(result.message)
        return 0
    print(f"baton {kind}: {result.message}", file=sys.stderr)
    return 1
