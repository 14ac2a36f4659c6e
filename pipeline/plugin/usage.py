"""Tokens an agent's session used so far, and what they cost: the shape adapters report for the live board.

Agents that record usage (Claude Code transcripts, Codex rollouts) write it as lines among many others in
files that reach hundreds of MB. :class:`MatchingLines` reads such a file as it grows — only the bytes
appended since last time, in bounded chunks, parsing only the lines that hold a marker — so asking again
after each change costs what was appended, not the file. Each adapter knows its own line shapes and its
vendor's prices; a line of a shape it does not know adds nothing (never an error).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

__all__ = ["MatchingLines", "Price", "SessionUsage", "count_of"]

#: how much of a file one read takes into memory at a time
CHUNK = 4 * 1024 * 1024


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens."""

    input: float
    output: float
    cache_read: float
    cache_write: float = 0.0

    def cost(self, input: int, output: int, cache_read: int, cache_write: int) -> float:
        return (input * self.input + output * self.output + cache_read * self.cache_read
                + cache_write * self.cache_write) / 1_000_000


@dataclass(frozen=True)
class SessionUsage:
    """A session's tokens so far. ``input`` counts input tokens that were neither read from nor written to
    the prompt cache; ``cost_usd`` is None when a model that used tokens has no price in the adapter's
    table (then only the tokens are shown)."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost_usd: float | None = 0.0
    models: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return self.input + self.output + self.cache_read + self.cache_write


def count_of(value: object) -> int:
    """A token count from a JSON field: a non-negative whole number, else 0 (a field of another shape)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


class MatchingLines:
    """The JSON objects on lines appended to ``path`` since the last :meth:`read` that contain one of
    ``markers`` (bytes looked for before parsing: a cheap filter, the caller still checks the shape).

    A half-written last line waits for its newline; a line longer than ``max_line_bytes`` is skipped whole
    (usage lines are small, pasted images are not); a file replaced or truncated is read again from its
    start (:attr:`restarted` tells the caller to forget what it counted)."""

    def __init__(self, path: str | os.PathLike[str], markers: Iterable[bytes], *,
                 max_line_bytes: int = 8 * 1024 * 1024) -> None:
        self.path = Path(path)
        self.markers = tuple(markers)
        self.max_line_bytes = max_line_bytes
        self.offset = 0
        self.restarted = False
        self._partial = bytearray()
        self._skipping = False
        self._inode: int | None = None

    def read(self) -> list[dict[str, Any]]:
        self.restarted = False
        out: list[dict[str, Any]] = []
        try:
            with open(self.path, "rb") as f:
                st = os.fstat(f.fileno())
                if st.st_ino != self._inode or st.st_size < self.offset:
                    self.restarted = self._inode is not None
                    self.offset, self._inode, self._skipping = 0, st.st_ino, False
                    self._partial.clear()
                f.seek(self.offset)
                while self.offset < st.st_size:
                    chunk = f.read(min(CHUNK, st.st_size - self.offset))
                    if not chunk:
                        break
                    self.offset += len(chunk)
                    self._feed(chunk, out)
        except (FileNotFoundError, PermissionError, IsADirectoryError):
            pass
        return out

    def _feed(self, chunk: bytes, out: list[dict[str, Any]]) -> None:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                if not self._skipping:
                    self._partial += chunk[start:]
                    if len(self._partial) > self.max_line_bytes:
                        self._partial.clear()
                        self._skipping = True
                return
            if self._skipping:
                self._skipping = False
            else:
                line = bytes(self._partial) + chunk[start:end] if self._partial else chunk[start:end]
                self._partial.clear()
                if any(m in line for m in self.markers):
                    try:
                        obj = orjson.loads(line)
                    except orjson.JSONDecodeError:
                        obj = None
                    if isinstance(obj, dict):
                        out.append(obj)
            start = end + 1
