"""The journal's completions and hand-offs: each finished turn, the hand-offs it made, and the state each
hand-off is in, written before each side effect (the states: :mod:`pipeline.engine.journal`)."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from typing import Any

from pipeline.engine.journal.records import (
    COLUMNS,
    FINAL_STATES,
    HandoffRecord,
    HandoffState,
    HistoryFilter,
    handoff_record,
)
from pipeline.engine.journal.schema import JournalBase
from pipeline.plugin.events import Completion, Prompt, handoff_key
from pipeline.system.logs import redact


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class Handoffs(JournalBase):
    """Completions and hand-offs."""

    # ---- completions ----------------------------------------------------------------------------------

    def seen_completion(self, tile: str, turn_id: str) -> tuple[int, bool] | None:
        """(hop, routed) of a turn seen before, or None: a routed turn is done with; one seen but not
        routed (a crash came between) is handled again, keeping its hop."""
        row = self.db.execute("SELECT hop, routed FROM completions WHERE tile=? AND turn_id=?",
                              (tile, turn_id)).fetchone()
        return None if row is None else (int(row[0]), bool(row[1]))

    def record_completion(self, c: Completion) -> None:
        self.db.execute(
            "INSERT INTO completions (tile, turn_id, outcome, signal, hop, at, seen) VALUES (?,?,?,?,?,?,?) "
            "ON CONFLICT (tile, turn_id) DO UPDATE SET hop=excluded.hop",
            (c.tile, c.turn_id, c.outcome, c.signal, c.hop, c.at, time.time()))

    def record_routing(
        self, c: Completion, decisions: Sequence[tuple[Prompt | None, str, str, str, str, *tuple[str, ...]]]
    ) -> None:
        """All hand-offs of one completion, and the completion marked routed, in one transaction.
        Each decision is (prompt or None, route, target, state, reason[, branch]): a fan-out's branch (its
        target) is part of the key (:func:`~pipeline.plugin.events.handoff_key`)."""
        now = time.time()
        with self._tx():
            for prompt, route, target, state, reason, *branch in decisions:
                text = prompt.text if prompt is not None else None
                self.db.execute(
                    "INSERT INTO handoffs (key, route, source, target, turn_id, hop, state, prompt,"
                    " prompt_digest, note, last_error, created, updated) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
                    " ON CONFLICT (key) DO UPDATE SET state=excluded.state, target=excluded.target,"
                    " prompt=excluded.prompt,"
                    " prompt_digest=excluded.prompt_digest, note=excluded.note, "
                    "last_error=excluded.last_error,"
                    " hop=excluded.hop, updated=excluded.updated WHERE handoffs.state = 'pending'",
                    (
                        handoff_key(route, c.turn_id, *branch),
                        route,
                        c.tile,
                        target,
                        c.turn_id,
                        prompt.hop if prompt is not None else c.hop + 1,
                        state,
                        text,
                        digest(text) if text else None,
                        redact(reason) if state != "failed" else "",
                        redact(reason) if state == "failed" else "",
                        now,
                        now,
                    ),
                )
            self.db.execute("UPDATE completions SET routed=1 WHERE tile=? AND turn_id=?", (c.tile, c.turn_id))

    def record_pending(self, c: Completion, routes: Sequence[tuple[str, str, *tuple[str, ...]]]) -> None:
        """Before the transforms run (an AI transform may take a while): each (route, target[, branch]) as
        pending."""
        now = time.time()
        with self._tx():
            for route, target, *branch in routes:
                self.db.execute(
                    "INSERT OR IGNORE INTO handoffs (key, route, source, target, turn_id, hop, state, "
                    "created, updated)"
                    " VALUES (?,?,?,?,?,?,'pending',?,?)",
                    (handoff_key(route, c.turn_id, *branch), route, c.tile, target, c.turn_id, c.hop + 1, now,
                     now),
                )

    def record_incoming(self, prompt: Prompt, note: str = "", state: HandoffState = "transformed") -> bool:
        """A prompt that came over the bus from another host, as ``transformed`` (``awaiting`` when its
        route has a person's gate); False when its key is already here (a redelivery: it must not be typed
        twice)."""
        now = time.time()
        cur = self.db.execute(
            "INSERT OR IGNORE INTO handoffs (key, route, source, target, turn_id, hop, state, prompt, "
            "prompt_digest,"
            " note, created, updated) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                prompt.key,
                prompt.route,
                prompt.source,
                prompt.target,
                prompt.turn_id,
                prompt.hop,
                state,
                prompt.text,
                digest(prompt.text),
                redact(note),
                prompt.created,
                now,
            ),
        )
        return cur.rowcount == 1

    # ---- hand-offs --------------------------------------------------------------------------------------

    def handoff(self, key: str) -> HandoffRecord | None:
        row = self.db.execute(f"SELECT {COLUMNS} FROM handoffs WHERE key=?", (key,)).fetchone()
        return handoff_record(row) if row else None

    def record_usage(self, key: str, usage: dict[str, Any]) -> None:
        """What the hand-off's AI transform used (model, tokens, cost)."""
        self.db.execute("UPDATE handoffs SET usage=? WHERE key=?", (json.dumps(usage), key))

    def set_state(self, key: str, state: HandoffState, *, error: str | None = None, note: str | None = None,
                  pane: str | None = None, attempt: bool = False) -> None:
        sets: list[str] = ["state=?", "updated=?"]
        args: list[object] = [state, time.time()]
        if error is not None:
            sets.append("last_error=?")
            args.append(redact(error))
        if note is not None:
            sets.append("note=?")
            args.append(redact(note))
        if pane is not None:
            sets.append("pane=?")
            args.append(pane)
        if attempt:
            sets.append("attempts=attempts+1")
        self.db.execute(f"UPDATE handoffs SET {', '.join(sets)} WHERE key=?", (*args, key))

    def unfinished(self) -> list[HandoffRecord]:
        """Hand-offs a previous run left before a final state, oldest first."""
        rows = self.db.execute(f"SELECT {COLUMNS} FROM handoffs WHERE state NOT IN {FINAL_STATES} "
                               "ORDER BY created").fetchall()
        return [handoff_record(r) for r in rows]

    def history(self, limit: int = 100, match: HistoryFilter | None = None) -> list[HandoffRecord]:
        """The ``limit`` hand-offs that ``match`` (default: all) whose record changed last, in the order
        they changed (``updated``: the time ``baton history`` shows)."""
        where, args = (match or HistoryFilter()).sql()
        rows = self.db.execute(f"SELECT {COLUMNS} FROM handoffs{where} ORDER BY updated DESC, key LIMIT ?",
                               (*args, limit)).fetchall()
        return [handoff_record(r) for r in reversed(rows)]

    def changed_since(self, at: float, match: HistoryFilter | None = None) -> list[HandoffRecord]:
        """Hand-offs that ``match`` whose record changed at or after ``at``, in the order they changed
        (``baton history --follow``)."""
        where, args = (match or HistoryFilter()).sql(("updated >= ?",), (at,))
        rows = self.db.execute(f"SELECT {COLUMNS} FROM handoffs{where} ORDER BY updated, key",
                               args).fetchall()
        return [handoff_record(r) for r in rows]

    def typed_since(self, route: str, target: str, at: float, but: str = "") -> list[float]:
        """When each hand-off of ``route`` to ``target`` (other than ``but``) typed at or after ``at`` was
        last recorded, oldest first (the route's ``max_per_hour`` counts these, per target: a fan-out's
        targets each have the route's limit)."""
        rows = self.db.execute(
            "SELECT updated FROM handoffs WHERE route=? AND target=? AND updated>=? AND key!=? AND state IN "
            "('delivering', 'delivered', 'unconfirmed') ORDER BY updated",
            (route, target, at, but),
        ).fetchall()
        return [float(r[0]) for r in rows]

    def claim_failed(self, key: str, note: str) -> bool:
        """A ``failed`` hand-off taken back to ``transformed`` for a retry; False when it is not failed
        (any more): of two retries, one wins."""
        return self.db.execute(
            "UPDATE handoffs SET state='transformed', note=?, updated=? WHERE key=? AND state='failed'",
            (redact(note), time.time(), key)).rowcount == 1
