"""A person's gate in the journal (``gate: person`` on a route): the ``gates`` table beside the hand-offs.

A gated hand-off is journaled ``awaiting`` by the router (or by the bus, on the target's host) and waits
there until a person decides. Each decision is one conditional update of the hand-off's row — from
``awaiting`` only, so of two racing decisions one wins — with its ``gates`` row (who, when, and the prompt
before an edit) in the same transaction:

    awaiting ──> transformed (passed; the dispatcher types it) | dropped | expired (the route's ``within:``)

The ``gates`` row also says when the person was told (``settings.notify``): once per awaiting hand-off,
across restarts.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from pipeline.engine.config import Route
from pipeline.engine.journal import HandoffState, Journal
from pipeline.engine.journal.handoffs import digest
from pipeline.system.logs import redact

__all__ = ["DECISIONS", "Decision", "GateRecord", "awaiting", "decide", "expires_after", "gate_fields",
           "gates_of", "mark_notified"]

Decision = Literal["passed", "dropped", "expired"]
#: the hand-off's state after each decision
DECISIONS: dict[Decision, HandoffState] = {"passed": "transformed", "dropped": "dropped",
                                           "expired": "expired"}


@dataclass(frozen=True)
class GateRecord:
    """What the journal holds of one gated hand-off's decision (``baton history --json``'s ``gate``)."""

    key: str
    #: when the person was told it awaits them (None: not yet, or no ``settings.notify``)
    notified: float | None
    decision: Decision | None
    #: who decided: ``cli``, ``web 127.0.0.1``, ``bus HOST (cli)``; ``within 30m`` for an expiry
    decided_by: str | None
    decided_at: float | None
    #: the prompt before a person's edit (``baton pass KEY --text``); None when passed as it was
    original: str | None


def expires_after(route: Route) -> float | None:
    """How long a gated hand-off of ``route`` awaits before it expires: its ``within:`` — except on a join,
    whose ``within:`` is how long its group waits for answers (its hand-off then awaits until decided)."""
    return None if route.gate != "person" or route.is_join else route.within_s


def decide(journal: Journal, key: str, decision: Decision, by: str, text: str | None = None) -> bool:
    """Decide the awaiting hand-off ``key``; False (nothing changed) when it is not awaiting (any more).
    ``text``: passed with this prompt instead of its own (the original is kept in ``gates``)."""
    now, state = time.time(), DECISIONS[decision]
    note = f"{decision} by {by}" + (" (the prompt edited)" if text is not None else "")
    with journal._tx() as db:
        row = db.execute("SELECT prompt FROM handoffs WHERE key=? AND state='awaiting'", (key,)).fetchone()
        if row is None:
            return False
        if text is not None:
            db.execute("UPDATE handoffs SET prompt=?, prompt_digest=? WHERE key=?", (text, digest(text), key))
        db.execute("UPDATE handoffs SET state=?, note=?, updated=? WHERE key=?",
                   (state, redact(note), now, key))
        db.execute(
            "INSERT INTO gates (key, decision, decided_by, decided_at, original) VALUES (?,?,?,?,?) "
            "ON CONFLICT (key) DO UPDATE SET decision=excluded.decision, decided_by=excluded.decided_by, "
            "decided_at=excluded.decided_at, original=excluded.original",
            (key, decision, by, now, row[0] if text is not None else None))
    return True


def mark_notified(journal: Journal, key: str) -> bool:
    """Record that the person was told ``key`` awaits them, before telling them; False when that was
    recorded already (told once, whatever restarts come between)."""
    with journal._tx() as db:
        if db.execute("SELECT notified FROM gates WHERE key=? AND notified IS NOT NULL", (key,)).fetchone():
            return False
        db.execute("INSERT INTO gates (key, notified) VALUES (?,?) ON CONFLICT (key) DO UPDATE SET "
                   "notified=excluded.notified", (key, time.time()))
    return True


def awaiting(journal: Journal) -> list[tuple[str, str, str, str, str, float]]:
    """Every hand-off awaiting a person: (key, route, source, target, prompt, created), oldest first."""
    rows = journal.db.execute("SELECT key, route, source, target, prompt, created FROM handoffs "
                              "WHERE state='awaiting' ORDER BY created, key").fetchall()
    return [(str(k), str(r), str(s), str(t), str(p or ""), float(c)) for k, r, s, t, p, c in rows]


def gates_of(journal: Journal, keys: Iterable[str]) -> dict[str, GateRecord]:
    """The ``gates`` rows of ``keys`` that have one."""
    keys = list(keys)
    found: dict[str, GateRecord] = {}
    for start in range(0, len(keys), 500):  # SQLite's limit on a statement's parameters
        chunk = keys[start:start + 500]
        marks = ",".join("?" * len(chunk))
        for row in journal.db.execute("SELECT key, notified, decision, decided_by, decided_at, original "
                                      f"FROM gates WHERE key IN ({marks})", chunk):
            found[row[0]] = GateRecord(*row)
    return found


def gate_fields(journal: Journal, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` (``baton history --json``'s hand-offs) with their ``gate``: ``{decision, decided_by,
    decided_at, original, notified}`` for a gated hand-off (awaiting, or decided), null for any other."""
    gates = gates_of(journal, [row["key"] for row in rows if "kind" not in row])
    for row in rows:
        if "kind" in row:
            continue
        gate = gates.get(row["key"])
        if gate is None:
            row["gate"] = dict(_UNDECIDED) if row.get("state") == "awaiting" else None
        else:
            row["gate"] = {name: value for name, value in asdict(gate).items() if name != "key"}
    return rows


_UNDECIDED = {"decision": None, "decided_by": None, "decided_at": None, "original": None, "notified": None}
