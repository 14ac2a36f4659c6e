"""Stage 1: completions from every tile's adapter, one stream, each turn once.

Each adapter may report a turn through several signals (a file, a hook, the screen); the detector keeps
the first report of each ``(tile, turn_id)`` and drops the rest, so one turn is one completion whichever
signal comes first. An adapter that crashes is logged and restarted: one broken tile never stops the rest.

Catch-up is the detector's, not the adapters': when it starts following a tile, and whenever the adapter
says it follows a new session (:meth:`TileContext.resolved`), it asks the adapter for the turns that ended
since the journal's mark for that tile (``followed_until``) and hands off those the journal has not seen.
A tile no run has followed before has history, not news: its recent turns are recorded as ``skipped``.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from functools import partial

import anyio
from anyio.abc import ObjectSendStream

from pipeline.engine.config import Config, Settings
from pipeline.engine.hops import HopLedger
from pipeline.engine.journal import MEMORY, Journal
from pipeline.engine.tiles import TileRuntime
from pipeline.engine.watch import FileWatcher
from pipeline.plugin.events import Completion
from pipeline.spool import ensure_spool_dir, read_records
from pipeline.system.text import count

__all__ = ["CompletionDetector"]

log = logging.getLogger("batonpass")
#: how often the journal's ``followed_until`` marks move while tiles are followed
MARK_EVERY_S = 10.0
#: a catch-up looks this far before the mark (and before the oldest turn seen but not routed): a turn is
#: reported some time after it ended (answer waits, the status grace, a full stream), and its end time
#: comes from the agent's clock. Asking again for turns the journal has is harmless: it drops them.
LOOK_BACK_S = 60.0


class CompletionDetector:
    def __init__(self, tiles: dict[str, TileRuntime], hops: HopLedger, *, memory: int = 4096,
                 report: Callable[[Completion], None] | None = None, journal: Journal | None = None,
                 config: Config | None = None) -> None:
        self.tiles, self.hops, self.memory = tiles, hops, memory
        self.report = report or (lambda completion: None)
        self.journal = journal if journal is not None else Journal(MEMORY)
        self.config = config
        self.catch_up_s = (config.settings if config is not None else Settings()).catch_up_s
        self.started = time.time()
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._send: ObjectSendStream[Completion] | None = None
        #: tiles whose catch-up ran in this run: only their marks move
        self._followed: set[str] = set()
        for runtime in tiles.values():
            runtime.ctx.on_resolved = lambda runtime=runtime: self.catch_up(runtime)

    async def run(self, send: ObjectSendStream[Completion], watcher: FileWatcher | None = None) -> None:
        self._send = send
        async with send, anyio.create_task_group() as tg:
            for runtime in self.tiles.values():
                tg.start_soon(self._follow, runtime)
            if watcher is not None:
                tg.start_soon(self._hooks, watcher)
            tg.start_soon(self._mark)

    # ---- catch-up ---------------------------------------------------------------------------------------

    async def catch_up(self, runtime: TileRuntime) -> None:
        """Ask the tile's adapter for the turns that ended while no run followed the tile (or, after a new
        session, since the last look) and take them like live ones; the journal drops those handled."""
        now = time.time()
        mark = await self.journal.until_read(partial(self.journal.followed_until, runtime.name))
        first = mark is None
        if mark is None:
            since = now - max(self.catch_up_s, LOOK_BACK_S)
        else:
            unrouted = await self.journal.until_read(
                partial(self.journal.oldest_unrouted, runtime.name, now - self.catch_up_s))
            since = min(mark, now, unrouted if unrouted is not None else now) - LOOK_BACK_S
        try:
            ends = await runtime.adapter.finished_turns(since)
        except Exception as exc:  # a tile whose files cannot be read now is followed live all the same
            log.error("%s: the %s adapter could not list finished turns (%s: %s); no catch-up this time",
                      runtime.name, runtime.adapter.name, type(exc).__name__, exc)
            ends = None
        news = 0  # the turns this run had not seen: a look again after a new session says only those
        for end in ends or []:
            completion = end.completion(runtime.name, "catch-up")
            news += (completion.tile, completion.turn_id) not in self._seen
            if first:
                await self._history(completion)
            else:
                await self.accept(completion)
        if news:
            log.info("%s: %s ended since %s (%s)", runtime.name, count(news, "turn"),
                     time.strftime("%H:%M:%S", time.localtime(since)),
                     "history, not handed off" if first else "the journal decides")
        await self.journal.until_done(partial(self.journal.mark_followed, [runtime.name], now))
        self._followed.add(runtime.name)

    async def _history(self, completion: Completion) -> None:
        """A turn that ended before any run followed its tile: recorded as skipped, never handed off."""
        if not self.is_new(completion):
            return
        seen = partial(self.journal.seen_completion, completion.tile, completion.turn_id)
        if await self.journal.until_read(seen):
            return
        await self._skip(completion, "history: it ended before batonpass first followed this tile")

    async def _skip(self, completion: Completion, why: str) -> None:
        routes = self.config.routes_from(completion.tile) if self.config is not None else []
        routes = [r for r in routes if not r.is_join]  # a join's group decides for its sources' turns
        await self.journal.until_done(partial(self.journal.record_completion, completion))
        await self.journal.until_done(partial(
            self.journal.record_routing, completion,
            [(None, r.label, target, "skipped", why, branch)
             for r in routes for target, branch in r.branches()]))
        log.info("skipped     %s turn %s: %s", completion.tile, completion.turn_id, why)

    async def _mark(self) -> None:
        """Move the journal's marks of the tiles being followed (a catch-up looks back from there)."""
        while True:
            await anyio.sleep(MARK_EVERY_S)
            if self._followed:  # a journal that cannot take it now: the next tick's mark will do
                marks = partial(self.journal.mark_followed, sorted(self._followed), time.time())
                self.journal.try_write(marks)

    # ---- completions ---------------------------------------------------------------------------------------

    async def accept(self, completion: Completion) -> None:
        """Pass ``completion`` on unless its turn was already seen (through another signal, or by a run
        before a restart)."""
        if not self.is_new(completion):
            log.debug(
                "%s: turn %s already seen (signal %s)", completion.tile, completion.turn_id, completion.signal
            )
            return
        # while the journal cannot be used this waits, and the adapter that reported the turn with it
        seen = await self.journal.until_read(
            partial(self.journal.seen_completion, completion.tile, completion.turn_id))
        if seen is not None and seen[1]:
            log.debug("%s: turn %s was handled before a restart", completion.tile, completion.turn_id)
            return
        age = self.started - completion.at
        if age > self.catch_up_s:
            # ended while batonpass was down, too long ago to act on now: recorded, not handed off
            await self._skip(
                completion, f"finished {age:.0f}s before batonpass started (catch_up_s={self.catch_up_s:g})"
            )
            return
        take = partial(self.hops.take, completion.tile, completion.turn_id)
        hop = seen[0] if seen is not None else await self.journal.until_done(take)
        completion = replace(completion, hop=hop)
        await self.journal.until_done(partial(self.journal.record_completion, completion))
        log.info("completion  %s turn %s %s (via %s, hop %d)", completion.tile, completion.turn_id,
                 completion.outcome, completion.signal, completion.hop)
        self.report(completion)
        assert self._send is not None, "accept() before run()"
        await self._send.send(completion)

    async def _hooks(self, watcher: FileWatcher) -> None:
        """Records from the agents' own hooks (pipeline.spool), offered to the tiles of that agent."""
        with watcher.subscribe(ensure_spool_dir()) as sub:
            while True:
                for record in read_records():
                    for runtime in self.tiles.values():
                        if runtime.adapter.name != record.agent:
                            continue
                        try:
                            completion = await runtime.adapter.hook_completion(record)
                        except Exception as exc:
                            log.error("%s: bad %s hook record: %s: %s", runtime.name, record.agent,
                                      type(exc).__name__, exc)
                            continue
                        if completion is not None:
                            await self.accept(completion)
                await sub.wait()

    def is_new(self, completion: Completion) -> bool:
        key = (completion.tile, completion.turn_id)
        if key in self._seen:
            return False
        self._seen[key] = None
        if len(self._seen) > self.memory:
            self._seen.popitem(last=False)
        return True

    async def _follow(self, runtime: TileRuntime) -> None:
        await self.catch_up(runtime)
        delay = 1.0
        while True:
            try:
                await runtime.adapter.follow(self.accept)
                return
            except Exception as exc:  # one tile's failure is reported, the others go on
                log.error(
                    "%s: the %s adapter failed while watching (%s: %s); restarting in %.0fs",
                    runtime.name,
                    runtime.adapter.name,
                    type(exc).__name__,
                    exc,
                    delay,
                    exc_info=log.isEnabledFor(logging.DEBUG),
                )
                await anyio.sleep(delay)
                delay = min(delay * 2, 30.0)
