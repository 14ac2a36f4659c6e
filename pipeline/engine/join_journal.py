"""A join's groups in the journal: which answers each group holds, and whether it was handed on.

A join route (``from: [security, style]``) hands on once per *group*. A group is the answers of its
sources to one upstream turn (the hop chain says which: :mod:`pipeline.engine.hops`), or, for turns a person
started, the next finished turn of each source (an *arrival* group). Its id is part of the hand-off's key,
``route@<group>``:

- ``<tile>:<turn>`` — the answers to hand-offs of ``tile``'s turn ``turn`` (``verdicts@coder:7f3a…``);
- ``arrival:<tile>:<turn>`` — an arrival group, named after the turn that opened it.

A group is ``joining`` until enough of its sources answered (``join:``), then ``complete`` while its
hand-off is made, then ``handed-on``; a group whose ``within:`` passed is ``complete`` with ``timed_out``,
then ``handed-on`` (``on_timeout: hand-on``) or ``dropped``. Each step is written here before anything is
typed, and each write is idempotent (the same turn recorded twice changes nothing), so a daemon killed
anywhere finishes the group on restart without losing an answer or handing it on twice
(:mod:`pipeline.engine.stages.join`).

A group handed on or dropped is forgotten with its answers once it is older than the journal keeps
finished records (30 days: :mod:`pipeline.engine.journal.prune`); one joining or complete never is.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.engine.journal import FINISHED_GROUPS, Journal

__all__ = ["GROUP_STATES", "Group", "JoinBook", "joining_by_target", "joining_groups", "joining_words",
           "read_joining"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS join_groups (
    route TEXT NOT NULL, grp TEXT NOT NULL, target TEXT NOT NULL, sources TEXT NOT NULL,
    needs INTEGER NOT NULL, state TEXT NOT NULL, arrival INTEGER NOT NULL,
    timed_out INTEGER NOT NULL DEFAULT 0, started REAL NOT NULL, deadline REAL, updated REAL NOT NULL,
    PRIMARY KEY (route, grp));
CREATE INDEX IF NOT EXISTS join_groups_state ON join_groups (state);
CREATE TABLE IF NOT EXISTS join_answers (
    route TEXT NOT NULL, grp TEXT NOT NULL, source TEXT NOT NULL, turn_id TEXT NOT NULL, hop INTEGER NOT NULL,
    text TEXT NOT NULL, late INTEGER NOT NULL DEFAULT 0, at REAL NOT NULL,
    PRIMARY KEY (route, grp, source, late));
"""
#: the states a group passes (``joining`` is the one ``baton history`` and the board show)
GROUP_STATES = ("joining", "complete", *FINISHED_GROUPS)
ARRIVAL = "arrival:"


@dataclass(frozen=True)
class Group:
    """One group of a join route, as the journal holds it."""

    route: str
    id: str
    target: str
    sources: tuple[str, ...]
    needs: int
    state: str
    timed_out: bool
    started: float
    deadline: float | None
    #: source -> (turn id, hop, answer): each source's last answer before the group was handed on
    answers: dict[str, tuple[str, int, str]] = field(default_factory=dict)
    #: when its answers last changed (``started`` until it has one): ``baton history --follow`` shows a
    #: joining group again each time this moves
    changed: float = 0.0

    @property
    def answered(self) -> list[str]:
        """The sources that answered, in the order of ``from:``."""
        return [s for s in self.sources if s in self.answers]

    @property
    def missing(self) -> list[str]:
        return [s for s in self.sources if s not in self.answers]

    @property
    def complete(self) -> bool:
        return len(self.answers) >= self.needs

    @property
    def hop(self) -> int:
        """The highest hop of its answers: the join's hand-off is one more."""
        return max((hop for _, hop, _ in self.answers.values()), default=0)

    @property
    def progress(self) -> str:
        """``1 of 2: security`` (what ``baton history`` shows as ``joining (1 of 2: security)``)."""
        return f"{len(self.answers)} of {self.needs}: {', '.join(self.answered) or 'none yet'}"


_GROUP_COLUMNS = "route, grp, target, sources, needs, state, timed_out, started, deadline"


class JoinBook:
    """The join tables of one journal."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        journal.db.executescript(SCHEMA)

    def add_answer(self, route: str, target: str, sources: list[str], needs: int, within_s: float | None,
                   origin: str, answer: tuple[str, str, int, str]) -> Group:
        """Put ``answer`` — (source, turn id, hop, text) — in its group of ``route`` (``origin``'s, or the
        open arrival group) in one transaction; the group becomes ``complete`` when it has ``needs``
        sources. An answer to a group already handed on is kept as late (never handed on); the same turn
        recorded again changes nothing. Returns the group as it is now."""
        source, turn_id, hop, text = answer
        db, now = self.journal.db, time.time()
        with self.journal._tx():
            group_id = origin or self._arrival_group(route, source, turn_id)
            if self._group(route, group_id) is None:
                db.execute(
                    f"INSERT INTO join_groups ({_GROUP_COLUMNS}, arrival, updated) VALUES (?,?,?,?,?,"
                    "'joining',0,?,?,?,?)",
                    (route, group_id, target, ",".join(sources), needs, now,
                     None if within_s is None else now + within_s, int(not origin), now))
            group = self._group(route, group_id)
            assert group is not None
            if any(turn == turn_id for _, turn, _, _ in self._answers(route, group_id, late=None)):
                return group  # this turn is in already (a restart handles it again)
            late = int(group.state != "joining")
            db.execute(
                "INSERT INTO join_answers (route, grp, source, turn_id, hop, text, late, at) "
                "VALUES (?,?,?,?,?,?,?,?) ON CONFLICT (route, grp, source, late) DO UPDATE SET "
                "turn_id=excluded.turn_id, hop=excluded.hop, text=excluded.text, at=excluded.at",
                (route, group_id, source, turn_id, hop, text, late, now))
            group = self._group(route, group_id)
            assert group is not None
            if group.state == "joining" and group.complete:
                self._set(route, group_id, "complete")
                group = self._group(route, group_id)
            assert group is not None
            return group

    def _arrival_group(self, route: str, source: str, turn_id: str) -> str:
        """The arrival group a person's turn joins: the oldest still joining (whichever sources it has:
        the source's answer there is replaced by this later one), else a new one named after this turn."""
        row = self.journal.db.execute(
            "SELECT grp FROM join_groups WHERE route=? AND arrival=1 AND state='joining' ORDER BY started "
            "LIMIT 1", (route,)).fetchone()
        return str(row[0]) if row else f"{ARRIVAL}{source}:{turn_id}"

    def time_out(self, route: str, group_id: str) -> Group | None:
        """``within:`` passed for a joining group: ``complete`` and ``timed_out`` (its hand-off says who did
        not answer, or is dropped). None when it is not joining (any more)."""
        with self.journal._tx():
            group = self._group(route, group_id)
            if group is None or group.state != "joining":
                return None
            self.journal.db.execute("UPDATE join_groups SET timed_out=1 WHERE route=? AND grp=?",
                                    (route, group_id))
            self._set(route, group_id, "complete")
            return self._group(route, group_id)

    def finished(self, route: str, group_id: str, state: str) -> None:
        """A complete group's hand-off was journaled: ``handed-on`` (or ``dropped``)."""
        self._set(route, group_id, state, only="complete")

    def _set(self, route: str, group_id: str, state: str, only: str | None = None) -> None:
        where = " AND state=?" if only else ""
        self.journal.db.execute(f"UPDATE join_groups SET state=?, updated=? WHERE route=? AND grp=?{where}",
                                (state, time.time(), route, group_id, *((only,) if only else ())))

    def group(self, route: str, group_id: str) -> Group | None:
        return self._group(route, group_id)

    def _group(self, route: str, group_id: str) -> Group | None:
        row = self.journal.db.execute(f"SELECT {_GROUP_COLUMNS} FROM join_groups WHERE route=? AND grp=?",
                                      (route, group_id)).fetchone()
        return None if row is None else self._of(row)

    def _of(self, row: tuple[object, ...]) -> Group:
        route, grp, target, sources, needs, state, timed_out, started, deadline = row
        answers = {s: (t, h, x) for s, t, h, x in self._answers(str(route), str(grp), late=0)}
        [last] = self.journal.db.execute(
            "SELECT max(at) FROM join_answers WHERE route=? AND grp=? AND late=0", (route, grp)).fetchone()
        return Group(str(route), str(grp), str(target), tuple(str(sources).split(",")), int(str(needs)),
                     str(state), bool(timed_out), float(str(started)),
                     None if deadline is None else float(str(deadline)), answers,
                     float(str(started)) if last is None else float(last))

    def _answers(self, route: str, group_id: str, late: int | None) -> list[tuple[str, str, int, str]]:
        """(source, turn id, hop, text) of a group's answers (``late``: 0 those it holds, 1 those after it
        was handed on, None both)."""
        where = "" if late is None else f" AND late={int(late)}"
        rows = self.journal.db.execute(
            f"SELECT source, turn_id, hop, text FROM join_answers WHERE route=? AND grp=?{where}",
            (route, group_id)).fetchall()
        return [(str(s), str(t), int(h), str(x)) for s, t, h, x in rows]

    def late(self, route: str, group_id: str) -> list[tuple[str, str]]:
        """(source, turn id) of the answers that came after the group was handed on (recorded only)."""
        return [(s, t) for s, t, _, _ in self._answers(route, group_id, late=1)]

    def in_state(self, *states: str) -> list[Group]:
        """The groups in ``states``, oldest first (a restart finishes the complete ones, times the
        joining)."""
        marks = ",".join("?" * len(states))
        rows = self.journal.db.execute(
            f"SELECT {_GROUP_COLUMNS} FROM join_groups WHERE state IN ({marks}) ORDER BY started",
            states).fetchall()
        return [self._of(row) for row in rows]


def joining_groups(db: sqlite3.Connection) -> list[tuple[str, list[str], list[str], int]]:
    """Each group still joining, oldest first: (route, its targets, the sources that answered in the
    order of ``from:``, how many it needs), read-only (a journal without the join tables has none)."""
    try:
        rows = db.execute(
            "SELECT g.route, g.target, g.sources, g.needs, group_concat(a.source) FROM join_groups g "
            "LEFT JOIN join_answers a ON a.route=g.route AND a.grp=g.grp AND a.late=0 "
            "WHERE g.state='joining' GROUP BY g.route, g.grp ORDER BY g.started").fetchall()
    except sqlite3.OperationalError:
        return []
    groups = []
    for route, targets, sources, needs, answered in rows:
        have = set(str(answered).split(",")) if answered else set()
        groups.append((str(route), str(targets).split(","), [s for s in str(sources).split(",") if s in have],
                       int(needs)))
    return groups


def joining_words(names: list[str], needs: int) -> str:
    """A joining group's progress: ``1 of 2 (security)``."""
    return f"{len(names)} of {needs} ({', '.join(names) or 'none yet'})"


def joining_by_target(db: sqlite3.Connection) -> dict[str, list[str]]:
    """What the board shows on each target tile: ``["verdicts: 1 of 2 (security)"]`` per joining group,
    read-only (a journal without the join tables has none)."""
    shown: dict[str, list[str]] = {}
    for route, targets, names, needs in joining_groups(db):
        for target in targets:
            shown.setdefault(target, []).append(f"{route}: {joining_words(names, needs)}")
    return shown


def read_joining(path: Path) -> dict[str, list[str]]:
    """:func:`joining_by_target` of the journal at ``path``, read-only (``baton status``, the board: they
    never write the journal, nor make one where there is none)."""
    if not path.exists():
        return {}
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2)
    except sqlite3.Error:
        return {}
    try:
        return joining_by_target(db)
    except sqlite3.Error:  # locked past the timeout: the next look tries again
        return {}
    finally:
        db.close()
