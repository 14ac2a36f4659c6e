"""A join's groups still joining as rows of ``baton history``: the one-shot table and ``--json``, and
``--follow``, which prints a group again each time an answer reaches it (``1 of 2`` → ``2 of 2``) and no
more once it is handed on (its hand-off's own row, same key, takes over). One place builds them so the
three show the same row."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from pipeline.engine.join_journal import Group, JoinBook
from pipeline.engine.journal import HistoryFilter, Journal

__all__ = ["group_row", "joining_rows"]


def group_row(group: Group) -> dict[str, Any]:
    """A join's group still joining, as a row of the same table: keyed as its hand-off will be
    (``route@<group>``), state ``joining``, ``joining`` its progress (``1 of 2: security``: the table shows
    ``joining (1 of 2: security)``), ``group`` its answers so far, ``updated`` when the last one came
    (docs/json.md)."""
    until = time.strftime("%H:%M:%S", time.localtime(group.deadline)) if group.deadline else ""
    deadline = f" (until {until})" if until else ""
    return {"kind": "join", "key": f"{group.route}@{group.id}", "route": group.route,
            "source": ",".join(group.sources), "target": group.target, "turn_id": group.id,
            "hop": group.hop + 1, "state": "joining", "joining": group.progress, "response": None,
            "prompt": None, "attempts": 0, "last_error": "", "pane": None, "usage": None,
            "note": f"waiting for {', '.join(group.missing)}{deadline}",
            "group": {"id": group.id, "answered": group.answered, "missing": group.missing,
                      "needs": group.needs, "deadline": group.deadline},
            "created": group.started, "updated": group.changed}


def joining_rows(journal: Journal, match: HistoryFilter, since: float | None = None) -> list[dict[str, Any]]:
    """The joining groups that ``match`` (``--tile``: a source of the group, or its target); with
    ``since``, only those whose answers changed at or after it (``--follow``'s next look)."""
    groups = JoinBook(journal).in_state("joining")
    rows = [group_row(g) for g in groups if since is None or g.changed >= since]
    anywhere = replace(match, tile=None)
    return [row for row in rows if anywhere.matches(row) and (
        match.tile is None or match.tile in (*row["group"]["answered"], *row["group"]["missing"],
                                             *row["target"].split(",")))]
