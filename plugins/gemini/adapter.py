"""Gemini CLI: completions and clean answers from its session files, confirmed by its AfterAgent hook or its
screen; waiting, drafts and pastes from its screen.

The pane's session file is found by :mod:`plugins.gemini.resolve` and read by :mod:`plugins.gemini.session`;
following it is :mod:`plugins.gemini.follow`'s. A turn's id is the session id and its prompt's message id,
the same from the file and from the hook (the detector keeps one of the two). The answer is always the
file's last ``gemini`` message: the hook's ``prompt_response`` is garbled (chunks repeated).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from pipeline.plugin import HookRecord, RegisterAgent, TmuxError
from pipeline.plugin.events import Completion, Response
from pipeline.plugin.markers import hookimpl
from pipeline.plugin.session_answers import (
    SessionAnswers,
    answer_of,
    file_completion,
    last_finished,
    norm,
    read_whole,
)
from pipeline.plugin.tools import json_head, proc
from pipeline.plugin.turns import FileResolution, TurnMark
from pipeline.plugin.usage import SessionUsage
from plugins.gemini.follow import GeminiFollowing
from plugins.gemini.hooks import gemini_dir, install_hooks
from plugins.gemini.resolve import GeminiProcess, is_gemini, resolve_session
from plugins.gemini.screen import (
    BUSY,
    PLACEHOLDER,
    approval_answer,
    approval_question,
    input_draft,
    paste_placeholder,
    waiting_for,
)
from plugins.gemini.session import SessionFile, SessionState, Turn
from plugins.gemini.usage import session_usage

__all__ = ["GeminiAdapter"]


class GeminiAdapter(GeminiFollowing, SessionAnswers[GeminiProcess, SessionFile, Turn]):
    name = "gemini"
    summary = "Gemini CLI: turns and answers from its session files, confirmed by its AfterAgent hook"
    file_kind = "a Gemini CLI session file"
    #: Gemini CLI runs as ``node`` (:meth:`claims_process` looks at its argv); ``gemini`` for a native build
    process_names = frozenset({"gemini"})
    busy_markers = BUSY
    input_line = re.compile(r"^\s?>\s(.*)$")
    placeholders = (PLACEHOLDER,)
    confirm_timeout_s = 8.0
    submit_delay_s = 0.3
    #: an Enter less than 40 ms after a bracketed paste reached its input is a newline (measured: 0.05 s
    #: after the paste a newline, 0.15 s a submit): never sooner than that, however soon the paste shows
    submit_min_s = 0.15
    #: an Enter read together with its paste (Gemini CLI starved of CPU) is a newline: 40 ms after an
    #: "unsafe" paste its Enter inserts one (docs/agents.md); seen on 0.61.0 stopped while it was typed into
    enter_again_s = 1.0
    quiet_s = 1.5
    hook_file_key = "transcript_path"

    @classmethod
    def claims_process(cls, p: proc.Proc) -> bool:
        return is_gemini(p)

    # ---- answers -----------------------------------------------------------------------------------------

    @classmethod
    def recognizes_file(cls, path: Path) -> bool:
        """A session file starts with its metadata line: ``{sessionId, projectHash, startTime, …}``
        (:mod:`plugins.gemini.session`)."""
        head = json_head(path)
        return bool(head) and isinstance(head[0].get("sessionId"), str) and "projectHash" in head[0]

    @classmethod
    def extract_file(cls, path: Path, **options: Any) -> Response | None:
        """``baton extract --agent gemini SESSION.jsonl``: the last finished turn's answer."""
        session = read_whole(path, SessionFile)
        turns = session.state.turns()
        if not any(t.outcome is not None for t in turns):
            raise LookupError(_nothing_finished(path, session.state))
        turn = last_finished(path, turns)
        text = answer_of(path, turn)
        note = "the last answer may be followed by a tool still running" if turn is turns[-1] and \
            turn.provisional and turn.tool_calls == 0 and turn.model_calls > 1 else ""
        return Response(completion=file_completion(path, turn), text=text, source="transcript", note=note)

    # ---- hooks -------------------------------------------------------------------------------------------

    @classmethod
    def install_hooks(cls, hook_command: list[str]) -> str:
        return install_hooks(gemini_dir() / "settings.json", hook_command)

    async def hook_completion(self, record: HookRecord) -> Completion | None:
        """AfterAgent: the turn ended (its answer is read from the file); Notification: a tool waits for
        approval (told to the engine as ``waiting``)."""
        payload = record.payload
        event = payload.get("hook_event_name")
        if event not in ("AfterAgent", "Notification") or not await self._mine(record):
            return None
        if event == "Notification":
            details = payload.get("details")
            title = details.get("title") if isinstance(details, dict) else None
            what = title or payload.get("message") or "a tool"
            self.waiting_now = f"permission prompt: {what}"
            self.ctx.waiting(self.waiting_now)
            return None
        turn = await self._hook_turn(str(payload.get("prompt") or ""))
        if turn is None:
            return None
        self.confirm(turn.turn_id)
        return Completion(tile=self.ctx.name, turn_id=turn.turn_id, outcome=turn.outcome or "completed",
                          signal="hook", at=record.written_at, detail=turn.detail or "AfterAgent hook")

    async def _hook_turn(self, prompt: str) -> Turn | None:
        """The turn an AfterAgent hook ended: the newest with its prompt (else the newest), once the file
        shows its end (waited for up to :attr:`answer_wait_s`)."""
        def pick(turns: list[Turn]) -> Turn | None:
            same = [t for t in turns if norm(t.prompt) == norm(prompt)] or turns[-1:]
            return same[-1] if same else None
        return await self._ended_turn(pick, force_unresolved=True)

    # ---- as a target -------------------------------------------------------------------------------------

    def input_box(self, screen: str) -> str | None:
        return input_draft(screen)

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

    async def turn_started(self, before: TurnMark) -> bool:
        """A prompt appended to the session file after the snapshot; the screen when no file is known."""
        try:
            await self.refresh()
        except TmuxError:
            return False
        if self.file is not None:
            turns = self.turns()
            if str(self.file.path) != before.source:
                return any(t.started_at >= before.at - 1.0 for t in turns)
            return len(turns) > before.count
        if time.time() - before.at > 2.0:
            screen = await self.ctx.capture()
            return self.is_busy(screen) or (before.screen is not None and screen != before.screen)
        return False

    def _usage_of(self, file: SessionFile) -> SessionUsage | None:
        return session_usage(file.state.messages)

    def _resolution(self, pane_pid: int) -> FileResolution:
        return resolve_session(pane_pid, hook_transcript=self.hook_file, last_prompt=self.last_prompt,
                               prompt_sent_at=self.prompt_sent_at)


def _nothing_finished(path: Path, state: SessionState) -> str:
    """Why a session file holds no finished turn, in words for ``baton extract``."""
    if state.lines == 0:
        return f"{path} holds no turn: it has no JSON lines (is it a Gemini CLI session file?)"
    if not state.turns():
        return f"{path} holds no turn: no prompt was written to it"
    return f"{path}: the last turn is still open (no answer on disk yet)"


@hookimpl
def register_agents(register: RegisterAgent) -> None:
    register(GeminiAdapter)
