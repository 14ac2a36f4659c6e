"""Cline CLI (``cline`` 3.x, a compiled binary): completions and clean answers from its session files,
confirmed by its ``TaskComplete`` hook; waiting, drafts and pastes from its screen (docs/agents.md, Cline).

The pane's session is found by :mod:`plugins.cline.resolve` (its record names the process's pid; the hub
daemon the TUI starts is never taken for the agent) and read by :mod:`plugins.cline.session`; following
it is :mod:`plugins.cline.follow`'s. A turn's id is the session id and its prompt's message id, the same
from the files and from the hook.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import anyio

from pipeline.plugin import HookRecord, PaneGone, PaneInfo, RegisterAgent, ServerGone, TmuxError
from pipeline.plugin.agents import InputHolds, ResolveStep, TargetState
from pipeline.plugin.events import Completion, Response
from pipeline.plugin.markers import hookimpl
from pipeline.plugin.pastes import box_holds
from pipeline.plugin.tools import proc, sanitize, strip_ansi
from pipeline.plugin.turns import TurnMark
from pipeline.plugin.usage import SessionUsage
from plugins.cline.follow import ClineFollowing
from plugins.cline.hooks import cline_config_dir, hook_kind, hook_session, install_hooks
from plugins.cline.resolve import find_cline, is_cline, resolve_session
from plugins.cline.screen import (
    BUSY,
    PLACEHOLDERS,
    approval_answer,
    approval_question,
    input_draft,
    is_busy,
    paste_placeholder,
    sent_prompts,
    waiting_for,
)
from plugins.cline.session import SessionFile, Turn
from plugins.cline.usage import session_usage

__all__ = ["ClineAdapter"]

#: a top-level key of a JSON object written with an indent of 2
_TOP_KEY = re.compile(r'^  "([A-Za-z_]+)": ', re.M)
#: how long a hook waits for the session's messages to show the turn's end
ANSWER_WAIT_S = 1.0


def _norm(text: str) -> str:
    return " ".join(sanitize(text).split())


class ClineAdapter(ClineFollowing):
    name = "cline"
    summary = "Cline CLI: turns and answers from its session files, confirmed by its TaskComplete hook"
    process_names = frozenset({"cline"})
    file_kind = "a Cline session file"
    busy_markers = BUSY
    placeholders = PLACEHOLDERS
    confirm_timeout_s = 8.0
    #: an Enter read in the same burst as its paste is dropped (measured on 3.0.65; 20 ms later it
    #: submits): pressed again when the input still holds the paste and no turn started
    enter_again_s = 1.0
    quiet_s = 1.5

    @classmethod
    def claims_process(cls, p: proc.Proc) -> bool:
        return is_cline(p)

    # ---- the screen --------------------------------------------------------------------------------------

    def is_busy(self, screen: str) -> bool:
        return is_busy(screen)

    def waiting_for(self, screen: str) -> str | None:
        return waiting_for(screen)

    def asks(self, screen: str) -> str | None:
        return approval_question(screen)

    def answer_keys(self, screen: str, approve: bool) -> list[str] | None:
        return approval_answer(screen, approve)

    def draft(self, screen: str) -> str:
        return input_draft(screen) or ""

    def shows_paste(self, draft: str, text: str) -> bool:
        return paste_placeholder(draft, text) or super().shows_paste(draft, text)

    async def input_holds(self, text: str) -> InputHolds | None:
        try:
            return box_holds(input_draft(await self.ctx.capture()), text, self.shows_paste)
        except TmuxError:
            return None

    # ---- answers -----------------------------------------------------------------------------------------

    def _turn(self, turn_id: str) -> Turn | None:
        return next((t for t in self.turns() if t.turn_id == turn_id), None)

    async def response(self, completion: Completion) -> Response | None:
        if not completion.turn_id.startswith("cline:"):
            return await super().response(completion)  # a turn seen on the screen
        try:
            await self.refresh()
        except (PaneGone, ServerGone):
            pass
        turn = self._turn(completion.turn_id)
        if turn is None or turn.outcome is None:
            return None
        note = "" if turn.outcome == "completed" else f"turn ended: {turn.detail}"
        return Response(completion=completion, text=turn.answer or "", source="transcript",
                        cwd=self.file.state.cwd if self.file else None,
                        note=note or (f"in {self.file.messages_path}" if self.file else ""))

    async def last_response(self) -> Response | None:
        try:
            await self.refresh()
        except (PaneGone, ServerGone):
            return None
        done = [t for t in self.turns() if t.outcome is not None and t.answer is not None]
        if not done:
            return None
        return Response(completion=self.completion(done[-1], "session file"), text=done[-1].answer or "",
                        source="transcript")

    @classmethod
    def recognizes_file(cls, path: Path) -> bool:
        """A session record or its messages: one JSON object written indented by 2, whose top-level keys
        include ``session_id`` and ``messages_path`` (the record) or ``sessionId``, ``agent`` and
        ``messages`` (the messages), read from the file's first 64 KiB."""
        try:
            with open(path, "rb") as f:
                head = f.read(65536).decode("utf-8", "replace")
        except OSError:
            return False
        if not head.startswith("{\n  \""):
            return False
        keys = set(_TOP_KEY.findall(head))
        return {"session_id", "messages_path"} <= keys or {"sessionId", "agent", "messages"} <= keys

    @classmethod
    def extract_file(cls, path: Path, **options: Any) -> Response | None:
        """``baton extract --agent cline <id>.json`` (or ``<id>.messages.json``): the last finished turn's
        answer."""
        with open(path, "rb"):
            pass  # a missing or unreadable file is the caller's error, not "no turn"
        record = Path(path)
        if record.name.endswith(".messages.json"):
            record = record.with_name(record.name.removesuffix(".messages.json") + ".json")
        session = SessionFile(record)
        if not session.read():
            raise LookupError(f"{path}: no Cline session record at {record}")
        done = [t for t in session.state.turns() if t.outcome is not None]
        if not done:
            what = "the last turn is still open" if session.state.turns() else "no prompt was written to it"
            raise LookupError(f"{path} holds no finished turn: {what}")
        turn = done[-1]
        completion = Completion(tile=record.name, turn_id=turn.turn_id, outcome=turn.outcome or "completed",
                                signal="file", at=turn.ended_at or 0.0, detail=turn.detail)
        if turn.outcome != "completed":
            raise LookupError(f"{path}: the last turn failed ({turn.detail}); it left no answer")
        return Response(completion=completion, text=turn.answer or "", source="transcript",
                        cwd=session.state.cwd)

    # ---- hooks -------------------------------------------------------------------------------------------

    @classmethod
    def install_hooks(cls, hook_command: list[str]) -> str:
        return install_hooks(cline_config_dir() / "hooks", hook_command)

    async def _mine(self, record: HookRecord, session: str | None) -> bool:
        """Whether a hook record is this tile's: by its session (a session the hub daemon runs fires its
        hooks from the hub, with the ``$TMUX_PANE`` of the pane that started the hub), else by its pane."""
        try:
            await self.refresh(force=self.file is None)
        except TmuxError:
            return False
        if self.file is not None and session is not None:
            return session == self.file.state.session_id
        try:
            return record.pane is not None and record.pane == (await self.ctx.pane()).pane_id
        except TmuxError:
            return False

    async def hook_completion(self, record: HookRecord) -> Completion | None:
        """``TaskComplete`` / ``TaskError``: the turn ended; the turn and its answer are the files'."""
        kind, session = hook_kind(record.payload), hook_session(record.payload)
        if kind is None or not await self._mine(record, session):
            return None
        turn = await self._hook_turn(session)
        if turn is None:
            return None
        return Completion(tile=self.ctx.name, turn_id=turn.turn_id, outcome=turn.outcome or "completed",
                          signal="hook", at=record.written_at, detail=turn.detail or f"{kind} hook")

    async def _hook_turn(self, session: str | None) -> Turn | None:
        """The newest turn of ``session``, once the files show its end (waited for up to
        :data:`ANSWER_WAIT_S`)."""
        deadline = time.monotonic() + ANSWER_WAIT_S
        while True:
            try:
                await self.refresh(force=self.file is None or self.file.state.session_id != session)
            except TmuxError:
                return None
            turns = self.turns() if self.file is not None and self.file.state.session_id == session else []
            if turns and turns[-1].outcome is not None:
                return turns[-1]
            if time.monotonic() >= deadline:
                return None
            await anyio.sleep(0.05)

    # ---- as a target -------------------------------------------------------------------------------------

    async def target_state(self) -> TargetState:
        try:
            info = await self.ctx.pane()
            if info.dead:
                return "gone"
            if await self.refresh() is None:
                return "absent"
            screen = strip_ansi(await self.ctx.capture())
        except (PaneGone, ServerGone):
            return "gone"
        if self.waiting_for(screen) is not None or self.is_busy(screen):
            return "busy"  # never type into a dialog: it would answer it
        if self.file is not None and self.file.state.busy:
            return "busy"
        draft = input_draft(screen)
        if draft is None:
            return "busy"  # no input box: starting, or a dialog of its own
        return "draft" if draft else "ready"

    async def presence_state(self, info: PaneInfo) -> TargetState:
        """Asked every second: whether the pane runs Cline (not only its hub daemon), from /proc alone."""
        found = await anyio.to_thread.run_sync(find_cline, info.pid)
        return "ready" if found is not None else "absent"

    async def received(self, text: str) -> bool | None:
        """After a crash mid-delivery: the session's messages, else (they are written at the turn's first
        step) the transcript on the screen — the prompt, or its placeholder, above the input box."""
        try:
            await self.refresh(force=True)
        except TmuxError:
            return None
        want = _norm(text)
        if any(_norm(t.prompt) == want for t in self.turns()[-20:]):
            return True
        try:
            shown = sent_prompts(await self.ctx.capture(start=-200))
        except TmuxError:
            return None
        clean = sanitize(text)
        return any(self.shows_paste(line, clean) for line in shown[-5:])

    async def snapshot(self) -> TurnMark:
        try:
            await self.refresh(force=True)
        except TmuxError:
            pass
        return TurnMark(source=str(self.file.path) if self.file else None, count=len(self.turns()),
                        screen=await self.ctx.capture())

    async def turn_started(self, before: TurnMark) -> bool:
        """The session says it runs (or a new session appeared), a prompt was added, or the busy line."""
        try:
            await self.refresh(force=self.file is None or str(self.file.path) != before.source)
        except TmuxError:
            return False
        if self.file is not None:
            moved = str(self.file.path) != before.source or len(self.turns()) > before.count
            if moved or self.file.state.busy:
                return True
        try:
            return self.is_busy(await self.ctx.capture())
        except TmuxError:
            return False

    async def usage(self) -> SessionUsage | None:
        if self.file is None:
            try:
                await self.refresh()
            except TmuxError:
                return None
        return session_usage(self.file.state.messages) if self.file is not None else None

    async def working_since(self) -> float | None:
        """The running turn's start: its prompt's time (the messages are written at its first step)."""
        try:
            await self.refresh()
        except TmuxError:
            return None
        turns = self.turns()
        return turns[-1].started_at if turns and turns[-1].outcome is None else None

    async def resolve(self) -> list[ResolveStep]:
        info = await self.ctx.pane()
        steps = [self.pane_step(info)]
        waiting = await self.waiting_step()
        if waiting is not None:
            steps.append(waiting)
        res = await anyio.to_thread.run_sync(lambda: resolve_session(info.pid))
        steps += res.steps
        if res.session is not None:
            if self.file is None or self.file.path != res.session:
                self.file = SessionFile(res.session)
            await anyio.to_thread.run_sync(self.file.read)
            state = self.file.state
            turns = state.turns()
            last = next((t for t in reversed(turns) if t.outcome is not None), None)
            ended = f"idle; last turn {last.turn_id} {last.outcome} {last.detail}".rstrip() if last \
                else "idle, no finished turn"
            busy = state.busy
            steps.append(ResolveStep("turn", True, f"busy ({state.status})" if busy else ended,
                                     {"session": state.session_id, "busy": busy, "status": state.status}))
        return steps


@hookimpl
def register_agents(register: RegisterAgent) -> None:
    register(ClineAdapter)
