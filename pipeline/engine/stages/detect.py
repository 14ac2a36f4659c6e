"""Stage 1: completions from every tile's adapter, one stream, each turn once.

Each adapter may report a turn through several signals (a file, a hook, the screen); the detector keeps
the first report of each ``(tile, turn_id)`` and drops the rest, so one turn is one completion whichever
signal comes first. An adapter that crashes is logged and restarted: one broken tile never stops the rest.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace

import anyio
from anyio.abc import ObjectSendStream

from pipeline.engine.config import Config, Settings
from pipeline.engine.hops import HopLedger
from pipeline.engine.journal import Journal
from pipeline.engine.tiles import TileRuntime
from pipeline.engine.watch import FileWatcher
from pipeline.plugin.events import Completion
from pipeline.spool import ensure_spool_dir, read_records

__all__ = ["CompletionDetector"]

log = logging.getLogger("batonpass")
#: a completion stamped this much before the run started was not seen by this run
CLOCK_SLACK_S = 1.0


class CompletionDetector:
    def __init__(self, tiles: dict[str, TileRuntime], hops: HopLedger, *, memory: int = 4096,
                 report: Callable[[Completion], None] | None = None, journal: Journal | None = None,
                 config: Config | None = None) -> None:
        self.tiles, self.hops, self.memory = tiles, hops, memory
        self.report = report or (lambda completion: None)
        self.journal, self.config = journal, config
        self.catch_up_s = (config.settings if config is not None else Settings()).catch_up_s
        self.started = time.time()
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()

    async def run(self, send: ObjectSendStream[Completion], watcher: FileWatcher | None = None) -> None:
        self._send = send
        async with send, anyio.create_task_group() as tg:
            for runtime in self.tiles.values():
                tg.start_soon(self._follow, runtime)
            if watcher is not None:
                tg.start_soon(self._hooks, watcher)

    async def accept(self, completion: Completion) -> None:
        """Pass ``completion`` on unless its turn was already seen (through another signal)."""
        if not self.is_new(completion):
            log.debug("%s: turn %s already seen (signal %s)", completion.tile, completion.turn_id, completion.signal)
            return
        seen = self.journal.seen_completion(completion.tile, completion.turn_id) if self.journal else None
        if seen is not None and seen[1]:
            log.debug("%s: turn %s was handled before a restart", completion.tile, completion.turn_id)
            return
        age = self.started - completion.at
        if self.journal is None and age > CLOCK_SLACK_S:
            # reported from before this run, with no journal to tell whether a previous run handed it off
            log.debug("%s: turn %s finished before this run; no journal, not caught up", completion.tile,
                      completion.turn_id)
            return
        if self.journal is not None and age > self.catch_up_s:
            # finished while batonpass was down, too long ago to act on now: recorded, not handed off
            self.journal.record_completion(completion)
            why = f"finished {age:.0f}s before batonpass started (catch_up_s={self.catch_up_s:g})"
            self.journal.record_routing(completion, [
                (None, r.label, r.to, "skipped", why) for r in (self.config.routes_from(completion.tile) if self.config else [])])
            log.info("skipped     %s turn %s: %s", completion.tile, completion.turn_id, why)
            return
        hop = self.hops.take(completion.tile) if seen is None else seen[0]
        completion = replace(completion, hop=hop)
        if self.journal is not None:
            self.journal.record_completion(completion)
        self.tiles[completion.tile].invalidate()
        log.info("completion  %s turn %s %s (via %s, hop %d)", completion.tile, completion.turn_id,
                 completion.outcome, completion.signal, completion.hop)
        self.report(completion)
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
        delay = 1.0
        while True:
            try:
                await runtime.adapter.follow(self.accept)
                return
            except Exception as exc:  # one tile's failure is reported, the others go on
                log.error("%s: the %s adapter failed while watching (%s: %s); restarting in %.0fs",
                          runtime.name, runtime.adapter.name, type(exc).__name__, exc, delay, exc_info=log.isEnabledFor(logging.DEBUG))
                await anyio.sleep(delay)
                delay = min(delay * 2, 30.0)
