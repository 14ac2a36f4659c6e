"""Output shared by the commands: tables with a header row, JSON, and a quiet end when the reader of a pipe is
gone.

A table's columns are as wide as their widest cell (header included), so a long pane name or route name
shifts the columns instead of running into the next one; the last column is never padded.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["json_line", "json_text", "quiet_stdout", "table"]


def json_text(value: Any) -> str:
    """One JSON document for ``--json`` (indented: one object per command run)."""
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def json_line(value: Any) -> str:
    """One JSON object on one line, for commands that stream (``history``, ``history --follow``)."""
    return json.dumps(value, ensure_ascii=False, default=str)


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(c) for c in header]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = []
    for row in cells:
        padded = [cell.ljust(widths[i]) if i < len(row) - 1 else cell for i, cell in enumerate(row)]
        lines.append("  ".join(padded).rstrip())
    return "\n".join(lines)


def quiet_stdout() -> None:
    """Point standard output at /dev/null, so the interpreter's final flush of a closed pipe stays quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
