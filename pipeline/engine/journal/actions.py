"""What people did from outside a pane (``baton approve``, ``deny``, ``send``, ``retry``, ``hold``,
``resume``; the web page's buttons) and which routes they hold: journaled so an action that comes twice (the
bus redelivers) is done once, and ``baton history`` shows who did what."""

from __future__ import annotations

import time

from pipeline.engine.journal.records import ACTION_COLUMNS, ActionRecord, HistoryFilter
from pipeline.engine.journal.schema import JournalBase
from pipeline.system.logs import redact


class Actions(JournalBase):
    """People's actions and held routes."""

    # ---- actions: what people did (approve, deny, send, retry, hold, resume) -----------------------------

    def start_action(self, action_id: str, kind: str, target: str, origin: str, host: str) -> bool:
        """Record an action as ``started``, before its side effect; False when ``action_id`` is recorded
        already (the same action again, from the bus: it must not be done twice)."""
        now = time.time()
        cur = self.db.execute(
            "INSERT OR IGNORE INTO actions (id, kind, target, origin, host, outcome, created, updated) "
            "VALUES (?,?,?,?,?,'started',?,?)", (action_id, kind, target, origin, host, now, now))
        return cur.rowcount == 1

    def end_action(self, action_id: str, ok: bool, message: str) -> None:
        self.db.execute("UPDATE actions SET outcome=?, message=?, updated=? WHERE id=?",
                        ("done" if ok else "refused", redact(message), time.time(), action_id))

    def action(self, action_id: str) -> ActionRecord | None:
        row = self.db.execute(f"SELECT {ACTION_COLUMNS} FROM actions WHERE id=?", (action_id,)).fetchone()
        return ActionRecord(*row) if row else None

    def actions(self, limit: int = 100, match: HistoryFilter | None = None) -> list[ActionRecord]:
        """The ``limit`` actions that ``match`` (default: all, refused ones too) whose record changed last,
        in the order they changed."""
        where, args = (match or HistoryFilter(refused=True)).action_sql()
        rows = self.db.execute(f"SELECT {ACTION_COLUMNS} FROM actions{where} ORDER BY updated DESC, id "
                               "LIMIT ?", (*args, limit)).fetchall()
        return [ActionRecord(*r) for r in reversed(rows)]

    def actions_changed_since(self, at: float, match: HistoryFilter | None = None) -> list[ActionRecord]:
        """Actions that ``match`` (default: all) whose record changed at or after ``at``, in the order they
        changed (``--follow``)."""
        where, args = (match or HistoryFilter(refused=True)).action_sql(("updated >= ?",), (at,))
        rows = self.db.execute(f"SELECT {ACTION_COLUMNS} FROM actions{where} ORDER BY updated, id",
                               args).fetchall()
        return [ActionRecord(*r) for r in rows]

    # ---- held routes (baton hold / resume): their hand-offs stay queued -----------------------------------

    def hold(self, route: str, origin: str) -> bool:
        """Hold ``route``; False when it was held already."""
        cur = self.db.execute("INSERT OR IGNORE INTO holds (route, origin, at) VALUES (?,?,?)",
                              (route, origin, time.time()))
        return cur.rowcount == 1

    def resume(self, route: str) -> bool:
        """Resume ``route``; False when it was not held."""
        return self.db.execute("DELETE FROM holds WHERE route=?", (route,)).rowcount == 1

    def holds(self) -> dict[str, tuple[str, float]]:
        """The held routes: (who held it, when), by route."""
        return {r: (o, float(a)) for r, o, a in self.db.execute("SELECT route, origin, at FROM holds")}
