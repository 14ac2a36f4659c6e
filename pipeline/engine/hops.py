"""Hop accounting: how many automatic hand-offs led to the turn a tile is working on, and from which turn.

The dispatcher records the hop of each prompt it types into a tile, and its *origin* — the upstream turn
the prompt was made from (``coder:<turn>``); the detector takes both back when that tile's next turn
completes and keeps them by that turn. A turn nobody recorded was started by a person: hop 0, no origin.
The counts live in the journal, so a loop's count survives a restart (an in-memory journal keeps it for one
run). A join groups its sources' turns by their origin (:mod:`pipeline.engine.join_journal`).
"""

from __future__ import annotations

import sqlite3
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.engine.journal import Journal

__all__ = ["HopLedger", "origin_of"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS turn_origins (
    tile TEXT NOT NULL, turn_id TEXT NOT NULL, hop INTEGER NOT NULL, origin TEXT NOT NULL, at REAL NOT NULL,
    PRIMARY KEY (tile, turn_id));
"""


def origin_of(source: str, turn_id: str, hop: int) -> str:
    """The upstream turn of a prompt typed at ``hop`` from ``source``'s turn ``turn_id``: ``source:turn``;
    "" for a person's prompt (hop 0: ``baton send``, the demo's seed), whose answer has no upstream."""
    return f"{source}:{turn_id}" if hop > 0 else ""


class HopLedger:
    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        db = journal.db
        db.executescript(SCHEMA)
        if "origin" not in {row[1] for row in db.execute("PRAGMA table_info(hops)")}:
            try:  # the journal outlives upgrades: the column is added in place, old rows have none
                db.execute("ALTER TABLE hops ADD COLUMN origin TEXT NOT NULL DEFAULT ''")
            except sqlite3.OperationalError as exc:  # another process added it in between
                if "duplicate column" not in str(exc):
                    raise

    def expect(self, tile: str, hop: int, origin: str = "") -> None:
        """A prompt with ``hop``, made from the upstream turn ``origin``, was typed into ``tile``: its next
        completion carries them."""
        self.journal.db.execute("INSERT INTO hops (tile, hop, at, origin) VALUES (?,?,?,?)",
                                (tile, hop, time.time(), origin))

    def take(self, tile: str, turn_id: str = "") -> int:
        """The hop of the turn ``tile`` just finished (0 if it was a person's prompt)."""
        return self.take_with_origin(tile, turn_id)[0]

    def take_with_origin(self, tile: str, turn_id: str = "") -> tuple[int, str]:
        """(hop, origin) of ``tile``'s finished turn ``turn_id``: the oldest expected, kept by the turn (a
        turn taken again — a crash came before it was recorded — gets the same); (0, "") when none was."""
        db = self.journal.db
        with self.journal._tx():
            kept = db.execute("SELECT hop, origin FROM turn_origins WHERE tile=? AND turn_id=?",
                              (tile, turn_id)).fetchone() if turn_id else None
            if kept is not None:
                return int(kept[0]), str(kept[1])
            row = db.execute("SELECT id, hop, origin FROM hops WHERE tile=? ORDER BY id LIMIT 1",
                             (tile,)).fetchone()
            hop, origin = (0, "") if row is None else (int(row[1]), str(row[2] or ""))
            if row is not None:
                db.execute("DELETE FROM hops WHERE id=?", (row[0],))
            if turn_id:
                db.execute("INSERT INTO turn_origins (tile, turn_id, hop, origin, at) VALUES (?,?,?,?,?)",
                           (tile, turn_id, hop, origin, time.time()))
            return hop, origin

    def origin(self, tile: str, turn_id: str) -> str:
        """The upstream turn of ``tile``'s turn ``turn_id`` ("" : a person started it, or it is unknown)."""
        row = self.journal.db.execute("SELECT origin FROM turn_origins WHERE tile=? AND turn_id=?",
                                      (tile, turn_id)).fetchone()
        return "" if row is None else str(row[0])
