"""The journal's SQLite file: its tables, the columns added since (an old file is upgraded in place), how
it is opened, and the base every part of :class:`~pipeline.engine.journal.Journal` shares."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from pipeline.engine import crash_points
from pipeline.spool import state_dir

SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
    tile TEXT NOT NULL, turn_id TEXT NOT NULL, outcome TEXT NOT NULL, signal TEXT NOT NULL,
    hop INTEGER NOT NULL, at REAL NOT NULL, seen REAL NOT NULL, routed INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tile, turn_id));
CREATE TABLE IF NOT EXISTS handoffs (
    key TEXT PRIMARY KEY, route TEXT NOT NULL, source TEXT NOT NULL, target TEXT NOT NULL,
    turn_id TEXT NOT NULL, hop INTEGER NOT NULL, state TEXT NOT NULL, response TEXT, prompt TEXT,
    prompt_digest TEXT, attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT NOT NULL DEFAULT '',
    note TEXT NOT NULL DEFAULT '', pane TEXT, created REAL NOT NULL, updated REAL NOT NULL);
CREATE INDEX IF NOT EXISTS handoffs_state ON handoffs (state);
CREATE INDEX IF NOT EXISTS handoffs_updated ON handoffs (updated);
CREATE TABLE IF NOT EXISTS hops (
    id INTEGER PRIMARY KEY AUTOINCREMENT, tile TEXT NOT NULL, hop INTEGER NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS tiles (tile TEXT PRIMARY KEY, followed_until REAL NOT NULL);
CREATE TABLE IF NOT EXISTS actions (
    id TEXT PRIMARY KEY, kind TEXT NOT NULL, target TEXT NOT NULL, origin TEXT NOT NULL, host TEXT NOT NULL,
    outcome TEXT NOT NULL, message TEXT NOT NULL DEFAULT '', created REAL NOT NULL, updated REAL NOT NULL);
CREATE INDEX IF NOT EXISTS actions_created ON actions (created);
CREATE TABLE IF NOT EXISTS holds (route TEXT PRIMARY KEY, origin TEXT NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS gates (
    key TEXT PRIMARY KEY, notified REAL, decision TEXT, decided_by TEXT, decided_at REAL, original TEXT);
"""
#: columns added after the first release, and their types
_ADDED_COLUMNS = {"usage": "TEXT"}
#: ``Journal(MEMORY)``: a journal that lives as long as the process (``--dry-run``, the unit tests)
MEMORY = ":memory:"
#: how long one call waits for a lock another process holds. Short: the daemon is the only writer (others
#: read, and WAL readers never block it), and the call blocks the event loop meanwhile
BUSY_TIMEOUT_S = 1.0


def default_journal_path() -> Path:
    return state_dir() / "journal.sqlite3"


def connect(path: Path, memory: bool) -> sqlite3.Connection:
    """The one connection of this process to the journal at ``path`` (0600, in a 0700 folder; WAL,
    ``synchronous=NORMAL``: a power cut may lose the last commit, a process crash cannot)."""
    if memory:
        return sqlite3.connect(MEMORY, isolation_level=None, check_same_thread=False)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fresh = not path.exists()
    # a test-only switch may count this connection's writes and crash after one (docs/testing.md)
    db = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_S, check_same_thread=False,
                         factory=crash_points.connection_class())
    if fresh:
        os.chmod(path, 0o600)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    return db


def migrate(db: sqlite3.Connection) -> None:
    """The tables made when missing, and columns newer than the journal file (it outlives upgrades) added
    in place, old rows null."""
    db.executescript(SCHEMA)
    have = {row[1] for row in db.execute("PRAGMA table_info(handoffs)")}
    for column, kind in _ADDED_COLUMNS.items():
        if column not in have:
            try:
                db.execute(f"ALTER TABLE handoffs ADD COLUMN {column} {kind}")
            except sqlite3.OperationalError as exc:  # another process added it in between
                if "duplicate column" not in str(exc):
                    raise


class JournalBase:
    """What every part of the journal works on: the connection, the file, and whether it can be written."""

    db: sqlite3.Connection
    path: Path
    #: why the journal cannot be written now, "" while it can (said once per pause)
    fault: str

    def _tx(self) -> Transaction:
        return Transaction(self.db)


class Transaction:
    """``with``: one ``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back on any error."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            try:
                self.db.execute("COMMIT")
                return
            except sqlite3.Error:  # a full disk, say: nothing of the transaction stays
                self._rollback()
                raise
        self._rollback()

    def _rollback(self) -> None:
        """Undo what is open; SQLite may have rolled it back itself (a full disk, an I/O error), and the
        error that got here is the one to see."""
        if self.db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self.db.execute("ROLLBACK")
