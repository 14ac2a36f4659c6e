"""``baton history --follow``: the latest hand-offs and actions, then a line each time a record changes, so
one hand-off shows as it goes ``transformed`` → ``delivered`` (states it passed between two looks show as
the last one), a join's group as its answers come (``joining (1 of 2: security)``, then its hand-off) and a
person's ``baton approve`` as it goes ``started`` → ``done``. What a row is, and which
rows match, is the command's business: this module reads them through :class:`Rows`.

It looks at the journal when the journal changes, not on a timer: the daemon's commits write the journal's
WAL file, and the shared :class:`~pipeline.engine.watch.FileWatcher` (inotify on Linux) wakes the follower;
SQLite in WAL mode lets it read while the daemon writes. A hint can come a moment before the commit it
announces is readable, so a hint is followed by one more look :data:`LOOK_AGAIN_S` later; and every
:data:`RECHECK_S` it looks anyway, in case a hint was lost. Nothing runs in between.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import anyio

from pipeline.engine.journal import Journal
from pipeline.engine.watch import FileWatcher, Subscription

__all__ = ["LOOK_AGAIN_S", "RECHECK_S", "Rows", "follow_journal"]

#: a look at the journal in case a change's hint was lost
RECHECK_S = 5.0
#: the second look after a hint (the commit it announced may not have been readable yet at the first)
LOOK_AGAIN_S = 0.1
#: while neither the journal's folder nor the one above it exists: how often to look for them
APPEAR_S = 1.0


Row = dict[str, Any]
Emit = Callable[[list[Row]], None]


class Rows(Protocol):
    """The rows to follow (each with a ``key`` and the time it was last ``updated``)."""

    def latest(self, journal: Journal) -> list[Row]:
        """The backlog, oldest first."""

    def changed_since(self, journal: Journal, at: float) -> list[Row]:
        """The rows changed at or after ``at``, in the order they changed."""


def follow_journal(path: Path, rows: Rows, emit: Emit) -> None:
    """Emit the backlog (all at once: a table sizes its columns from it; an empty list first when the
    journal does not exist yet), then each batch of changes, until interrupted (KeyboardInterrupt). A
    closed standard output (BrokenPipeError) or an unreadable journal (sqlite3.Error) ends it by raising."""
    anyio.run(_follow, path, rows, emit)


async def _follow(path: Path, rows: Rows, emit: Emit) -> None:
    watcher = FileWatcher()
    failure: list[Exception] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(watcher.run)
        tg.start_soon(_end_when_the_reader_is_gone, tg.cancel_scope, failure)
        try:
            await _print_changes(watcher, path, rows, emit)
        except (BrokenPipeError, sqlite3.Error) as exc:  # raised as they are, not in an exception group
            failure.append(exc)
        tg.cancel_scope.cancel()
    if failure:
        raise failure[0]


async def _end_when_the_reader_is_gone(scope: anyio.CancelScope, failure: list[Exception]) -> None:
    """``baton history -f | head -3``: when standard output is a pipe, end as soon as its reader closes it,
    not at the next change (that may be hours away). The write end of a pipe whose reader is gone polls as
    an error, which is reported as readable; a terminal or a file is not waited on."""
    try:
        fd = sys.stdout.fileno()
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return
    except (OSError, ValueError):  # no real standard output (a test's capture): nothing to wait on
        return
    await anyio.wait_readable(fd)
    failure.append(BrokenPipeError("the reader of standard output is gone"))
    scope.cancel()


def _subscribe(watcher: FileWatcher, path: Path) -> Subscription | None:
    """Hints for the journal and its WAL; None while neither its folder nor the one above exists (the
    watcher would watch the nearest folder that does: all of ~, say)."""
    if path.parent.is_dir() or path.parent.parent.is_dir():
        return watcher.subscribe(path, path.with_name(path.name + "-wal"))
    return None


async def _print_changes(watcher: FileWatcher, path: Path, rows: Rows, emit: Emit) -> None:
    sub: Subscription | None = None
    try:
        if not path.exists():
            emit([])  # the backlog: none
        while not path.exists():  # batonpass never ran here yet: the daemon's first hand-off makes it
            sub = sub or _subscribe(watcher, path)
            if sub is None:
                await anyio.sleep(APPEAR_S)
            else:
                await sub.wait(RECHECK_S)
        sub = sub or watcher.subscribe(path, path.with_name(path.name + "-wal"))
        journal = Journal(path)
        last = time.time()  # what changes from here on is news; a change during the backlog may show twice
        shown: set[tuple[str, float]] = set()
        emit(rows.latest(journal))
        wait = RECHECK_S
        while True:
            hinted = await sub.wait(wait)
            wait = LOOK_AGAIN_S if hinted else RECHECK_S
            changed = [r for r in rows.changed_since(journal, last) if (r["key"], r["updated"]) not in shown]
            if changed:
                emit(changed)
                newest = changed[-1]["updated"]
                shown = {key for key in shown if key[1] == newest} if newest == last else set()
                shown |= {(r["key"], r["updated"]) for r in changed if r["updated"] == newest}
                last = newest
    finally:
        if sub is not None:
            sub.close()
