"""What waits on each edge of the route graph the page draws: the hand-offs queued or awaiting a person per
route and target, and the join groups still joining per join route.

Read-only from this host's journal, as the board reads it (:func:`pipeline.views.board.read_handoffs`):
the page never writes the journal, nor makes one where there is none.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.engine.config import Config
from pipeline.engine.join_journal import joining_groups, joining_words
from pipeline.views.board import QUEUED_STATES

__all__ = ["AWAITING", "EdgeCounts", "graph_routes", "read_edge_counts"]

#: a gated hand-off waiting for a person's pass or drop (``gate: person``)
AWAITING = "awaiting"


@dataclass
class EdgeCounts:
    #: (route, target) -> hand-offs not yet typed (``held`` ones too, as the board counts them)
    queued: dict[tuple[str, str], int] = field(default_factory=dict)
    #: (route, target) -> hand-offs awaiting a person
    awaiting: dict[tuple[str, str], int] = field(default_factory=dict)
    #: join route -> each group still joining: ``1 of 2 (security)``
    joining: dict[str, list[str]] = field(default_factory=dict)


def read_edge_counts(path: Path) -> EdgeCounts:
    """The counts of the journal at ``path`` (none where it is missing, locked past the timeout, or older
    than the tables: the next look tries again)."""
    counts = EdgeCounts()
    if not path.exists():
        return counts
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2)
    try:
        marks = ",".join("?" * (len(QUEUED_STATES) + 1))
        for route, target, state, n in db.execute(
                f"SELECT route, target, state, COUNT(*) FROM handoffs WHERE state IN ({marks}) "
                "GROUP BY route, target, state", (*QUEUED_STATES, AWAITING)):
            into = counts.awaiting if state == AWAITING else counts.queued
            into[(str(route), str(target))] = into.get((str(route), str(target)), 0) + int(n)
        for route, _targets, names, needs in joining_groups(db):
            counts.joining.setdefault(route, []).append(joining_words(names, needs))
    except sqlite3.Error:
        return EdgeCounts()
    finally:
        db.close()
    return counts


def graph_routes(config: Config, counts: EdgeCounts, held: set[str]) -> list[dict[str, Any]]:
    """The routes as the page lists and draws them: name, ends, join, choice and gate, and per target what
    waits on its edge."""
    routes = []
    for r in config.routes:
        choice = r.chooses
        routes.append({
            "name": r.label, "from": ",".join(r.sources), "to": ",".join(r.targets), "held": r.label in held,
            "sources": r.sources, "targets": r.targets,
            "join": (r.join if r.join is not None else "all") if r.is_join else None,
            "choose": choice is not None, "default": choice.default if choice else None, "gate": r.gate,
            "queued": {t: counts.queued[(r.label, t)] for t in r.targets if (r.label, t) in counts.queued},
            "awaiting": {t: counts.awaiting[(r.label, t)] for t in r.targets
                         if (r.label, t) in counts.awaiting},
            "joining": counts.joining.get(r.label, []) if r.is_join else []})
    return routes
