"""An agent's JSON-lines session file and the state its records build, read as the file grows (Gemini CLI,
pi, Qwen Code): each read feeds the lines appended since the last one to the state; a file replaced (a new
inode) or cut short is read again from its start, into a new state."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from pipeline.system.jsonl import AppendedLines

__all__ = ["FollowedFile", "RecordState"]


class RecordState(Protocol):
    def feed(self, record: dict[str, Any]) -> None: ...


S = TypeVar("S", bound=RecordState)


class FollowedFile(Generic[S]):
    """A session file and its state (made by ``new_state``), read incrementally."""

    def __init__(self, path: Path, new_state: Callable[[], S]) -> None:
        self.path = Path(path)
        self._new_state = new_state
        self.state = new_state()
        self._tail = AppendedLines(self.path)
        self._ino: int | None = None
        #: records fed to the current state: a look at an unchanged file is told from one at a changed one
        self.fed = 0

    def read(self, *, final: bool = False) -> bool:
        """Read what was appended; whether anything was (``final``: a last line without its newline too)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return False
        if self._ino is not None and (st.st_ino != self._ino or st.st_size < self._tail.offset):
            self.state, self._tail, self.fed = self._new_state(), AppendedLines(self.path), 0
        self._ino = st.st_ino
        records = self._tail.read(final=final)
        for record in records:
            self.state.feed(record)
        self.fed += len(records)
        return bool(records)
