"""A journal as a daemon left running for months leaves it: in every table, records finished long ago, records
finished lately, and records still under way that are as old — written through the journal's own calls,
then aged (their times moved back). What pruning must forget of it, and every row of it, to compare."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pipeline.engine.gate_journal import decide, mark_notified
from pipeline.engine.hops import HopLedger
from pipeline.engine.join_journal import JoinBook
from pipeline.engine.journal import FINAL_STATES, STATES, Journal
from pipeline.plugin.events import Completion
from tests.support.journal import add_handoff

__all__ = ["AGE_S", "FORGOTTEN", "RECENT_S", "rows", "seed"]

#: how old the old records are made: past the 30 days kept
AGE_S = 40 * 86400.0
#: how old the recent ones are made: within the 30 days (``baton history`` still shows them)
RECENT_S = 29 * 86400.0
#: the join route of the seeded groups, and its sources
JOIN, SOURCES = "verdicts", ["security", "style"]

#: every row that old *and* finished: what a prune forgets, by table (the ids :func:`rows` gives)
FORGOTTEN: dict[str, set[str]] = {
    "handoffs": {f"r@old-{s}" for s in FINAL_STATES} | {"gated@old-gate"},
    "completions": {f"a:old-{s}" for s in STATES} | {"a:old-gate", "c:old-routed"},
    "hops": {"old-tile"},
    "actions": {"old-action"},
    "gates": {"gated@old-gate"},
    "turn_origins": {"c:old-routed"},
    "join_groups": {"coder:old-handed", "coder:old-dropped"},
    "join_answers": {"coder:old-handed/security/0", "coder:old-handed/style/0", "coder:old-handed/security/1",
                     "coder:old-dropped/security/0"},
}
#: each table's column that tells old rows from new, and its times
_TIMES = {
    "handoffs": ("turn_id", ("created", "updated")), "completions": ("turn_id", ("at", "seen")),
    "actions": ("id", ("created", "updated")), "hops": ("tile", ("at",)),
    "turn_origins": ("turn_id", ("at",)), "join_answers": ("turn_id", ("at",)),
    "join_groups": ("substr(grp, 7)", ("started", "updated")),
}
#: each table's row, as one id
_IDS = {
    "handoffs": "key", "completions": "tile || ':' || turn_id", "hops": "tile", "actions": "id",
    "gates": "key", "turn_origins": "tile || ':' || turn_id", "join_groups": "grp",
    "join_answers": "grp || '/' || source || '/' || late",
}


def seed(path: Path) -> Journal:
    """The journal at ``path``, with old and recent rows in every table (see :data:`FORGOTTEN`)."""
    journal = Journal(path)
    for age in ("old", "new"):
        for state in STATES:  # one hand-off in each state, all the route r from a to b
            add_handoff(journal, "r", "a", "b", f"{age}-{state}", state)
        add_handoff(journal, "gated", "a", "b", f"{age}-gate", "awaiting")
        assert decide(journal, f"gated@{age}-gate", "dropped", "cli")  # a person's decision, and its gate
        assert mark_notified(journal, f"r@{age}-awaiting")  # the gate of one still awaiting
        journal.push_hop(f"{age}-tile", 1)
        journal.start_action(f"{age}-action", "hold", "r", "cli", "alpha")
        journal.end_action(f"{age}-action", True, "held")
        _turns(journal, age)
        _groups(JoinBook(journal), age)
    journal.record_completion(Completion(tile="a", turn_id="old-unrouted"))  # a crash came before routing
    _age(journal.db)
    return journal


def _turns(journal: Journal, age: str) -> None:
    """Two turns of c whose hop and origin were taken: one routed, one not yet (a crash came between)."""
    ledger = HopLedger(journal)
    for turn in (f"{age}-routed", f"{age}-unrouted"):
        ledger.expect("c", 1, "a:x")
        ledger.take_with_origin("c", turn)
        journal.record_completion(Completion(tile="c", turn_id=turn, hop=1))
    journal.record_routing(Completion(tile="c", turn_id=f"{age}-routed", hop=1), [])


def _groups(book: JoinBook, age: str) -> None:
    """Groups of the join in each state: handed on (and an answer late to it), dropped, joining, complete."""
    def answer(group: str, source: str, turn: str) -> None:
        book.add_answer(JOIN, "coder", SOURCES, 2, 3600.0, f"coder:{age}-{group}",
                        (source, f"{age}-{turn}", 1, f"{source} says"))

    for source in SOURCES:
        answer("handed", source, f"{source}-1")
        answer("complete", source, f"{source}-2")
    book.finished(JOIN, f"coder:{age}-handed", "handed-on")
    answer("handed", "security", "security-late")
    answer("dropped", "security", "security-3")
    book.time_out(JOIN, f"coder:{age}-dropped")
    book.finished(JOIN, f"coder:{age}-dropped", "dropped")
    answer("joining", "style", "style-4")


def _age(db: sqlite3.Connection) -> None:
    """Every old row's times moved back :data:`AGE_S`, every new one's :data:`RECENT_S`."""
    for pattern, by in (("old-%", AGE_S), ("new-%", RECENT_S)):
        for table, (name, times) in _TIMES.items():
            moved = ", ".join(f"{column}={column}-?" for column in times)
            db.execute(f"UPDATE {table} SET {moved} WHERE {name} LIKE ?", (*[by] * len(times), pattern))


def rows(path: Path) -> dict[str, set[str]]:
    """Every row of the journal at ``path``, by table, as one id each (read-only)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {table: {str(i) for (i,) in db.execute(f"SELECT {column} FROM {table}")}
                for table, column in _IDS.items()}
    finally:
        db.close()
