"""``baton pass KEY [--text TEXT]`` and ``baton drop KEY``: a person's decision on a hand-off awaiting them
(``gate: person``), as :func:`pipeline.engine.actions.perform` does it on the host where it awaits.

Neither types anything: a pass puts the hand-off back in the daemon's hands (``transformed``, with the edited
prompt if one was given — the original is kept in the journal), and the daemon's dispatcher types it with
its usual checks (never into a busy agent, a draft or a bare shell: queued until the tile is ready). A
drop ends it ``dropped``. A key that is not awaiting — unknown, passed or dropped already, expired, typed —
is refused and nothing changes; of two decisions racing, one wins.
"""

from __future__ import annotations

import time

from pipeline.engine.action_kinds import Action, ActionResult
from pipeline.engine.config import Config
from pipeline.engine.gate_journal import decide, expires_after
from pipeline.engine.hosts import tile_host
from pipeline.engine.journal import Journal
from pipeline.system.text import sanitize

__all__ = ["gate_action"]


def gate_action(action: Action, config: Config, journal: Journal, here: str) -> ActionResult:
    """Pass or drop (``action.kind``) the awaiting hand-off ``action.target`` in this host's journal."""
    key, verb = action.target, action.kind
    record = journal.handoff(key)
    if record is None:
        return ActionResult(False, f"no hand-off {key!r} in the journal (baton history --outcome awaiting "
                            "lists the ones awaiting a person): nothing changed")
    if record.state != "awaiting":
        return ActionResult(False, f"hand-off {key} is {record.state}, not awaiting: nothing to {verb}")
    tile = config.tiles.get(record.target)
    if tile is not None and tile_host(tile, here) != here:
        return ActionResult(False, f"hand-off {key} is on its way to host {tile_host(tile, here)} (the bus "
                            f"has not taken it yet): {verb} it once it is there; nothing changed")
    route = next((r for r in config.routes if r.label == record.route), None)
    within = expires_after(route) if route is not None else None
    if route is not None and within is not None and record.created + within <= time.time():
        decide(journal, key, "expired", f"within {route.within}")
        return ActionResult(False, f"hand-off {key} expired (route {route.label}'s within: {route.within} "
                            f"passed): nothing to {verb}")
    text = action.text if verb == "pass" and action.text != record.prompt else None
    if text is not None and not sanitize(text).strip():
        return ActionResult(False, f"{verb}: the edited prompt is empty (nothing printable): nothing changed")
    if not decide(journal, key, "passed" if verb == "pass" else "dropped", action.origin, text):
        now = journal.handoff(key)
        return ActionResult(False, f"hand-off {key} is {now.state if now else 'gone'}, not awaiting: nothing "
                            f"to {verb}")
    if verb == "drop":
        return ActionResult(True, f"dropped {key}: nothing is typed into {record.target}")
    edited = f" (the edited prompt, {len(text)} characters)" if text is not None else ""
    return ActionResult(True, f"passed {key}{edited}: queued for {record.target}; the daemon types it once "
                        f"{record.target} is ready")
