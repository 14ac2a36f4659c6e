"""Reading a JSONL file as it grows: only the bytes appended since last time, whole lines only.

A half-written last line stays in the buffer until its newline arrives; a line that is not valid JSON is
skipped (and counted), never fatal; a file that shrank or was replaced is read again from its start.
Shared by the adapters whose agents write JSONL (the demo agent, Codex rollouts).
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

__all__ = ["AppendedLines", "iso_time", "json_head", "json_list", "json_object", "write_json"]


def json_object(value: object) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one: a field of the wrong shape reads as absent."""
    return value if isinstance(value, dict) else {}


def json_list(value: object) -> list[Any]:
    """``value`` if it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def json_head(path: str | os.PathLike[str], *, limit: int = 65536) -> list[dict[str, Any]]:
    """The JSON objects on the whole lines within the first ``limit`` bytes of ``path`` (what a file's
    shape is told by: ``AgentAdapter.recognizes_file``); [] when it cannot be read. Lines that are not
    JSON objects are left out."""
    try:
        with open(path, "rb") as f:
            data = f.read(limit)
    except OSError:
        return []
    records = []
    for line in data.split(b"\n")[:-1] if len(data) == limit else data.split(b"\n"):
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(value, dict):
            records.append(value)
    return records


class AppendedLines:
    """``max_line_bytes``: a line still unfinished past this size is dropped (counted as bad) rather than
    buffered without end; None (the default) sets no limit."""

    def __init__(self, path: str | os.PathLike[str], *, max_line_bytes: int | None = None) -> None:
        self.path = Path(path)
        self.max_line_bytes = max_line_bytes
        self.offset = 0
        self.bad_lines = 0
        self._partial = b""
        self._inode: int | None = None

    def read(self, *, final: bool = False) -> list[dict[str, Any]]:
        """The complete JSON objects appended since the last call (none if the file is missing).
        ``final=True`` (a file no one writes any more) also takes a last line that lacks its newline."""
        try:
            with open(self.path, "rb") as f:
                st = os.fstat(f.fileno())
                if st.st_ino != self._inode or st.st_size < self.offset:
                    self.offset, self._partial, self._inode = 0, b"", st.st_ino  # replaced or truncated
                f.seek(self.offset)
                data = f.read(max(st.st_size - self.offset, 0))
        except FileNotFoundError:
            return []
        self.offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        if self.max_line_bytes is not None and len(self._partial) > self.max_line_bytes:
            self.bad_lines += 1
            self._partial = b""
        if final and self._partial.strip():
            lines.append(self._partial)
            self._partial = b""
        out = []
        for line in lines:
            if not line.strip():
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                self.bad_lines += 1
                continue
            if isinstance(obj, dict):
                out.append(obj)
        return out


def iso_time(value: Any) -> float | None:
    """A record's ISO 8601 timestamp (``2026-12-06T04:00:52.892Z``, as the agents write them) as epoch
    seconds; None when absent or malformed (a record is never trusted to hold one)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def write_json(path: Path, data: Any) -> None:
    """Write ``data`` to ``path`` as indented JSON, whole or not at all (a temporary file renamed over it): an
    agent reading its settings while ``baton hooks install`` writes them never sees half a file. A new file
    is private (0600, its folder 0700); an existing one keeps its mode."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, path)
