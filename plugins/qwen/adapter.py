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
from pathlib import Path
from typing import Any

import anyio

from pipeline.plugin import HookRecord, RegisterAgent, TmuxError
from pipeline.plugin.agents import ResolveStep
from pipeline.plugin.events import Completion, Response
from pipeline.plugin.markers import hookimpl
from pipeline.plugin.session_answers import (
    SessionAnswers,
    answer_of,
    file_completion,
    last_finished,
    read_whole,
    turn_step,
)
from pipeline.plugin.tools import json_head, proc
from pipeline.plugin.turns import FileResolution, TurnMark
from pipeline.plugin.usage import SessionUsage
from plugins.qwen.follow import QwenFollowing
from plugins.qwen.hooks import install_hooks, qwen_dir
from plugins.qwen.resolve import QwenProcess, Resolution, is_qwen, resolve_session
from plugins.qwen.screen import (
    BUSY,
    PLACEHOLDER,
    approval_answer,
    input_draft,
    paste_placeholder,
    shows_paste_start,
    waiting_for,
)
from plugins.qwen.session import SessionFile, Turn

__all__ = ["QwenAdapter"]


class QwenAdapter(QwenFollowing, SessionAnswers[QwenProcess, SessionFile, Turn]):
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
    #: its session file lags its screen: every record is appended one at a time behind a lease check and an
    #: fsync, so a turn's last reply reaches the file a second or more after the screen went idle (measured
    #: after an approved tool turn, docs/agent-versions.md, Qwen Code). A running turn shows its busy line and
    #: footer throughout (a dialog while it asks), so a turn open in the file is never trusted over the screen
    stale_busy_s = 0.0
    #: the input box with escapes: a follow-up suggestion differs from a draft only in its colour
    readiness_screen = (True, None, None)

    @classmethod
    def claims_process(cls, p: proc.Proc) -> bool:
        return is_qwen(p)

    # ---- answers -----------------------------------------------------------------------------------------

    @classmethod
    def recognizes_file(cls, path: Path) -> bool:
        """A session file's records name their session and their ``provenance`` (``real_user``, …)."""
        return any(isinstance(r.get("sessionId"), str) and "provenance" in r for r in json_head(path))

    @classmethod
    def extract_file(cls, path: Path, **options: Any) -> Response | None:
        """``baton extract --agent qwen SESSION.jsonl``: the last finished turn's answer."""
        turn = last_finished(path, read_whole(path, SessionFile).state.turns)
        text = answer_of(path, turn)
        return Response(completion=file_completion(path, turn), text=text, source="transcript")

    # ---- hooks -------------------------------------------------------------------------------------------

    @classmethod
    def install_hooks(cls, hook_command: list[str]) -> str:
        return install_hooks(qwen_dir() / "settings.json", hook_command)

    def _is_session(self, session_id: object) -> bool:
        return self.session_id is not None and session_id == self.session_id

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
        (waited for up to :attr:`answer_wait_s`)."""
        def pick(turns: list[Turn]) -> Turn | None:
            named = [t for t in turns if prompt_id and t.prompt_id == prompt_id]
            return (named or turns)[-1] if turns else None
        return await self._ended_turn(pick, wait=wait)

    # ---- as a target -------------------------------------------------------------------------------------

    async def _target_screen(self) -> str:
        return await self.ctx.capture(escapes=True)

    def input_box(self, screen: str) -> str | None:
        return input_draft(screen)

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

    async def paste_landed(self, text: str) -> bool:
        """The paste shows (as its placeholder, or inline: whole, or its end once the box scrolled), or its
        box is full of the paste's first rows: Qwen Code has taken the whole paste by then, and scrolls to
        its end a render later, 20-165 ms on (the Enter would wait for that, or for ``submit_delay_s``)."""
        draft = (await self.current_draft()).strip()
        return bool(draft) and (self.shows_paste(draft, text) or shows_paste_start(draft, text))

    async def _received_without_file(self, text: str) -> bool | None:
        """A session with no file yet holds no prompt (its file is made at the first)."""
        return None if self.session_id is None else False

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

    def _usage_of(self, file: SessionFile) -> SessionUsage | None:
        return file.state.usage()

    def _resolution(self, pane_pid: int) -> FileResolution:
        return resolve_session(pane_pid)

    async def _session_steps(self, res: FileResolution, session: Path) -> list[ResolveStep]:
        """The turn step only (the pid file named the session); the file read afresh, not followed."""
        file = SessionFile(session)
        await anyio.to_thread.run_sync(file.read)
        sid = res.session_id if isinstance(res, Resolution) else None
        return [turn_step(file.state.turns, sid)]


@hookimpl
def register_agents(register: RegisterAgent) -> None:
    register(QwenAdapter)
