"""Which session files an agent process opened, told by time: for agents that write no PID file and hold no
file open (Gemini CLI, pi), the sessions that started since the process did are its own (a new session in
the same process — ``/clear``, ``/new`` — starts later still), and a resumed older session is the one written
to since. Blocking file work: callers run it in a worker thread."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["CLOCK_SLACK_S", "by_start", "mtime", "session_files", "started_since", "written_since"]

#: a session's recorded start may precede its process's by this much (clock granularity, rounding)
CLOCK_SLACK_S = 2.0


def mtime(path: Path) -> float:
    """``path``'s modification time, 0 when it cannot be read."""
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def session_files(folder: Path, name: re.Pattern[str]) -> list[Path]:
    """The session files in ``folder`` (their names match ``name``), least recently written first."""
    try:
        found = [p for p in folder.iterdir() if name.match(p.name)]
    except OSError:
        return []
    return sorted(found, key=mtime)


def by_start(files: Iterable[Path], start_of: Callable[[Path], float | None]) -> list[tuple[float, Path]]:
    """``(start, file)`` of the sessions with a recorded start (``start_of``, from the file's header), oldest
    first."""
    found = [(start, p) for p in files for start in [start_of(p)] if start is not None]
    return sorted(found, key=lambda sp: sp[0])


def started_since(files: Iterable[Path], started_at: float,
                  start_of: Callable[[Path], float | None]) -> list[tuple[float, Path]]:
    """``(start, file)`` of the sessions whose recorded start (``start_of``, from the file's header) is not
    before ``started_at`` (a process's start, less :data:`CLOCK_SLACK_S`), oldest first."""
    since = started_at - CLOCK_SLACK_S
    return [(start, p) for start, p in by_start(files, start_of) if start >= since]


def written_since(files: Iterable[Path], started_at: float) -> list[Path]:
    """The files written to since ``started_at`` (less :data:`CLOCK_SLACK_S`), least recently written
    first: a session resumed by a process that started later than it."""
    since = started_at - CLOCK_SLACK_S
    return sorted((p for p in files if mtime(p) >= since), key=mtime)
