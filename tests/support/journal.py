"""Journal rows written as the daemon writes them, for the commands that read the journal."""

from __future__ import annotations

import time

from pipeline.engine.journal import Journal
from pipeline.plugin.events import Completion, Prompt

__all__ = ["add_handoff"]


def add_handoff(journal: Journal, route: str, source: str, target: str, turn: str, state: str,
                reason: str = "", ago_s: float = 0.0) -> None:
    """One hand-off as the daemon records it: routed (transformed, skipped or failed), then its end."""
    completion = Completion(tile=source, turn_id=turn)
    journal.record_completion(completion)
    routed = state if state in ("skipped", "failed") else "transformed"
    prompt = None if routed != "transformed" else Prompt(route, source, target, f"text of {turn}", turn, 1)
    journal.record_routing(completion, [(prompt, route, target, routed, reason)])
    if state != routed:
        journal.set_state(f"{route}@{turn}", state)  # type: ignore[arg-type]
    if ago_s:
        at = time.time() - ago_s
        key = f"{route}@{turn}"
        journal.db.execute("UPDATE handoffs SET created=?, updated=? WHERE key=?", (at, at, key))

