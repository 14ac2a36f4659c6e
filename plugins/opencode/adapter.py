"""OpenCode, read from its SQLite store: completion, the clean answer, busy state, start confirmation.

The chain for a pane (shown by ``baton resolve``): the pane's ``opencode`` process → its store (from the
process's own environment) → its session (:mod:`plugins.opencode.resolve`) → the session's turns
(:mod:`plugins.opencode.reader`). Completion is driven by the shared file watcher on the store and its
``-wal`` file; each hint is confirmed by a read-only query, and a turn is reported once, as
``turn_id`` = its final assistant message's id. The answer is that message's text parts.

The store is a fact about another program, so every failure degrades instead of crashing: no store yet →
wait for it; a locked store → retried, then the next hint; a schema this adapter does not know → said once,
and the pane is read from its screen like any terminal agent (busy while ``esc interrupt`` shows).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import anyio
from pydantic import BaseModel, ConfigDict, Field

from pipeline.plugin import PaneGone, RegisterAgent, ServerGone, TmuxError, TurnMark
from pipeline.plugin import turns as Turns
from pipeline.plugin.agents import Emit, ResolveStep, TargetState
from pipeline.plugin.events import Completion, Response
from pipeline.plugin.markers import hookimpl
from pipeline.plugin.tools import proc, strip_ansi
from plugins.opencode.reader import OpenCodeStore, StoreError, StoreMissing, TurnEnd, UnknownSchema
from plugins.opencode.resolve import (
    PEERS,
    Claim,
    Match,
    OpenCodeProcess,
    choose_session,
    read_process,
    same_prompt,
)
from plugins.terminal.adapter import TerminalAdapter

__all__ = ["OpenCodeAdapter", "input_draft"]

log = logging.getLogger("batonpass")



def input_draft(screen: str, placeholders: tuple[str, ...] = ("Ask anything",)) -> str:
    """The text in OpenCode's input box: the ``┃`` lines above its mode line (``┃  Build · …``), which sits
    on the box's bottom border (``╹▀▀▀``). Empty when the box is empty or shows its placeholder."""
    lines = strip_ansi(screen).rstrip("\n").split("\n")
    bottom = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].lstrip().startswith("╹▀")), None)
    if bottom is None or bottom < 1:
        return ""
    box = []
    for line in reversed(lines[: bottom - 1]):  # above the mode line
        stripped = line.strip()
        if not stripped.startswith("┃"):
            break
        box.append(stripped[1:].strip())
    text = "\n".join(reversed(box)).strip()
    return "" if any(text.startswith(p) for p in placeholders) else text


class OpenCodeExtractOptions(BaseModel):
    """``baton extract --agent opencode``'s options: a store holds many sessions."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    session: str | None = Field(default=None,
                                description="the session to read (default: the one updated last)")


class OpenCodeAdapter(TerminalAdapter):
    """One tile running OpenCode: the store when it can be read, the screen (``esc interrupt``) otherwise."""

    name = "opencode"
    summary = "OpenCode: completion and answers from its SQLite store; its screen as the fallback"
    ExtractOptions = OpenCodeExtractOptions
    process_names = frozenset({"opencode", "opencode.exe"})
    busy_markers = ("esc interrupt", "esc again to interrupt")
    placeholders = ("Ask anything",)
    #: the first prompt of a fresh OpenCode takes ~1 s to reach the store (it creates the session then)
    confirm_timeout_s = 8.0
    #: the backstop between watcher hints: a process that exits, or a screen that newly tells which session
    #: is this pane's, makes no file event. Completions themselves come from the watcher's hints.
    recheck_s: ClassVar[float] = 5.0
    #: unknown schemas already reported (each once per daemon)
    _reported: ClassVar[set[str]] = set()

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._stores: dict[Path, OpenCodeStore] = {}
        self._limiter: anyio.CapacityLimiter | None = None
        self._ends: OrderedDict[str, TurnEnd] = OrderedDict()
        self._session: str | None = None
        self._since_ms: int | None = None

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
        if not p.directories:
            return Match(None, "none", f"cannot read the working folder of OpenCode pid {p.pid}")
        sessions = await self._db(partial(store.sessions, p.directories, since_ms=p.since_ms))
        peers = self._peers(p)
        screen = ""
        if len(sessions) > 1 or peers:
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

    async def resolve(self) -> list[ResolveStep]:
        steps = await self.find_process_steps()
        if not steps[-1].ok:
            return steps
        p = await self._process()
        if p is None:
            return [*steps[:-1], ResolveStep("process", False, "the opencode process exited")]
        steps.append(
            ResolveStep(
                "cwd",
                p.cwd is not None,
                f"{p.cwd}, started {time.strftime('%H:%M:%S', time.localtime(p.started_ms / 1000))}",
                {"cwd": p.cwd, "started_ms": p.started_ms},
            )
        )
        store = self._store(p)
        if store is None:
            steps.append(
                ResolveStep(
                    "store",
                    False,
                    "OPENCODE_DB=:memory: in its environment: nothing on disk; answers come from the screen",
                )
            )
            return steps
        try:
            match = await self._match(p, store)
        except StoreError as exc:
            steps.append(ResolveStep("store", False, f"{exc}; answers come from the screen", str(store.path)))
            return steps
        steps.append(ResolveStep("store", True, f"{store.path} (read-only, in place)", str(store.path)))
        if match.session is None:
            steps.append(ResolveStep("session", False, match.detail))
            return steps
        s = match.session
        steps.append(ResolveStep("session", True, f"{s.id} {s.title!r} (rule {match.rule}: {match.detail})",
                                 {"session_id": s.id, "rule": match.rule, "directory": s.directory}))
        end = await self._db(store.last_turn, s.id)
        steps.append(
            ResolveStep(
                "answer",
                True,
                f"last finished turn {end.turn_id} ({end.outcome}): {len(end.text)} chars: {end.text[:60]!r}"
                if end
                else "no finished turn in the session yet",
                end.turn_id if end else None,
            )
        )
        return steps

    # ---- completion ------------------------------------------------------------------------------

    async def follow(self, emit: Emit) -> None:
        if self.ctx.watcher is None:  # outside the daemon: nothing shared to watch the store with
            await super().follow(emit)
            return
        if self._since_ms is None:  # what ended before is the engine's to catch up on (finished_turns)
            self._since_ms = int(time.time() * 1000)
        said = ""
        while True:
            try:
                p = await self._process()
            except (PaneGone, ServerGone):
                await anyio.sleep(1.0)
                continue
            store = self._store(p) if p is not None else None
            if p is None:
                why = "no OpenCode process in the pane; waiting for one"
            elif store is None:
                why = "OpenCode keeps its store in memory (OPENCODE_DB=:memory:); following its screen"
            else:
                why = ""
            if why and why != said:
                log.info("%s: %s", self.ctx.name, why)
            said = why
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
                await self.ctx.resolved()  # what ended before this look: the engine asks finished_turns
                while True:
                    live = proc.read_proc(p.pid)
                    if live is None or live.start_ticks != p.start_ticks:
                        log.info("%s: OpenCode pid %d exited", self.ctx.name, p.pid)
                        return
                    try:
                        await self._scan(emit, p, store)
                    except StoreMissing:
                        pass  # OpenCode creates it at start; the watcher says when
                    except UnknownSchema:
                        raise
                    except StoreError as exc:
                        log.info("%s: %s; trying again on the next change", self.ctx.name, exc)
                    await _wait_any(s1, s2, self.recheck_s)
        finally:
            PEERS.get(str(db), {}).pop(self.ctx.name, None)

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

    async def _scan(self, emit: Emit, p: OpenCodeProcess, store: OpenCodeStore) -> None:
        """Confirm a hint: the finished turns of this pane's session not yet reported."""
        match = await self._match(p, store)
        if match.session is None:
            return
        for end in await self._db(
            partial(store.finished_turns, match.session.id, since_ms=self._since_ms or 0)
        ):
            if end.turn_id in self._ends:
                continue
            self._remember(end)
            await emit(Completion(tile=self.ctx.name, turn_id=end.turn_id, outcome=end.outcome,
                                  signal="store", at=end.completed_ms / 1000, detail=end.detail))

    async def _follow_screen_while(self, emit: Emit, p: OpenCodeProcess) -> None:
        """The terminal adapter's follower, for as long as this process lives."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(super().follow, emit)
            while True:
                await anyio.sleep(self.recheck_s)
                live = proc.read_proc(p.pid)
                if live is None or live.start_ticks != p.start_ticks:
                    tg.cancel_scope.cancel()
                    return

    # ---- the answer ------------------------------------------------------------------------------

    async def response(self, completion: Completion) -> Response | None:
        if not completion.turn_id.startswith("msg_"):
            return await super().response(completion)  # a turn seen on the screen
        end = self._ends.get(completion.turn_id)
        if end is None:
            p = await self._process()
            store = self._store(p) if p is not None else None
            if store is None:
                return None
            try:
                end = await self._db(store.turn_end, completion.turn_id)
            except StoreError as exc:
                log.info("%s: no answer from the store: %s", self.ctx.name, exc)
                return None
            if end is None:
                return None
        return Response(completion=completion, text=end.text, source="store", cwd=end.cwd,
                        note="" if end.outcome == "completed" else f"turn ended: {end.detail}")

    async def last_response(self) -> Response | None:
        p = await self._process()
        store = self._store(p) if p is not None else None
        if p is None or store is None:
            return None
        try:
            match = await self._match(p, store)
            end = await self._db(store.last_turn, match.session.id) if match.session else None
        except StoreError:
            return None
        if end is None:
            return None
        completion = Completion(tile=self.ctx.name, turn_id=end.turn_id, outcome=end.outcome, signal="store",
                                detail=end.detail)
        return Response(completion=completion, text=end.text, source="store", cwd=end.cwd)

    @classmethod
    def extract_file(cls, path: Path, **options: Any) -> Response | None:
        """``baton extract --agent opencode DB [--session ID]``: the newest finished turn of the session
        (default: the session updated most recently)."""
        session = OpenCodeExtractOptions.model_validate(options).session
        store = OpenCodeStore(Path(path))
        try:
            if session is None:
                newest = store.sessions(limit=1, prompts=0)
                if not newest:
                    return None
                session = newest[0].id
            elif store.session(session) is None:
                raise LookupError(f"{path} holds no session {session}")
            end = store.last_turn(session)
        finally:
            store.close()
        if end is None:
            return None
        completion = Completion(tile=Path(path).name, turn_id=end.turn_id, outcome=end.outcome,
                                signal="store", detail=end.detail)
        return Response(completion=completion, text=end.text, source="store", cwd=end.cwd,
                        note=f"session {session}")

    # ---- as a target -----------------------------------------------------------------------------

    async def target_state(self) -> TargetState:
        try:
            info = await self.ctx.pane()
            if info.dead:
                return "gone"
            found = proc.find_agent(info.pid, self.process_names)
            if found is None:
                return "absent"
            screen = await self.ctx.tmux.capture(info.pane_id)
        except (PaneGone, ServerGone):
            return "gone"
        if self.is_busy(screen) or self._in_turn or await self._store_busy(read_process(found)):
            return "busy"
        return "draft" if self.draft(screen) else "ready"

    async def _store_busy(self, p: OpenCodeProcess) -> bool:
        """Whether the newest turn of this pane's session is still open (a permission prompt, too)."""
        store = self._store(p)
        if store is None:
            return False
        try:
            match = await self._match(p, store)
            if match.session is None:
                return False
            open_turn, _ = await self._db(store.state, match.session.id)
        except StoreError:
            return False
        return bool(open_turn)

    def draft(self, screen: str) -> str:
        return input_draft(screen, self.placeholders)

    async def snapshot(self) -> TurnMark:
        """The newest user message of every session this pane's OpenCode could be writing to, and the
        screen."""
        screen = await self.ctx.capture()
        p = await self._process()
        store = self._store(p) if p is not None else None
        users: dict[str, str | None] | None = None
        if p is not None and store is not None:
            try:
                users = {s.id: s.newest_user
                         for s in await self._db(partial(store.sessions, p.directories, since_ms=p.since_ms))}
            except StoreError:
                users = None
        return TurnMark(keys=users, screen=screen)

    async def turn_started(self, before: TurnMark) -> bool:
        """A new user message holding the typed prompt, in the store; else the screen shows the turn."""
        if before.keys is not None:
            p = await self._process()
            store = self._store(p) if p is not None else None
            if p is not None and store is not None:
                try:
                    sessions = await self._db(partial(store.sessions, p.directories, since_ms=p.since_ms))
                except StoreError:
                    sessions = None
                if sessions is not None:
                    typed = self.last_prompt
                    return any(
                        s.newest_user is not None
                        and s.newest_user != before.keys.get(s.id)
                        and (typed is None or not s.recent_prompts or same_prompt(s.recent_prompts[0], typed))
                        for s in sessions
                    )
        try:
            screen = await self.ctx.capture()
        except TmuxError:
            return False
        return self.is_busy(screen) or screen != before.screen


async def _wait_any(a: Any, b: Any, timeout: float) -> None:
    """Wait for a hint on either subscription, or ``timeout``."""
    async with anyio.create_task_group() as tg:

        async def one(sub: Any) -> None:
            await sub.wait(timeout)
            tg.cancel_scope.cancel()

        tg.start_soon(one, a)
        tg.start_soon(one, b)


@hookimpl
def register_agents(register: RegisterAgent) -> None:
    register(OpenCodeAdapter)
