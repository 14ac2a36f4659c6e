"""Qwen Code: completions and clean answers from its session files, confirmed by its Stop hook; waiting,
drafts, follow-up suggestions and pastes from its screen.

The pane's session is named by Qwen Code's own pid file (:mod:`plugins.qwen.resolve`), its file read by
:mod:`plugins.qwen.session` and followed by :mod:`plugins.qwen.follow`. A turn's id is the session id and its
prompt's record uuid, the same from the file and from a hook (its ``prompt_id`` names the turn).

As a target, the input box is read with its escapes: a follow-up suggestion drawn there (which an Enter
would take into the input) is no draft — the input is empty — and never our paste (docs/agents.md, Qwen
Code).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import anyio

from pipeline.plugin import HookRecord, PaneGone, RegisterAgent, ServerGone, TmuxError
from pipeline.plugin.agents import ResolveStep, TargetState
from pipeline.plugin.events import Completion, Response
from pipeline.plugin.markers import hookimpl
from pipeline.plugin.tools import json_head, proc, sanitize
from pipeline.plugin.turns import TurnMark
from pipeline.plugin.usage import SessionUsage
from plugins.qwen.follow import QwenFollowing
from plugins.qwen.hooks import install_hooks, qwen_dir
from plugins.qwen.resolve import is_qwen, resolve_session
from plugins.qwen.screen import (
    BUSY,
    PLACEHOLDER,
    approval_answer,
    input_draft,
    paste_placeholder,
    waiting_for,
)
from plugins.qwen.session import SessionFile, Turn

__all__ = ["QwenAdapter"]

#: how long a Stop hook waits for the session file to show the turn's end
ANSWER_WAIT_S = 1.0
#: an open turn that wrote nothing for this long, with no busy line on screen, is not trusted to run
STALE_BUSY_S = 60.0


def _norm(text: str) -> str:
    return " ".join(sanitize(text).split())


class QwenAdapter(QwenFollowing):
    name = "qwen"
    summary = "Qwen Code: turns and answers from its session files, confirmed by its Stop hook"
    #: Qwen Code runs as ``node`` (:meth:`claims_process` looks at its argv)
    process_names = frozenset({"qwen"})
    file_kind = "a Qwen Code session file"
    busy_markers = BUSY
    input_line = re.compile(r"^>\s(.*)$")
    placeholders = (PLACEHOLDER,)
    confirm_timeout_s = 8.0
    #: Qwen Code takes an Enter read in the same chunk as a large paste before the paste is stored: it
    #: submits the placeholder ``[Pasted Content N chars]`` itself; an Enter 7 ms later was safe, but a busy
    #: event loop reads both at once (docs/agent-versions.md, Qwen Code: measured): the default 0.2 s
    submit_delay_s = 0.2
    quiet_s = 1.5
    #: the input box with escapes: a follow-up suggestion differs from a draft only in its colour
    readiness_screen = (True, None, None)

    @classmethod
    def claims_process(cls, p: proc.Proc) -> bool:
        return is_qwen(p)

    # ---- answers -----------------------------------------------------------------------------------------

    def _turn(self, turn_id: str) -> Turn | None:
        return next((t for t in self.turns() if t.turn_id == turn_id), None)

    async def response(self, completion: Completion) -> Response | None:
        if not completion.turn_id.startswith("qwen:"):
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
                        cwd=self._process.cwd if self._process else None,
                        note=note or (f"in {self.file.path}" if self.file else ""))

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
        """A session file's records name their session and their ``provenance`` (``real_user``, …)."""
        return any(isinstance(r.get("sessionId"), str) and "provenance" in r for r in json_head(path))

    @classmethod
    def extract_file(cls, path: Path, **options: Any) -> Response | None:
        """``baton extract --agent qwen SESSION.jsonl``: the last finished turn's answer."""
        with open(path, "rb"):
            pass  # a missing or unreadable file is the caller's error, not "no turn"
        session = SessionFile(path)
        session.read(final=True)
        done = [t for t in session.state.turns if t.outcome is not None]
        if not done:
            why = "no prompt was written to it" if not session.state.turns else "the last turn is still open"
            raise LookupError(f"{path} holds no finished turn: {why}")
        turn = done[-1]
        if turn.answer is None:
            raise LookupError(f"{path}: the last turn ({turn.turn_id}) ended {turn.detail}; "
                              "it left no answer")
        completion = Completion(tile=Path(path).name, turn_id=turn.turn_id, signal="file", detail=turn.detail,
                                outcome=turn.outcome or "completed", at=turn.ended_at or 0.0)
        return Response(completion=completion, text=turn.answer, source="transcript")

    # ---- hooks -------------------------------------------------------------------------------------------

    @classmethod
    def install_hooks(cls, hook_command: list[str]) -> str:
        return install_hooks(qwen_dir() / "settings.json", hook_command)

    async def _mine(self, record: HookRecord) -> bool:
        """Whether a hook record is this tile's: its pane, else its session."""
        try:
            pane_id = (await self.ctx.pane()).pane_id
            if record.pane:
                return record.pane == pane_id
            await self.refresh()
        except TmuxError:
            return False
        return self.session_id is not None and record.payload.get("session_id") == self.session_id

    async def hook_completion(self, record: HookRecord) -> Completion | None:
        """Stop: the turn ended (its answer is read from the file); StopFailure: it failed; Notification
        ``permission_prompt``: a tool waits for approval (told to the engine as ``waiting``)."""
        payload = record.payload
        event = payload.get("hook_event_name")
        if event == "Notification" and payload.get("notification_type") != "permission_prompt":
            return None
        if event not in ("Stop", "StopFailure", "Notification") or not await self._mine(record):
            return None
        if event == "Notification":
            self.waiting_now = f"permission prompt: {payload.get('message') or 'a tool'}"
            self.ctx.waiting(self.waiting_now)
            return None
        turn = await self._hook_turn(str(payload.get("prompt_id") or ""), wait=event == "Stop")
        if turn is None:
            return None
        if event == "StopFailure":
            why = payload.get("error_details") or "StopFailure"
            detail = f"error: {payload.get('error') or 'unknown'} ({why})"
            return Completion(tile=self.ctx.name, turn_id=turn.turn_id, outcome="failed", signal="hook",
                              at=record.written_at, detail=detail)
        return Completion(tile=self.ctx.name, turn_id=turn.turn_id, outcome=turn.outcome or "completed",
                          signal="hook", at=record.written_at, detail=turn.detail or "Stop hook")

    async def _hook_turn(self, prompt_id: str, *, wait: bool) -> Turn | None:
        """The turn a hook names (its ``prompt_id``, else the newest); for Stop, once the file shows its end
        (waited for up to :data:`ANSWER_WAIT_S`)."""
        deadline = time.monotonic() + ANSWER_WAIT_S
        while True:
            try:
                await self.refresh()
            except TmuxError:
                return None
            turns = self.turns()
            named = [t for t in turns if prompt_id and t.prompt_id == prompt_id]
            turn = (named or turns)[-1] if turns else None
            if not wait or (turn is not None and turn.outcome is not None):
                return turn
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
            screen = await self.ctx.capture(escapes=True)
        except (PaneGone, ServerGone):
            return "gone"
        if self.waiting_for(screen) is not None or self.is_busy(screen):
            return "busy"  # never type into a dialog (it would answer it) nor steer a running turn
        turns = self.turns()
        if turns and turns[-1].outcome is None and self.file_age() < STALE_BUSY_S:
            return "busy"
        draft = input_draft(screen)
        if draft is None:
            return "busy"  # no input box: starting, or a dialog of its own
        return "draft" if draft else "ready"

    def waiting_for(self, screen: str) -> str | None:
        return waiting_for(screen)

    def answer_keys(self, screen: str, approve: bool) -> list[str] | None:
        return approval_answer(screen, approve)

    def draft(self, screen: str) -> str:
        return input_draft(screen) or ""

    async def current_draft(self) -> str:
        """The input's text, read with escapes: a follow-up suggestion is not a draft (it reads as "")."""
        try:
            return self.draft(await self.ctx.capture(escapes=True))
        except TmuxError:
            return ""

    def shows_paste(self, draft: str, text: str) -> bool:
        return paste_placeholder(draft, text) or super().shows_paste(draft, text)

    async def received(self, text: str) -> bool | None:
        """After a crash mid-delivery: the session file knows whether ``text`` became a prompt."""
        try:
            await self.refresh(force=True)
        except TmuxError:
            return None
        if self.file is None:
            return None if self.session_id is None else False
        want = _norm(text)
        return any(_norm(t.prompt) == want for t in self.turns()[-20:])

    async def snapshot(self) -> TurnMark:
        try:
            await self.refresh(force=True)
        except TmuxError:
            pass
        return TurnMark(source=self.session_id, count=len(self.turns()))

    async def turn_started(self, before: TurnMark) -> bool:
        """A prompt appended to the session (a session that had no file yet gets one at its first prompt)."""
        try:
            await self.refresh()
        except TmuxError:
            return False
        if self.session_id != before.source:
            return any(t.started_at >= before.at - 1.0 for t in self.turns())
        return len(self.turns()) > before.count

    async def usage(self) -> SessionUsage | None:
        if self.file is None:
            try:
                await self.refresh()
            except TmuxError:
                return None
        return self.file.state.usage() if self.file is not None else None

    async def working_since(self) -> float | None:
        """The running turn's start: its prompt's timestamp."""
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
        res = await anyio.to_thread.run_sync(resolve_session, info.pid)
        steps += res.steps
        if res.session is not None:
            file = SessionFile(res.session)
            await anyio.to_thread.run_sync(file.read)
            turns = file.state.turns
            last = next((t for t in reversed(turns) if t.outcome is not None), None)
            busy = bool(turns) and turns[-1].outcome is None
            ended = f"idle; last turn {last.turn_id} {last.outcome} {last.detail}".rstrip() if last \
                else "idle, no finished turn"
            steps.append(ResolveStep("turn", True, f"busy: turn {turns[-1].turn_id}" if busy else ended,
                                     {"session": res.session_id, "busy": busy}))
        return steps


@hookimpl
def register_agents(register: RegisterAgent) -> None:
    register(QwenAdapter)
