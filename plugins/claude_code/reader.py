"""Reading Claude Code's transcript (``projects/<enc>/<sessionId>.jsonl``) from its end, or as it grows.

Reading the last turn of a file does not read the file: :func:`scan_back` feeds a window at the end of the
file through a :class:`~plugins.claude_code.turns.TurnTracker` (which knows what the lines mean) and doubles
the window only until the turn it needs starts inside it, so the cost follows the size of the last turn, not
of the transcript (they reach hundreds of MB). While watching, :class:`TranscriptTail` reads only the bytes
appended since last time and keeps a half-written last line until its newline arrives.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from plugins.claude_code.turns import TurnEnd, TurnTracker, turn_id

__all__ = [
    "TailScan",
    "TranscriptTail",
    "TurnEnd",
    "TurnTracker",
    "find_turn",
    "last_finished_turn",
    "latest_key",
    "latest_turn",
    "nothing_finished",
    "recent_prompts",
    "running_turn_start",
    "scan_back",
    "turn_id",
]

log = logging.getLogger("batonpass")

FIRST_WINDOW = 256 * 1024


# ---- reading the end of a file ---------------------------------------------------------------------


@dataclass
class TailScan:
    """What a window at the end of a transcript showed."""

    tracker: TurnTracker
    ends: list[TurnEnd] = field(default_factory=list)
    #: the window reached the start of the file
    from_start: bool = False
    #: offset just past the last complete line (where an incremental reader goes on)
    end_offset: int = 0
    window: int = 0


def scan_back(path: str | os.PathLike[str], enough: Callable[[TailScan], bool],
              first_window: int = FIRST_WINDOW) -> TailScan:
    """Feed a window at the end of ``path`` through a fresh tracker, doubling the window until
    ``enough(scan)`` holds or the whole file was read. A half-written last line is left out. Lines of any
    length work: a window that holds no line start grows until it does."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        window = max(first_window, 1)
        while True:
            start = max(0, size - window)
            f.seek(start)
            data = f.read(size - start)
            if start > 0:
                cut = data.find(b"\n")
                if cut < 0:  # inside one long line: look further back
                    window *= 2
                    continue
                data, start = data[cut + 1:], start + cut + 1
            last_nl = data.rfind(b"\n")
            complete = data[: last_nl + 1] if last_nl >= 0 else b""
            scan = TailScan(
                TurnTracker(at_start=start == 0),
                from_start=start == 0,
                end_offset=start + len(complete),
                window=window,
            )
            scan.ends.extend(scan.tracker.feed_lines(complete.split(b"\n")))
            if scan.from_start or enough(scan):
                return scan
            window *= 2


def _with_open_end(scan: TailScan) -> list[TurnEnd]:
    """The scan's ends, plus the turn whose final message is on disk without its ``turn_duration``."""
    pending = scan.tracker.pending_end()
    return scan.ends + ([pending] if pending else [])


def last_finished_turn(path: str | os.PathLike[str]) -> TurnEnd | None:
    """The last turn that completed (not interrupted, not failed), or None. For ``baton extract``."""

    def found(scan: TailScan) -> bool:
        return any(e.outcome == "completed" and e.whole for e in _with_open_end(scan))

    scan = scan_back(path, found)
    done = [e for e in _with_open_end(scan) if e.outcome == "completed" and (e.whole or scan.from_start)]
    return done[-1] if done else None


def nothing_finished(path: str | os.PathLike[str]) -> str:
    """Why ``path`` holds no finished turn, in words for ``baton extract`` (read only when it holds none)."""
    scan = scan_back(path, lambda s: False)
    tracker = scan.tracker
    if tracker.main_lines == 0:
        if tracker.side_lines:
            return (f"{path} holds no main-chain turn: only subagent (sidechain) lines — a subagent's own "
                    "transcript; extract the session's transcript instead")
        if tracker.bad_lines:
            return (f"{path} holds no turn: it has no transcript lines, only text that is not JSON (is it a "
                    "Claude Code transcript? --agent NAME reads another agent's file)")
        return f"{path} holds no turn: no prompt was written to it"
    if tracker.held is not None:
        n = tracker.background
        return f"{path}: the last turn is waiting for {n} background agent{'s' if n != 1 else ''} to finish"
    if tracker.open:
        return f"{path}: the last turn is still open (no end of turn on disk yet)"
    failed = [e for e in scan.ends if e.outcome == "failed"]
    if failed:
        return f"{path}: the last turn failed: {failed[-1].reason}"
    return f"{path} holds no finished turn"


def recent_prompts(path: str | os.PathLike[str], count: int = 8) -> list[str]:
    """The prompt texts of the last ``count`` turns started in ``path`` (paste wrappers removed), oldest
    first: what the agent took as prompts, for telling whether a hand-off was already typed."""
    scan = scan_back(path, lambda s: len(s.tracker.started) >= count)
    return scan.tracker.prompts[-count:]


def find_turn(path: str | os.PathLike[str], key: str) -> tuple[TurnEnd | None, bool]:
    """The end of the turn ``key`` if it is on disk, and whether that turn's start was found at all."""
    scan = scan_back(path, lambda s: key in s.tracker.started)
    ends = [e for e in scan.ends if e.key == key]
    return (ends[-1] if ends else None), key in scan.tracker.started


def latest_turn(path: str | os.PathLike[str]) -> TurnTracker:
    """The tracker after the last turn's start: its ``key``, ``session_id`` and ``state``."""
    return scan_back(path, lambda s: s.tracker.whole).tracker


def running_turn_start(path: str | os.PathLike[str]) -> float | None:
    """When the turn still running in ``path`` began (its prompt line's timestamp, epoch seconds): the last
    turn, while it is open or waits for its background agents; None when the last turn ended."""
    tracker = latest_turn(path)
    return tracker.started_at if tracker.open or tracker.held is not None else None


def latest_key(path: str | os.PathLike[str] | None) -> str | None:
    """The key of the last turn started in ``path`` (None if none, or no file)."""
    try:
        return latest_turn(path).key if path else None
    except OSError:
        return None


class TranscriptTail:
    """Follows one transcript: :meth:`read_new` returns the turns that ended in the bytes appended since
    the last call. After :meth:`prime` it starts at the current end of the file (what is there is
    history); with ``from_start`` (a transcript that appeared while following) at its first line."""

    def __init__(self, path: str | os.PathLike[str], *, from_start: bool = False) -> None:
        self.path = Path(path)
        self.tracker = TurnTracker(at_start=True)
        self.offset = 0
        self._partial = b""
        self._inode: int | None = None
        #: read the file from its first line (it is new), not from where :meth:`prime` would start
        self._awaiting_creation = from_start
        self.history: list[TurnEnd] = []

    def prime(self) -> bool:
        """Read the current turn's state from the end of the file. False if the file does not exist (yet:
        Claude Code creates it on the first prompt; then :meth:`read_new` reads it from the start)."""
        try:
            scan = scan_back(self.path, lambda s: s.tracker.whole)
            self._inode = os.stat(self.path).st_ino
        except FileNotFoundError:
            self._inode, self._awaiting_creation = None, True
            return False
        self.tracker, self.offset, self._partial, self.history = scan.tracker, scan.end_offset, b"", scan.ends
        self._awaiting_creation = False
        return True

    def read_new(self) -> list[TurnEnd]:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return []
        if self._inode is None and self._awaiting_creation:
            self._inode, self._awaiting_creation = st.st_ino, False
            self.tracker, self.offset, self._partial = TurnTracker(at_start=True), 0, b""
        elif self._inode is None or st.st_ino != self._inode or st.st_size < self.offset:
            log.debug("transcript %s was replaced or truncated; reading its end again", self.path)
            self.prime()
            return []
        if st.st_size == self.offset:
            return []
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            data = f.read(st.st_size - self.offset)
        self.offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()  # no newline yet: wait for the rest
        return self.tracker.feed_lines(lines)
