"""The journal itself: one SQLite connection per process, and the parts of the record it is made of (see
:mod:`pipeline.engine.journal`)."""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path

import anyio

from pipeline.engine.journal.actions import Actions
from pipeline.engine.journal.faults import FaultPauses, JournalUnusable, check_folder, describe, is_fault
from pipeline.engine.journal.handoffs import Handoffs
from pipeline.engine.journal.prune import KEEP_S, PRUNE_EVERY_S, Pruning
from pipeline.engine.journal.schema import BUSY_TIMEOUT_S, MEMORY, connect, default_journal_path, migrate
from pipeline.engine.journal.tiles import Tiles
from pipeline.system.text import count

log = logging.getLogger("batonpass")


class Journal(Handoffs, Actions, Tiles, Pruning, FaultPauses):
    """The journal at ``path`` (default: the user's state folder), or one in memory for ``MEMORY``:
    the same code either way, so the stages never ask whether there is a journal."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.memory = path == MEMORY
        self.path = Path(path) if path is not None else default_journal_path()
        self.db = connect(self.path, self.memory)
        migrate(self.db)
        self.fault = ""

    @classmethod
    def copy_of(cls, path: str | os.PathLike[str] | None = None) -> Journal:
        """A journal in memory that starts as a copy of the one at ``path`` (default: the user's), read
        without writing to it: ``baton run --dry-run`` decides as the daemon would — which turns were
        handed off, where each tile was followed until — and leaves the daemon's journal alone. Empty when
        there is no journal yet (or it cannot be read: said in the log)."""
        journal = cls(MEMORY)
        where = Path(path) if path is not None else default_journal_path()
        if not where.exists():
            return journal
        try:
            source = sqlite3.connect(f"{where.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S)
            try:
                source.backup(journal.db)
            finally:
                source.close()
            migrate(journal.db)
        except sqlite3.Error as exc:
            log.warning("cannot read the journal %s (%s); this run starts from an empty one", where, exc)
            journal.close()
            journal = cls(MEMORY)
        return journal

    def close(self) -> None:
        self.db.close()

    async def prune_now(self, older_than_s: float = KEEP_S) -> dict[str, int]:
        """:meth:`prune`, waiting out a journal that cannot be written; one line at info says what went."""
        gone = await self.until_done(lambda: self.prune(older_than_s))
        if gone:
            what = ", ".join(count(n, noun) for noun, n in gone.items())
            log.info("journal: forgot %s finished more than %g days ago", what, older_than_s / 86400)
        return gone

    async def keep_pruned(self, every_s: float = PRUNE_EVERY_S, older_than_s: float = KEEP_S) -> None:
        """Prune every ``every_s`` while the daemon runs (it pruned at its start): a daemon left running
        for months keeps no more than :data:`KEEP_S` of history."""
        while True:
            await anyio.sleep(every_s)
            await self.prune_now(older_than_s)


def open_journal(path: str | os.PathLike[str] | None = None) -> Journal:
    """The daemon's journal, with one real write tried first: a journal ``baton run`` cannot write raises
    :class:`JournalUnusable` at start, not a traceback on its first hand-off."""
    where = Path(path) if path is not None else default_journal_path()
    check_folder(where.parent)
    journal = None
    try:
        journal = Journal(where)
        journal.probe()
        return journal
    except (sqlite3.Error, OSError) as exc:
        if journal is not None:
            journal.close()
        if isinstance(exc, sqlite3.Error) and not is_fault(exc):
            raise
        raise JournalUnusable(describe(exc, where)) from None
