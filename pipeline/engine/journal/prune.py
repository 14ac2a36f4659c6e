"""What the journal forgets, and when: a daemon left running for months must not keep every hand-off it
ever made. A record finished longer than :data:`KEEP_S` ago goes (``baton history`` looks back that far);
what is still under way stays, whatever its age.

Gone once older than :data:`KEEP_S` (by when it last changed):

- a hand-off in a final state (:data:`~pipeline.engine.journal.records.FINAL_STATES`), and the person's
  gate decision on it (a ``gates`` row whose hand-off is gone);
- a completion that was routed (one seen but not routed is handled again after a crash: it stays);
- a hop count pushed for a turn that never came, a turn's recorded hop and origin (unless its completion
  is still to be routed), and a person's action;
- a join's group that was handed on or dropped (:data:`FINISHED_GROUPS`), with its answers (the late ones
  too).

Kept, whatever their age: a hand-off pending, transformed, awaiting a person, held or delivering; its
gate; a group still joining (its ``within:`` deadline holds across restarts) or complete (its hand-off is
being made); each tile's followed-until mark and the held routes (one row each, live state).

Everything goes in one transaction: a crash part-way forgets nothing, and the next start prunes again.
"""

from __future__ import annotations

import time

from pipeline.engine.journal.records import FINAL_STATES
from pipeline.engine.journal.schema import JournalBase

#: how long finished records are kept (``baton history`` looks back this far)
KEEP_S = 30 * 24 * 3600.0
#: how often a running daemon prunes, besides at its start
PRUNE_EVERY_S = 24 * 3600.0
#: a join group's states once it is done with (its hand-off journaled, or dropped): the others,
#: ``joining`` and ``complete``, are under way (:mod:`pipeline.engine.join_journal`)
FINISHED_GROUPS = ("handed-on", "dropped")

_OLD_GROUP = f"updated < ? AND state IN {FINISHED_GROUPS}"
#: (what, the statement): ``?`` is the cutoff. Hand-offs first: the crash sweep knows the start-up's
#: prune by its first statement (``delete handoffs``)
_JOURNAL = (
    ("hand-off", f"DELETE FROM handoffs WHERE updated < ? AND state IN {FINAL_STATES}"),
    ("completion", "DELETE FROM completions WHERE seen < ? AND routed = 1"),
    ("hop", "DELETE FROM hops WHERE at < ?"),
    ("action", "DELETE FROM actions WHERE updated < ?"),
)
_ORPHAN_GATES = ("gate", "DELETE FROM gates WHERE key NOT IN (SELECT key FROM handoffs)")
#: the tables other modules make when first used, by the table that says they are there: a turn's hop
#: and origin (:mod:`pipeline.engine.hops`; one whose completion is not routed yet is taken again after a
#: crash: it stays), a join's groups and their answers (:mod:`pipeline.engine.join_journal`)
_MADE_LATER = {
    "turn_origins": (
        ("turn origin", "DELETE FROM turn_origins WHERE at < ? AND NOT EXISTS (SELECT 1 FROM completions c"
                        " WHERE c.tile = turn_origins.tile AND c.turn_id = turn_origins.turn_id"
                        " AND c.routed = 0)"),
    ),
    "join_groups": (
        ("join answer", "DELETE FROM join_answers WHERE EXISTS (SELECT 1 FROM join_groups g WHERE "
                        f"g.route = join_answers.route AND g.grp = join_answers.grp AND g.{_OLD_GROUP})"),
        ("join group", f"DELETE FROM join_groups WHERE {_OLD_GROUP}"),
    ),
}


class Pruning(JournalBase):
    """The journal's forgetting of old, finished records."""

    def prune(self, older_than_s: float = KEEP_S) -> dict[str, int]:
        """Forget what finished more than ``older_than_s`` ago, in one transaction. Returns how many rows
        went, by what they were (``{"hand-off": 3, "join group": 1}``; only what lost any)."""
        cutoff = time.time() - older_than_s
        gone: dict[str, int] = {}
        with self._tx() as db:
            for what, sql in _JOURNAL:
                gone[what] = db.execute(sql, (cutoff,)).rowcount
            gone[_ORPHAN_GATES[0]] = db.execute(_ORPHAN_GATES[1]).rowcount
            made = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            for table, statements in _MADE_LATER.items():
                for what, sql in statements if table in made else ():
                    gone[what] = db.execute(sql, (cutoff,)).rowcount
        return {what: n for what, n in gone.items() if n > 0}
