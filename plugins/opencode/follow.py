"""Following one OpenCode tile: the chain from its pane to its session in the store, and the session's
finished turns as the store records them.

The chain (shown by ``baton resolve``): the pane's ``opencode`` process → its store (from the process's
own environment) → its session (:mod:`plugins.opencode.resolve`). Completion is driven by the shared file
watcher on the store and its ``-wal`` file; each hint is confirmed by a read-only query
(:mod:`plugins.opencode.reader`), and a turn is reported once. With no store to read
(``OPENCODE_DB=:memory:``, a schema this adapter does not know) the screen is followed, as for any terminal
agent.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import anyio

from pipeline.plugin import PaneGone, ServerGone, TmuxError
from pipeline.plugin import turns as Turns
from pipeline.plugin.agents import Emit
from pipeline.plugin.events import Completion
from pipeline.plugin.screen import ScreenAdapter
from pipeline.plugin.tools import proc, strip_ansi
from plugins.opencode.reader import OpenCodeStore, StoreError, StoreMissing, UnknownSchema
from plugins.opencode.resolve import (
    PEERS,
    Claim,
    Match,
    OpenCodeProcess,
    choose_session,
    read_process,
)
from plugins.opencode.turns import TurnEnd

__all__ = ["StoreFollowing"]

log = logging.getLogger("batonpass")


class StoreFollowing(ScreenAdapter):
    """The part of the OpenCode adapter that finds the pane's session and follows its turns in the store."""

    #: the backstop between watcher hints while they may not tell everything: a screen that newly tells
    #: which of several sessions is this pane's makes no file event, nor does a store read that failed.
    #: Completions themselves come from the watcher's hints; the process's exit from a pidfd.
    recheck_s: ClassVar[float] = 5.0
    #: while a turn is open, how often the screen is read for a permission prompt (it is not in the store)
    look_s: ClassVar[float] = 0.5
    #: unknown schemas already reported (each once per daemon)
    _reported: ClassVar[set[str]] = set()

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._stores: dict[Path, OpenCodeStore] = {}
        self._limiter: anyio.CapacityLimiter | None = None
        self._ends: OrderedDict[str, TurnEnd] = OrderedDict()
        self._session: str | None = None
        self._since_ms: int | None = None
        #: whether the last match needed the screen (several candidate sessions, or peers in the folder)
        self._screen_decides = True

    # ---- the chain -------------------------------------------------------------------------------

    async def _db(self, call: Any, *args: Any) -> Any:
        """A blocking store call, in a worker thread (one at a time per tile)."""
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(1)
        return await anyio.to_thread.run_sync(call, *args, limiter=self._limiter)

    def _store(self, p: OpenCodeProcess) -> OpenCodeStore | None:
        if p.store is None:
            return None
        if p.store not in self._stores:
            self._stores[p.store] = OpenCodeStore(p.store)
        return self._stores[p.store]

    async def _process(self) -> OpenCodeProcess | None:
        found = await self.agent_process()
        return read_process(found) if found is not None else None

    def _peers(self, p: OpenCodeProcess) -> list[Claim]:
        claims = PEERS.get(str(p.store), {})
        return [c for tile, c in claims.items() if tile != self.ctx.name and c.cwd == p.cwd]

    async def _match(self, p: OpenCodeProcess, store: OpenCodeStore) -> Match:
        """This pane's session, by the rules of :mod:`plugins.opencode.resolve`."""
        self._screen_decides = True
        if not p.directories:
            return Match(None, "none", f"cannot read the working folder of OpenCode pid {p.pid}")
        sessions = await self._db(partial(store.sessions, p.directories, since_ms=p.since_ms))
        peers = self._peers(p)
        self._screen_decides = len(sessions) > 1 or bool(peers)
        screen = ""
        if self._screen_decides:
            try:
                screen = strip_ansi(await self.ctx.capture())
            except TmuxError:
                pass
        match = choose_session(sessions, me=p, peers=peers, last_prompt=self.last_prompt, screen=screen,
                               previous=self._session)
        if match.session is not None and match.session.id != self._session:
            log.info("%s: OpenCode session %s (rule %s: %s)", self.ctx.name, match.session.id, match.rule,
                     match.detail)
        self._session = match.session.id if match.session else self._session
        claim = PEERS.get(str(p.store), {}).get(self.ctx.name)
        if claim is not None:
            claim.session_id, claim.rule = (match.session.id, match.rule) if match.session else (None, "")
        return match

    def _report_once(self, exc: StoreError) -> None:
        if str(exc) not in self._reported:
            self._reported.add(str(exc))
            log.warning("%s: %s; reading OpenCode from its screen instead", self.ctx.name, exc)

    # ---- completion ------------------------------------------------------------------------------

    async def follow(self, emit: Emit) -> None:
        if self.ctx.watcher is None:  # outside the daemon: nothing shared to watch the store with
            await super().follow(emit)
            return
        if self._since_ms is None:  # what ended before is the engine's to catch up on (finished_turns)
            self._since_ms = int(time.time() * 1000)
        while True:
            p = await self._look_once_pane_is_there(self._process)
            store = self._store(p) if p is not None else None
            if p is None:
                why = "no OpenCode process in the pane; waiting for one"
            elif store is None:
                why = "OpenCode keeps its store in memory (OPENCODE_DB=:memory:); following its screen"
            else:
                why = ""
            self._say(why)
            if p is None:
                await anyio.sleep(1.0)
                continue
            if store is None:
                await self._follow_screen_while(emit, p)
                continue
            try:
                await self._follow_store(emit, p, store)
            except UnknownSchema as exc:
                self._report_once(exc)
                await self._follow_screen_while(emit, p)

    async def _follow_store(self, emit: Emit, p: OpenCodeProcess, store: OpenCodeStore) -> None:
        """Follow one process's store; return when the process is gone."""
        assert self.ctx.watcher is not None
        db = store.path
        PEERS.setdefault(str(db), {})[self.ctx.name] = Claim(started_ms=p.started_ms, cwd=p.cwd or "")
        log.info("%s: following OpenCode pid %d through %s", self.ctx.name, p.pid, db)
        try:
            with self.ctx.watcher.subscribe(db) as s1, self.ctx.watcher.subscribe(f"{db}-wal") as s2:
                async with proc.woken_on_exit(p.pid, p.start_ticks, s1.wake, poll_s=self.recheck_s):
                    await self.ctx.resolved()  # what ended before this look: the engine asks finished_turns
                    await self._scan_on_hints(emit, p, store, s1, s2)
        finally:
            PEERS.get(str(db), {}).pop(self.ctx.name, None)
            self.ctx.waiting(None)

    async def _scan_on_hints(self, emit: Emit, p: OpenCodeProcess, store: OpenCodeStore,
                             s1: Any, s2: Any) -> None:
        """Scan the store at each hint of its files (``s1``, ``s2``) until the process is gone."""
        while True:
            if not proc.still_runs(p.pid, p.start_ticks):
                log.info("%s: OpenCode pid %d exited", self.ctx.name, p.pid)
                return
            open_turn, read = False, False
            try:
                open_turn, read = await self._scan(emit, p, store), True
            except StoreMissing:
                pass  # OpenCode creates it at start; the watcher says when
            except UnknownSchema:
                raise
            except StoreError as exc:
                log.info("%s: %s; trying again on the next change", self.ctx.name, exc)
            # a permission prompt writes nothing: while a turn is open (or the store cannot say whether one
            # is), the screen is looked at often
            asks = open_turn or not read or self.waiting_now
            waiting = await self.look_for_person() if asks else None
            if open_turn or waiting:
                timeout: float | None = self.look_s
            else:  # idle: woken by the store's writes and the exit alone, unless they may not tell
                timeout = self.recheck_s if self._screen_decides or not read else None
            await _wait_any(s1, s2, timeout)

    async def finished_turns(self, since: float) -> list[Turns.TurnEnd] | None:
        """The turns of the pane's session that ended at or after ``since``, from the store."""
        try:
            p = await self._process()
        except (PaneGone, ServerGone):
            return []
        store = self._store(p) if p is not None else None
        if p is None or store is None:
            return []
        try:
            match = await self._match(p, store)
            if match.session is None:
                return []
            ends = await self._db(partial(store.finished_turns, match.session.id, since_ms=int(since * 1000)))
        except UnknownSchema:
            return None  # follow() reports it once, and reads the screen
        except StoreError as exc:
            log.info("%s: no catch-up from the store: %s", self.ctx.name, exc)
            return []
        for end in ends:
            self._remember(end)
        return [
            Turns.TurnEnd(
                turn_id=e.turn_id,
                outcome=e.outcome,
                text=e.text,
                ended_at=e.completed_ms / 1000,
                session_id=e.session_id,
                cwd=e.cwd,
                detail=e.detail,
            )
            for e in ends
        ]

    def _remember(self, end: TurnEnd) -> None:
        self._ends[end.turn_id] = end
        while len(self._ends) > 256:
            self._ends.popitem(last=False)

    async def _scan(self, emit: Emit, p: OpenCodeProcess, store: OpenCodeStore) -> bool:
        """Confirm a hint: the finished turns of this pane's session not yet reported. Returns whether the
        session's newest turn is still open."""
        match = await self._match(p, store)
        if match.session is None:
            return False
        # one snapshot for both: the hint that woke this scan is spent, so a turn ending between two reads
        # (not finished in the first, not open in the second) would wait for the store's next write
        look = await self._db(partial(store.look, match.session.id, since_ms=self._since_ms or 0))
        for end in look.ends:
            if end.turn_id in self._ends:
                continue
            self._remember(end)
            await emit(Completion(tile=self.ctx.name, turn_id=end.turn_id, outcome=end.outcome,
                                  signal="store", at=end.completed_ms / 1000, detail=end.detail))
        return look.open_turn

    async def _follow_screen_while(self, emit: Emit, p: OpenCodeProcess) -> None:
        """The terminal adapter's follower, for as long as this process lives."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(super().follow, emit)
            while True:
                await anyio.sleep(self.recheck_s)
                if not proc.still_runs(p.pid, p.start_ticks):
                    tg.cancel_scope.cancel()
                    return


async def _wait_any(a: Any, b: Any, timeout: float | None) -> None:
    """Wait for a hint on either subscription, or ``timeout``."""
    async with anyio.create_task_group() as tg:

        async def one(sub: Any) -> None:
            await sub.wait(timeout)
            tg.cancel_scope.cancel()

        tg.start_soon(one, a)
        tg.start_soon(one, b)
