"""The threads a ``CODEX_HOME`` knows of, and their rollouts: ``state_5.sqlite`` (read-only, in place; it
may be absent or locked), the rollout files under ``sessions/YYYY/MM/DD/``, and the per-thread lock files
Codex makes at startup, which name a thread before its rollout exists. What :mod:`plugins.codex.resolve`
chooses a pane's thread from. Blocking file work: callers run it in a worker thread.
"""

from __future__ import annotations

import os
import re
import sqlite3
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from plugins.codex.reader import ROLLOUT_NAME, parse_timestamp, uuid7_time

__all__ = ["UUID", "ThreadInfo", "known_threads", "rollout_of", "session_meta"]

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


@dataclass
class ThreadInfo:
    thread_id: str
    started_at: float | None
    rollout: Path | None = None
    cwd: str | None = None
    originator: str | None = None


_meta_cache: dict[str, dict[str, Any] | None] = {}


def session_meta(path: Path) -> dict[str, Any] | None:
    """The ``session_meta`` payload (first line) of a rollout, or the legacy format's header line
    (``{"id", "timestamp", "instructions", …}``, no envelope); cached, since it never changes."""
    key = str(path)
    if key in _meta_cache:
        return _meta_cache[key]
    meta = None
    try:
        with open(path, "rb") as f:
            line = f.readline(16 * 1024 * 1024)
        if line.endswith(b"\n"):
            record = orjson.loads(line)
            if (
                isinstance(record, dict)
                and record.get("type") == "session_meta"
                and isinstance(record.get("payload"), dict)
            ):
                meta = record["payload"]
            elif (
                isinstance(record, dict)
                and "type" not in record
                and "payload" not in record
                and "id" in record
            ):
                meta = record
    except (OSError, orjson.JSONDecodeError):
        return None  # not written yet, or unreadable: ask again next time
    if len(_meta_cache) > 4096:
        _meta_cache.clear()
    _meta_cache[key] = meta
    return meta


def _days(since: float) -> list[date]:
    """The session folders' dates worth listing: the day of ``since`` (either side of UTC) up to today."""
    first = datetime.fromtimestamp(since).date() - timedelta(days=1)
    last = datetime.now().date() + timedelta(days=1)
    days, day = [], max(first, last - timedelta(days=62))
    while day <= last:
        days.append(day)
        day += timedelta(days=1)
    return days


def _threads_from_files(home: Path, since: float) -> dict[str, ThreadInfo]:
    found: dict[str, ThreadInfo] = {}
    sessions = home / "sessions"
    for day in _days(since):
        folder = sessions / f"{day.year:04d}" / f"{day.month:02d}" / f"{day.day:02d}"
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            m = ROLLOUT_NAME.match(name)
            if not m:
                continue
            started = uuid7_time(m.group(2))
            if started is not None and started < since:
                continue
            found[m.group(2)] = ThreadInfo(m.group(2), started, rollout=folder / name)
    for sub in ("thread-writer-locks", "tui-thread-reference-capabilities"):
        try:
            names = os.listdir(home / sub)
        except OSError:
            continue
        for name in names:
            tid = name.removesuffix(".lock")
            started = uuid7_time(tid) if UUID.match(tid) else None
            if started is not None and started >= since and tid not in found:
                found[tid] = ThreadInfo(tid, started)
    return found


def _threads_from_sqlite(home: Path, since: float) -> tuple[dict[str, ThreadInfo], str]:
    """Threads from ``state_5.sqlite``, opened read-only in place (it is in WAL mode: never copy it)."""
    db = home / "state_5.sqlite"
    if not db.exists():
        return {}, "state_5.sqlite absent"
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.2)
    except sqlite3.Error as exc:
        return {}, f"state_5.sqlite unreadable ({exc})"
    found: dict[str, ThreadInfo] = {}
    try:
        conn.row_factory = sqlite3.Row
        for row in conn.execute("SELECT * FROM threads WHERE created_at >= ?", (int(since) - 1,)):
            r = dict(row)
            tid = str(r.get("id") or "")
            if not tid:
                continue
            ms = r.get("created_at_ms")
            started = ms / 1000.0 if isinstance(ms, int) else uuid7_time(tid) or float(r["created_at"])
            found[tid] = ThreadInfo(
                tid,
                started,
                rollout=Path(r["rollout_path"]) if r.get("rollout_path") else None,
                cwd=r.get("cwd"),
                originator=r.get("originator") or r.get("source"),
            )
    except (sqlite3.Error, KeyError, TypeError, ValueError) as exc:
        return found, f"state_5.sqlite not usable ({type(exc).__name__}: {exc})"
    finally:
        conn.close()
    return found, f"state_5.sqlite: {len(found)} threads"


def known_threads(home: Path, since: float) -> tuple[list[ThreadInfo], str]:
    """Every thread of ``home`` started at or after ``since``, oldest first, with cwd where known."""
    threads, note = _threads_from_sqlite(home, since)
    for tid, info in _threads_from_files(home, since).items():
        known = threads.setdefault(tid, info)
        known.rollout = known.rollout or info.rollout
    for info in threads.values():
        if info.rollout is not None and not info.rollout.exists():
            info.rollout = None
        if info.rollout is not None and (info.cwd is None or info.originator is None):
            meta = session_meta(info.rollout) or {}
            info.cwd = info.cwd or meta.get("cwd")
            info.originator = info.originator or meta.get("originator")
            info.started_at = info.started_at or parse_timestamp(meta.get("timestamp"))
    ordered = sorted(
        (t for t in threads.values() if t.started_at is not None), key=lambda t: t.started_at or 0.0
    )
    return ordered, f"{note}; {len(ordered)} threads since the process started"


def rollout_of(home: Path, thread_id: str) -> Path | None:
    """The rollout of thread ``thread_id`` (``codex resume ID``), from state_5.sqlite or the files."""
    threads, _ = _threads_from_sqlite(home, 0)
    rollout = threads[thread_id].rollout if thread_id in threads else None
    if rollout and rollout.exists():
        return rollout
    started = uuid7_time(thread_id)
    for info in _threads_from_files(home, (started or 0) - 86400).values():
        if info.thread_id == thread_id and info.rollout is not None:
            return info.rollout
    return None
