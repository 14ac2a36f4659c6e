"""pi (``@earendil-works/pi-coding-agent`` 1.x, and ``@mariozechner/pi-coding-agent`` up to 0.73.1):
completions and clean answers from its session files, confirmed by its extension hook or its screen;
waiting, drafts and pastes from its screen (docs/agents.md, pi).

The pane's session file is found by :mod:`plugins.pi.resolve` and read by :mod:`plugins.pi.session`;
following it is :mod:`plugins.pi.follow`'s. A turn's id is the session id and its prompt's entry id, the
same from the file and from the hook. The answer is the text of the turn's last assistant message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.plugin import HookRecord, RegisterAgent, TmuxError
from pipeline.plugin.events import Completion, Response
from pipeline.plugin.markers import hookimpl
from pipeline.plugin.screen_rules import ReadsScreenRules, ScreenRules
from pipeline.plugin.session_answers import SessionAnswers, file_completion, last_finished, read_whole
from pipeline.plugin.tools import json_head, proc
from pipeline.plugin.turns import FileResolution, TurnMark
from pipeline.plugin.usage import SessionUsage
from plugins.pi.follow import PiFollowing
from plugins.pi.hooks import agent_dir, hook_kind, install_extension
from plugins.pi.resolve import PiProcess, is_pi, resolve_session
from plugins.pi.screen import approval_answer, input_draft, is_busy, paste_placeholder, waiting_for
from plugins.pi.session import SessionFile, Turn
from plugins.pi.usage import session_usage

__all__ = ["PiAdapter"]


class PiAdapter(ReadsScreenRules, PiFollowing, SessionAnswers[PiProcess, SessionFile, Turn]):
    name = "pi"
    summary = "pi: turns and answers from its session files, confirmed by its extension hook"
    #: pi sets its process title to ``pi`` (its executable is ``node``)
    process_names = frozenset({"pi"})
    file_kind = "a pi session file"
    confirm_timeout_s = 8.0
    quiet_s = 1.5
    hook_file_key = "session_file"
    snapshot_screen = True  # the prompt reaches the file at its first step, the screen at once

    @classmethod
    def claims_process(cls, p: proc.Proc) -> bool:
        return is_pi(p)

    # ---- the screen --------------------------------------------------------------------------------------

    rules = ScreenRules(is_busy=is_busy, waiting_for=waiting_for, answer_keys=approval_answer,
                        input_draft=input_draft, paste_placeholder=paste_placeholder)

    # ---- answers -----------------------------------------------------------------------------------------

    @classmethod
    def recognizes_file(cls, path: Path) -> bool:
        """A pi session file: its first line is ``{"type": "session", "version", "id", "timestamp", "cwd"}``
        and its entries carry ``parentId``."""
        head = json_head(path)
        return bool(head) and head[0].get("type") == "session" \
            and {"version", "id", "cwd"} <= head[0].keys() and all("parentId" in r for r in head[1:3])

    @classmethod
    def extract_file(cls, path: Path, **options: Any) -> Response | None:
        """``baton extract --agent pi SESSION.jsonl``: the last finished turn's answer."""
        turn = last_finished(path, read_whole(path, SessionFile).state.turns())
        return Response(completion=file_completion(path, turn), text=turn.answer or "", source="transcript",
                        note="" if turn.outcome == "completed" else f"turn ended: {turn.detail}")

    # ---- hooks -------------------------------------------------------------------------------------------

    @classmethod
    def install_hooks(cls, hook_command: list[str]) -> str:
        return install_extension(agent_dir() / "extensions", hook_command)

    async def hook_completion(self, record: HookRecord) -> Completion | None:
        """``agent_end`` / ``agent_settled``: the run ended; the turn and its answer are the file's. An
        ``error`` end counts only once pi settled (1.x) — it may retry."""
        event = hook_kind(record.payload)
        if event is None or not await self._mine(record):
            return None
        turn = await self._hook_turn()
        if turn is None or (turn.provisional and event != "agent_settled"):
            return None
        self.confirm(turn.turn_id)
        return Completion(tile=self.ctx.name, turn_id=turn.turn_id, outcome=turn.outcome or "completed",
                          signal="hook", at=record.written_at, detail=turn.detail or f"{event} hook")

    async def _hook_turn(self) -> Turn | None:
        """The newest turn, once the file shows its end (waited for up to :attr:`answer_wait_s`)."""
        return await self._ended_turn(lambda turns: turns[-1] if turns else None)

    # ---- as a target -------------------------------------------------------------------------------------

    def input_box(self, screen: str) -> str | None:
        return input_draft(screen)  # None: starting, or the trust dialog

    async def turn_started(self, before: TurnMark) -> bool:
        """A prompt appended to the session file after the snapshot (the first prompt makes the file), or
        the busy line on the screen."""
        try:
            await self.refresh(force=self.file is None or str(self.file.path) != before.source)
        except TmuxError:
            return False
        if self.file is not None:
            if str(self.file.path) != before.source:
                return any(t.started_at >= before.at - 1.0 for t in self.turns())
            if len(self.turns()) > before.count:
                return True
        try:
            return self.is_busy(await self.ctx.capture())
        except TmuxError:
            return False

    def _usage_of(self, file: SessionFile) -> SessionUsage | None:
        return session_usage(file.state.assistant_messages())

    def _resolution(self, pane_pid: int) -> FileResolution:
        return resolve_session(pane_pid, hook_session=self.hook_file, last_prompt=self.last_prompt)


@hookimpl
def register_agents(register: RegisterAgent) -> None:
    register(PiAdapter)
