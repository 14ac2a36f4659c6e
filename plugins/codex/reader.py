"""Codex rollout files: their names (thread id, start time), their values, and reading them incrementally.

A rollout (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl``) is one thread's journal:
lines ``{"timestamp", "ordinal", "type", "payload"}``. :class:`JsonlTail` reads only the bytes appended
since the last read and keeps a half-written last line until its newline arrives;
:class:`plugins.codex.turns.RolloutState` folds the lines into turns.
"""

from __future__ import annotations

import os
import re
from typing import Any

from pipeline.plugin.tools import AppendedLines
from pipeline.plugin.tools import iso_time as parse_timestamp

__all__ = [
    "ROLLOUT_NAME",
    "JsonlTail",
    "message_text",
    "parse_timestamp",
    "thread_id_of",
    "uuid7_time",
]

ROLLOUT_NAME = re.compile(
    r"^rollout-(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2})-"
    r"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$")
#: a single line larger than this is skipped (and counted), not held in memory without bound
MAX_LINE_BYTES = 64 * 1024 * 1024


def thread_id_of(path: str | os.PathLike[str]) -> str | None:
    """The thread id in a rollout's file name, or None if the name is not a rollout's."""
    m = ROLLOUT_NAME.match(os.path.basename(path))
    return m.group(2) if m else None


def uuid7_time(uuid: str) -> float | None:
    """The creation time (epoch seconds) a UUIDv7 carries in its first 48 bits; None for other UUIDs.

    Codex thread ids are UUIDv7, so a rollout's file name tells when its thread started, in UTC,
    whatever the local time zone of the name's own timestamp."""
    digits = uuid.replace("-", "")
    if len(digits) != 32 or digits[12] != "7":
        return None
    try:
        return int(digits[:12], 16) / 1000.0
    except ValueError:
        return None


def message_text(content: Any) -> str | None:
    """The text of a message's content: a string, or the text parts of a list joined in order."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    parts = [c["text"] for c in content if isinstance(c, dict) and isinstance(c.get("text"), str)
             and c.get("type") in ("output_text", "input_text", "text", "Text", None)]
    return "".join(parts) if parts else None


class JsonlTail(AppendedLines):
    """The rollout's lines appended since the last :meth:`read` (see
    :class:`pipeline.system.jsonl.AppendedLines`), with a bound on one unfinished line."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__(path, max_line_bytes=MAX_LINE_BYTES)
