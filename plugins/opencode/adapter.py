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
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pipeline.plugin import PaneGone, RegisterAgent, ServerGone, TmuxError, TurnMark
from pipeline.plugin.agents import ResolveStep, TargetState
from pipeline.plugin.events import Completion, Response
from pipeline.plugin.markers import hookimpl
from pipeline.plugin.tools import proc, sanitize
from pipeline.plugin.usage import SessionUsage
from plugins.opencode.follow import StoreFollowing
from plugins.opencode.reader import OpenCodeStore, StoreError, is_store
from plugins.opencode.resolve import (
    OpenCodeProcess,
    read_process,
    same_prompt,
)
from plugins.opencode.screen import (
    input_box,
    input_draft,
    paste_placeholder,
    permission_answer,
    permission_prompt,
    permission_question,
)

__all__ = ["OpenCodeAdapter", "OpenCodeExtractOptions", "input_draft"]

log = logging.getLogger("batonpass")


class OpenCodeExtractOptions(BaseModel):
    """``baton extract --agent opencode``'s options: a store holds many sessions."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    session: str | None = Field(default=None,
                                description="the session to read (default: the one updated last)")


class OpenCodeAdapter(StoreFollowing):
    """One tile running OpenCode: the store when it can be read, the screen (``esc interrupt``) otherwise."""

    name = "opencode"
    summary = "OpenCode: completion and answers from its SQLite store; its screen as the fallback"
    file_kind = "an OpenCode store"
    ExtractOptions = OpenCodeExtractOptions
    process_names = frozenset({"opencode", "opencode.exe"})
    busy_markers = ("esc interrupt", "esc again to interrupt")
    placeholders = ("Ask anything",)
    #: the first prompt of a fresh OpenCode takes ~1 s to reach the store (it creates the session then)
    confirm_timeout_s = 8.0
    #: a prompt it took is in its store, or (no session yet) drawn in its session view: a paste it never
    #: took is typed again
    retype_lost_paste = True

    async def resolve(self) -> list[ResolveStep]:
        steps = await self.find_process_steps()
        if not steps[-1].ok:
            return steps
        p = await self._process()
        if p is None:
            return [*steps[:-1], ResolveStep("process", False, "the opencode process exited")]
        # a permission prompt is only on the screen (docs/agents.md, OpenCode)
        waiting = await self.waiting_step()
        if waiting is not None:
            steps.append(waiting)
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
        end = await self._session_read(OpenCodeStore.last_turn)
        if end is None:
            return None
        completion = Completion(tile=self.ctx.name, turn_id=end.turn_id, outcome=end.outcome, signal="store",
                                detail=end.detail)
        return Response(completion=completion, text=end.text, source="store", cwd=end.cwd)

    @classmethod
    def recognizes_file(cls, path: Path) -> bool:
        """An SQLite file with OpenCode's tables (``session``, ``message``, ``part``)."""
        return is_store(path)

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
            screen = await self.ctx.capture()
        except (PaneGone, ServerGone):
            return "gone"
        state = self.screen_state(screen)
        if state != "busy" and (self._in_turn or await self._store_busy(read_process(found))):
            return "busy"
        return state

    def screen_state(self, screen: str) -> TargetState:
        """What the screen alone says: ``busy`` under the permission dialog (typing would answer it), while
        a turn shows, and while no input box shows — OpenCode starting: it drops what is typed until
        shortly before it draws the box (docs/agents.md, OpenCode); else ``draft`` or ``ready``."""
        if self.waiting_for(screen) is not None or self.is_busy(screen):
            return "busy"
        draft = input_box(screen, self.placeholders)
        if draft is None:
            return "busy"
        return "draft" if draft else "ready"

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

    async def _session_read(self, call: Any) -> Any:
        """``call(store, session_id)`` on a worker thread for this pane's session; None when there is no
        store or session to read, or the store cannot be read now."""
        p = await self._process()
        store = self._store(p) if p is not None else None
        if p is None or store is None:
            return None
        try:
            match = await self._match(p, store)
            return await self._db(partial(call, store), match.session.id) if match.session else None
        except StoreError:
            return None

    async def usage(self) -> SessionUsage | None:
        """The tokens and cost OpenCode recorded for this pane's session (and its sub-agents')."""
        return await self._session_read(OpenCodeStore.usage)

    async def working_since(self) -> float | None:
        """The running turn's start: its user message's creation time in the store."""
        return await self._session_read(OpenCodeStore.running_turn_start)

    def draft(self, screen: str) -> str:
        return input_draft(screen, self.placeholders)

    async def received(self, text: str) -> bool | None:
        """After a crash mid-delivery: one of the session's newest user messages in the store is ``text``
        (the screen shows a long one as its placeholder); the screen only when no store or session says."""
        prompts = await self._session_read(OpenCodeStore.recent_prompts)
        if prompts is None:
            return await super().received(text)
        want = sanitize(text).strip()
        return any(p.strip() == want for p in prompts)

    def shows_paste(self, draft: str, text: str) -> bool:
        return paste_placeholder(draft, text) or super().shows_paste(draft, text)

    def waiting_for(self, screen: str) -> str | None:
        return permission_prompt(screen)

    def asks(self, screen: str) -> str | None:
        return permission_question(screen)

    def answer_keys(self, screen: str, approve: bool) -> list[str] | None:
        return permission_answer(screen, approve)

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


@hookimpl
def register_agents(register: RegisterAgent) -> None:
    register(OpenCodeAdapter)
