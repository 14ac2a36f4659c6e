"""``baton pass KEY [--text TEXT|-]``: let a hand-off awaiting a person (``gate: person``) go — as it is, or
with the prompt edited (``-``: read from standard input); the running daemon's dispatcher types it once its
tile is ready. Exit 1, nothing changed, for a key that is not awaiting
(:mod:`pipeline.engine.gate_actions`)."""

from __future__ import annotations

import argparse
import os
import sys

from pipeline.cmdline.action import run_action
from pipeline.cmdline.options import InputTooLarge, check_size, read_input

__all__ = ["pass_command"]


def pass_command(args: argparse.Namespace) -> int:
    text: str | None = args.text
    try:
        if text == "-":
            text = read_input(sys.stdin, "standard input")
        elif text is not None:
            check_size(len(os.fsencode(text)), "the text")
    except InputTooLarge as exc:
        print(f"baton pass: {str(exc).replace('typed', 'changed')}", file=sys.stderr)
        return 1
    return run_action(args, "pass", args.handoff, text)
