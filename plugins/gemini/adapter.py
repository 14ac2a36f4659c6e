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

import anyio

from pipeline.plugin import HookRecord, PaneGone, RegisterAgent, ServerGone, TmuxError
from pipeline.plugin.agents import ResolveStep, TargetState
from pipeline.plugin.events import Completion, Response
from pipeline.plugin.markers import hookimpl
from pipeline.plugin.tools import json_head, proc, sanitize, strip_ansi
from pipeline.plugin.turns import TurnMark
from pipeline.plugin.usage import SessionUsage
from plugins.gemini.follow import GeminiFollowing
from plugins.gemini.hooks import gemini_dir, install_hooks
from plugins.gemini.resolve import is_gemini, resolve_session
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

#: how long an AfterAgent hook waits for the session file to show the turn's end
ANSWER_WAIT_S = 1.0
#: an open turn that wrote nothing for this long, with no busy line on screen, is not trusted to run: a
#: running turn shows its spinner (a crash mid-stream writes nothing, and hand-offs to it would wait for ever)
STALE_BUSY_S = 60.0


def _norm(text: str) -> str:
    return " ".join(sanitize(text).split())


class GeminiAdapter(GeminiFollowing):
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

    @classmethod
    def claims_process(cls, p: proc.Proc) -> bool:
        return is_gemini(p)

    # ---- answers -----------------------------------------------------------------------------------------

    def _turn(self, turn_id: str) -> Turn | None:
        return next((t for t in self.turns() if t.turn_id == turn_id), None)

    async def response(self, completion: Completion) -> Response | None:
        if not completion.turn_id.startswith("gemini:"):
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
        """A session file starts with its metadata line: ``{sessionId, projectHash, startTime, …}``
        (:mod:`plugins.gemini.session`)."""
        head = json_head(path)
        return bool(head) and isinstance(head[0].get("sessionId"), str) and "projectHash" in head[0]

    @classmethod
    def extract_file(cls, path: Path, **options: Any) -> Response | None:
        """``baton extract --agent gemini SESSION.jsonl``: the last finished turn's answer."""
        with open(path, "rb"):
            pass  # a missing or unreadable file is the caller's error, not "no turn"
        session = SessionFile(path)
        session.read(final=True)
        turns = session.state.turns()
        done = [t for t in turns if t.outcome is not None]
        if not done:
            raise LookupError(_nothing_finished(path, session.state))
        turn = done[-1]
        completion = Completion(tile=Path(path).name, turn_id=turn.turn_id,
                                outcome=turn.outcome or "completed", signal="file",
                                at=turn.ended_at or 0.0, detail=turn.detail)
        if turn.answer is None:
            raise LookupError(f"{path}: the last turn ({turn.turn_id}) ended {turn.detail}; "
                              "it left no answer")
        note = "the last answer may be followed by a tool still running" if turn is turns[-1] and \
            turn.provisional and turn.tool_calls == 0 and turn.model_calls > 1 else ""
        return Response(completion=completion, text=turn.answer, source="transcript", note=note)

    # ---- hooks -------------------------------------------------------------------------------------------

    @classmethod
    def install_hooks(cls, hook_command: list[str]) -> str:
        return install_hooks(gemini_dir() / "settings.json", hook_command)

    async def _mine(self, record: HookRecord) -> bool:
        """Whether a hook record is this tile's: its pane, else its session."""
        payload = record.payload
        try:
            pane_id = (await self.ctx.pane()).pane_id
        except TmuxError:
            return False
        if record.pane:
            if record.pane != pane_id:
                return False
            path = payload.get("transcript_path")
            self.hook_transcript = path if isinstance(path, str) else self.hook_transcript
            return True
        try:
            await self.refresh()
        except TmuxError:
            return False
        state = self.file.state if self.file else None
        return state is not None and payload.get("session_id") == state.session_id

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
        shows its end (waited for up to :data:`ANSWER_WAIT_S`)."""
        deadline = time.monotonic() + ANSWER_WAIT_S
        while True:
            try:
                await self.refresh(force=self.file is None)
            except TmuxError:
                return None
            turns = self.turns()
            same = [t for t in turns if _norm(t.prompt) == _norm(prompt)] or turns[-1:]
            turn = same[-1] if same else None
            if (turn is not None and turn.outcome is not None) or time.monotonic() >= deadline:
                return turn if turn is not None and turn.outcome is not None else None
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
        turns = self.turns()
        if turns and turns[-1].outcome is None and self.file_age() < STALE_BUSY_S:
            return "busy"
        draft = input_draft(screen)
        if draft is None:
            return "busy"  # no input box: starting, or a dialog of its own
        return "draft" if draft else "ready"

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

    async def received(self, text: str) -> bool | None:
        """After a crash mid-delivery: the session file knows whether ``text`` became a prompt."""
        try:
            await self.refresh(force=True)
        except TmuxError:
            return None
        if self.file is None:
            return await super().received(text)
        want = _norm(text)
        return any(_norm(t.prompt) == want for t in self.turns()[-20:])

    async def snapshot(self) -> TurnMark:
        try:
            await self.refresh(force=True)
        except TmuxError:
            pass
        return TurnMark(source=str(self.file.path) if self.file else None, count=len(self.turns()),
                        screen=await self.ctx.capture() if self.file is None else None)

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

    async def usage(self) -> SessionUsage | None:
        if self.file is None:
            try:
                await self.refresh()
            except TmuxError:
                return None
        return session_usage(self.file.state.messages) if self.file is not None else None

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
        res = await anyio.to_thread.run_sync(lambda: resolve_session(
            info.pid, hook_transcript=self.hook_transcript, last_prompt=self.last_prompt,
            prompt_sent_at=self.prompt_sent_at))
        steps += res.steps
        if res.session is not None:
            if self.file is None or self.file.path != res.session:
                self.file = SessionFile(res.session)
            await anyio.to_thread.run_sync(self.file.read)
            turns = self.file.state.turns()
            last = next((t for t in reversed(turns) if t.outcome is not None), None)
            busy = bool(turns) and turns[-1].outcome is None
            sid = self.file.state.session_id
            steps.append(ResolveStep("session", sid is not None, f"session {sid}", sid))
            ended = f"idle; last turn {last.turn_id} {last.outcome} {last.detail}".rstrip() if last \
                else "idle, no finished turn"
            steps.append(ResolveStep(
                "turn", True, f"busy: turn {turns[-1].turn_id}" if busy else ended,
                {"session": self.file.state.session_id, "busy": busy}))
        return steps


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
