"""The hand-offs awaiting a person (``gate: person``) as the page shows them: each with its full prompt
(the person reads it, may edit it, and passes or drops it), read-only from the journal."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["read_awaiting"]


def read_awaiting(path: Path, within: Mapping[str, float] | None = None) -> list[dict[str, Any]]:
    """``{key, route, source, target, prompt, created, expires, host}`` of each awaiting hand-off, oldest
    first; ``expires`` (epoch seconds) when its route has ``within:`` (``within``: seconds, by route), else
    None; ``host`` None (this host's: another host's come from the bus, :mod:`pipeline.views.hosts_board`).
    Read-only: the page never writes the journal (nor makes one where there is none)."""
    if not path.exists():
        return []
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2)
    try:
        rows = db.execute("SELECT key, route, source, target, prompt, created FROM handoffs "
                          "WHERE state='awaiting' ORDER BY created, key").fetchall()
    except sqlite3.Error:
        return []  # no handoffs table yet, or locked past the timeout: the next look tries again
    finally:
        db.close()
    limits = within or {}
    return [{"key": key, "route": route, "source": source, "target": target, "prompt": prompt or "",
             "created": created, "expires": created + limits[route] if route in limits else None,
             "host": None}
            for key, route, source, target, prompt, created in rows]
