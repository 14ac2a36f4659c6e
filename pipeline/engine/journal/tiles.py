"""What the journal keeps per tile across restarts: up to when each was followed (the catch-up after a
restart starts there) and the hop count of the turns it was handed (so a loop's count survives a restart)."""

from __future__ import annotations

import time

from pipeline.engine.journal.schema import JournalBase


class Tiles(JournalBase):
    """Each tile's followed-until mark and hop counts."""

    # ---- how far each tile was followed (catch-up after a restart) ----------------------------------------

    def followed_until(self, tile: str) -> float | None:
        """Up to when (epoch seconds) a run of batonpass followed ``tile``: every turn that ended before
        was seen. None: no run ever followed it (what its agent did before is history, not news)."""
        row = self.db.execute("SELECT followed_until FROM tiles WHERE tile=?", (tile,)).fetchone()
        return None if row is None else float(row[0])

    def oldest_unrouted(self, tile: str, after: float) -> float | None:
        """When the oldest turn of ``tile`` seen after ``after`` but not yet routed was reported (a crash
        came between): the catch-up must look back at least that far to report it again."""
        row = self.db.execute("SELECT min(at) FROM completions WHERE tile=? AND routed=0 AND at>=?",
                              (tile, after)).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def mark_followed(self, tiles: list[str], until: float) -> None:
        """``tiles`` were followed up to ``until`` (never moves a tile's mark back)."""
        with self._tx():
            for tile in tiles:
                self.db.execute(
                    "INSERT INTO tiles (tile, followed_until) VALUES (?,?) ON CONFLICT (tile) DO UPDATE"
                    " SET followed_until=max(followed_until, excluded.followed_until)",
                    (tile, until),
                )

    # ---- hops (so a loop's count survives a restart) -------------------------------------------------------

    def push_hop(self, tile: str, hop: int) -> None:
        self.db.execute("INSERT INTO hops (tile, hop, at) VALUES (?,?,?)", (tile, hop, time.time()))

    def pop_hop(self, tile: str) -> int | None:
        with self._tx():
            row = self.db.execute(
                "SELECT id, hop FROM hops WHERE tile=? ORDER BY id LIMIT 1", (tile,)
            ).fetchone()
            if row is None:
                return None
            self.db.execute("DELETE FROM hops WHERE id=?", (row[0],))
            return int(row[1])
