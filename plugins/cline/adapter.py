"""Cline CLI (``cline`` 3.x, a compiled binary): completions and clean answers from its session files,
confirmed by its ``TaskComplete`` hook; waiting, drafts and pastes from its screen (docs/agents.md, Cline).

The pane's session is found by :mod:`plugins.cline.resolve` (the newest its process started, as Cline's log
says, else the newest that started since it did, in its folder; the hub daemon the TUI starts is never
taken for the agent) and read by
:mod:`plugins.cline.session`; following it is :mod:`plugins.cline.follow`'s, the answers are
:class:`~pipeline.plugin.session_answers.SessionAnswers`'. A turn's id is the session id and its prompt's
message id, the same from the files and from the hook.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio

from pipeline.plugin import HookRecord, PaneInfo, RegisterAgent, TmuxError
from pipeline.plugin.agents import TargetState
from pipeline.plugin.events import Completion, Response
from pipeline.plugin.markers import hookimpl
from pipeline.plugin.screen_rules import ReadsScreenRules, ScreenRules
from pipeline.plugin.session_answers import SessionAnswers, answer_of, file_completion, last_finished
from pipeline.plugin.tools import proc, sanitize
from pipeline.plugin.turns import FileResolution, TurnMark
from pipeline.plugin.usage import SessionUsage
from plugins.cline.follow import ClineFollowing
from plugins.cline.hooks import cline_config_dir, hook_kind, hook_session, install_hooks
from plugins.cline.resolve import ClineProcess, find_cline, is_cline, resolve_session
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

class ClineAdapter(ReadsScreenRules, ClineFollowing, SessionAnswers[ClineProcess, SessionFile, Turn]):
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
    snapshot_screen = True  # the messages show a prompt at its first step only (docs/agents.md, Cline)

    @classmethod
    def claims_process(cls, p: proc.Proc) -> bool:
        return is_cline(p)

    # ---- the screen --------------------------------------------------------------------------------------

    rules = ScreenRules(is_busy=is_busy, waiting_for=waiting_for, answer_keys=approval_answer,
                        input_draft=input_draft, paste_placeholder=paste_placeholder)

    def asks(self, screen: str) -> str | None:
        return approval_question(screen)

    # ---- answers -----------------------------------------------------------------------------------------

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
        turn = last_finished(Path(path), session.state.turns())
        return Response(completion=file_completion(record, turn), text=answer_of(Path(path), turn),
                        source="transcript", cwd=session.state.cwd)

    # ---- hooks -------------------------------------------------------------------------------------------

    @classmethod
    def install_hooks(cls, hook_command: list[str]) -> str:
        return install_hooks(cline_config_dir() / "hooks", hook_command)

    async def _mine(self, record: HookRecord) -> bool:
        """Whether a hook record is this tile's: by its session (a session the hub daemon runs fires its
        hooks from the hub, with the ``$TMUX_PANE`` of the pane that started the hub), else by its pane."""
        session = hook_session(record.payload)
        try:
            await self.refresh(force=self.file is None)
            if self.file is not None and session is not None:
                return self._is_session(session)
            return record.pane is not None and record.pane == (await self.ctx.pane()).pane_id
        except TmuxError:
            return False

    async def hook_completion(self, record: HookRecord) -> Completion | None:
        """``TaskComplete`` / ``TaskError``: the turn ended; the turn and its answer are the files'."""
        kind = hook_kind(record.payload)
        if kind is None or not await self._mine(record):
            return None
        turn = await self._ended_turn(lambda turns: turns[-1] if turns else None, force_unresolved=True)
        if turn is None:
            return None
        return Completion(tile=self.ctx.name, turn_id=turn.turn_id, outcome=turn.outcome or "completed",
                          signal="hook", at=record.written_at, detail=turn.detail or f"{kind} hook")

    # ---- as a target -------------------------------------------------------------------------------------

    def input_box(self, screen: str) -> str | None:
        return input_draft(screen)  # None: a dialog (an approval, the provider picker, a notice)

    async def target_state(self) -> TargetState:
        """As every session-file agent's, and busy while the record says a turn runs (its prompt reaches the
        messages only at the turn's first step)."""
        state = await super().target_state()
        if state in ("ready", "draft") and self.file is not None and self.file.state.busy:
            return "busy"
        return state

    async def presence_state(self, info: PaneInfo) -> TargetState:
        """Asked every second: whether the pane runs Cline (not only its hub daemon), from /proc alone."""
        found = await anyio.to_thread.run_sync(find_cline, info.pid)
        return "ready" if found is not None else "absent"

    async def received(self, text: str) -> bool | None:
        """After a crash mid-delivery: the session's messages, else (they are written at the turn's first
        step) the transcript on the screen — the prompt, or its placeholder, above the input box."""
        if await super().received(text):
            return True
        try:
            shown = sent_prompts(await self.ctx.capture(start=-200))
        except TmuxError:
            return None
        clean = sanitize(text)
        return any(self.shows_paste(line, clean) for line in shown[-5:])

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

    def _usage_of(self, file: SessionFile) -> SessionUsage | None:
        return session_usage(file.state.messages)

    def _resolution(self, pane_pid: int) -> FileResolution:
        return resolve_session(pane_pid)


@hookimpl
def register_agents(register: RegisterAgent) -> None:
    register(ClineAdapter)
