"""A person's gate in the running daemon (``gate: person`` on a route): what waits, who is told, what expires.

The router journals a gated route's hand-off ``awaiting`` (the bus does, on the target's host, for one that
came from another host) and queues it as any other. The dispatcher asks :meth:`Gate.sort` before it picks
the next hand-off of a tile: an awaiting one steps aside — queued, not typed — and the other hand-offs to
the same tile go on; one a person passed (``baton pass``, the page, another host over the bus: a row the
journal changed under the daemon) is typed like any other, with the text the person gave it if they edited
it; one dropped or expired leaves the queue. A daemon started later finds them in the journal (its
recovery queues every unfinished hand-off, awaiting ones too).

:meth:`Gate.run` tells the person once per awaiting hand-off (``settings.notify``, the ``awaiting`` event;
recorded in the journal before the notice, so a restart does not tell again) and expires what waited past
its route's ``within:`` (counted from when the hand-off was made; journaled ``expired``). It looks when a
gated hand-off arrives, and when the next one is due to expire — not on a timer.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Collection, Mapping
from dataclasses import replace
from functools import partial

import anyio

from pipeline.engine.config import Route
from pipeline.engine.gate_journal import awaiting, decide, expires_after, mark_notified
from pipeline.engine.journal import FINAL_STATES, Journal
from pipeline.engine.notify import Notifier
from pipeline.plugin.events import Prompt

__all__ = ["Gate"]

log = logging.getLogger("batonpass")


class Gate:
    """The gated routes (``routes``: by label) of a daemon whose tiles are ``tiles``."""

    def __init__(self, journal: Journal, notifier: Notifier | None = None,
                 routes: Mapping[str, Route] | None = None, tiles: Collection[str] = (), *,
                 dry_run: bool = False) -> None:
        self.journal, self.notifier, self.tiles = journal, notifier or Notifier(), tiles
        #: a dry run prints every prompt, gated or not: nothing waits for a person there
        gated = {label: r for label, r in (routes or {}).items() if r.gate == "person"}
        self.routes = {} if dry_run else gated
        self.dry_run = dry_run
        #: hand-offs found awaiting in the journal at start (their route may have lost its gate since)
        self.keys: set[str] = set()
        self._wake = anyio.Event()
        self._said: set[str] = set()

    def gates(self, prompt: Prompt) -> bool:
        return prompt.route in self.routes or prompt.key in self.keys

    def hold_key(self, key: str) -> None:
        """``key`` was awaiting when this daemon started: it waits for a person's decision, whatever its
        route in routes.yaml says now (a gate taken off a route lets none of its hand-offs go undecided)."""
        if not self.dry_run:
            self.keys.add(key)

    def arrived(self, prompt: Prompt) -> None:
        """A hand-off reached the dispatcher: if it is gated, :meth:`run` looks (to tell the person)."""
        if self.gates(prompt):
            self._wake.set()

    async def sort(self, waiting: list[Prompt]) -> set[str]:
        """The keys of ``waiting``'s hand-offs that await a person (to be stepped over). In place: a
        dropped or expired one leaves ``waiting``, a passed one takes the text the journal holds (a person's
        edit)."""
        held: set[str] = set()
        for i in reversed(range(len(waiting))):
            prompt = waiting[i]
            if not self.gates(prompt):
                continue
            record = await self.journal.until_read(partial(self.journal.handoff, prompt.key))
            if record is None:
                continue
            if record.state == "awaiting":
                held.add(prompt.key)
                continue
            self.keys.discard(prompt.key)
            if record.state in FINAL_STATES:
                log.info("%-11s %s -> %s: not typed (%s)", record.state, prompt.key, prompt.target,
                         record.note)
                del waiting[i]
            elif record.prompt and record.prompt != prompt.text:
                waiting[i] = replace(prompt, text=record.prompt)
        return held

    async def run(self) -> None:
        """Tell the person of each awaiting hand-off of this host's tiles, once; expire the ones past their
        route's ``within:``. Until cancelled."""
        while True:
            self._wake = anyio.Event()
            due = await self._look()
            with anyio.move_on_after(due):
                await self._wake.wait()

    async def _look(self) -> float:
        """One look at the awaiting hand-offs; how long until the next is due to expire (inf: none)."""
        rows = await self.journal.until_read(partial(awaiting, self.journal))
        due, now = math.inf, time.time()
        for key, label, _source, target, prompt, created in rows:
            if target not in self.tiles:
                continue  # another host's tile: that host's daemon tells and expires
            route = self.routes.get(label)
            within = expires_after(route) if route is not None else None
            if route is not None and within is not None:
                if created + within <= now:
                    await self._expire(key, target, f"within {route.within}")
                    continue
                due = min(due, created + within - now)
            await self._tell(key, label, target, prompt)
        return due

    async def _expire(self, key: str, target: str, by: str) -> None:
        if await self.journal.until_done(partial(decide, self.journal, key, "expired", by)):
            log.warning("expired     %s -> %s: no person passed it %s", key, target, by)

    async def _tell(self, key: str, route: str, target: str, prompt: str) -> None:
        if key not in self._said:
            self._said.add(key)
            log.warning("awaiting    %s -> %s: a person decides: baton pass %s (or --text), baton drop %s",
                        key, target, key, key)
        if self.notifier.wants("awaiting") and await self.journal.until_done(
                partial(mark_notified, self.journal, key)):
            self.notifier.awaiting(key, route, target, prompt)
