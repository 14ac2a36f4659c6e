"""pi (``@earendil-works/pi-coding-agent`` 1.x, and ``@mariozechner/pi-coding-agent`` up to 0.73.1):
completions and clean answers from its session files, confirmed by its extension hook or its screen;
waiting, drafts and pastes from its screen (docs/agents.md, pi).

The pane's session file is found by :mod:`plugins.pi.resolve` and read by :mod:`plugins.pi.session`;
following it is :mod:`plugins.pi.follow`'s. A turn's id is the session id and its prompt's entry id, the
same from the file and from the hook. The answer is the text of the turn's last assistant message.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio

from pipeline.plugin import HookRecord, PaneGone, RegisterAgent, ServerGone, TmuxError
from pipeline.plugin.agents import InputHolds, ResolveStep, TargetState
from pipeline.plugin.events import Completion, Response
from pipeline.plugin.markers import hookimpl
from pipeline.plugin.tools import json_head, proc, sanitize, strip_ansi
from pipeline.plugin.turns import TurnMark
from pipeline.plugin.usage import SessionUsage
from plugins.pi.follow import PiFollowing
from plugins.pi.hooks import agent_dir, hook_kind, install_extension
from plugins.pi.resolve import is_pi, resolve_session
from plugins.pi.screen import approval_answer, input_draft, is_busy, paste_placeholder, waiting_for
from plugins.pi.session import SessionFile, Turn
from plugins.pi.usage import session_usage

__all__ = ["PiAdapter"]

#: how long a hook waits for the session file to show the turn's end
ANSWER_WAIT_S = 1.0
#: an open turn that wrote nothing for this long, with no busy line on screen, is not trusted to run (pi
#: killed mid-turn writes nothing more)
STALE_BUSY_S = 60.0


def _norm(text: str) -> str:
    return " ".join(sanitize(text).split())


class PiAdapter(PiFollowing):
    name = "pi"
    summary = "pi: turns and answers from its session files, confirmed by its extension hook"
    #: pi sets its process title to ``pi`` (its executable is ``node``)
    process_names = frozenset({"pi"})
    file_kind = "a pi session file"
    confirm_timeout_s = 8.0
    quiet_s = 1.5

    @classmethod
    def claims_process(cls, p: proc.Proc) -> bool:
        return is_pi(p)

    # ---- the screen --------------------------------------------------------------------------------------

    def is_busy(self, screen: str) -> bool:
        return is_busy(screen)

    def waiting_for(self, screen: str) -> str | None:
        return waiting_for(screen)

    def answer_keys(self, screen: str, approve: bool) -> list[str] | None:
        return approval_answer(screen, approve)

    def draft(self, screen: str) -> str:
        return input_draft(screen) or ""

    def shows_paste(self, draft: str, text: str) -> bool:
        return paste_placeholder(draft, text) or super().shows_paste(draft, text)

    async def input_holds(self, text: str) -> InputHolds | None:
        try:
            draft = input_draft(await self.ctx.capture())
        except TmuxError:
            return None
        if draft is None:
            return None  # no input box: starting, or the trust dialog
        if not draft.strip():
            return "empty"
        return "prompt" if self.shows_paste(draft.strip(), text) else "other"

    # ---- answers -----------------------------------------------------------------------------------------

    def _turn(self, turn_id: str) -> Turn | None:
        return next((t for t in self.turns() if t.turn_id == turn_id), None)

    async def response(self, completion: Completion) -> Response | None:
        if not completion.turn_id.startswith("pi:"):
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
                        cwd=self.process.cwd if self.process else None,
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
        """A pi session file: its first line is ``{"type": "session", "version", "id", "timestamp", "cwd"}``
        and its entries carry ``parentId``."""
        head = json_head(path)
        return bool(head) and head[0].get("type") == "session" \
            and {"version", "id", "cwd"} <= head[0].keys() and all("parentId" in r for r in head[1:3])

    @classmethod
    def extract_file(cls, path: Path, **options: Any) -> Response | None:
        """``baton extract --agent pi SESSION.jsonl``: the last finished turn's answer."""
        with open(path, "rb"):
            pass  # a missing or unreadable file is the caller's error, not "no turn"
        session = SessionFile(path)
        session.read(final=True)
        done = [t for t in session.state.turns() if t.outcome is not None]
        if not done:
            what = "the last turn is still open" if session.state.turns() else "no prompt was written to it"
            raise LookupError(f"{path} holds no finished turn: {what}")
        turn = done[-1]
        completion = Completion(tile=Path(path).name, turn_id=turn.turn_id,
                                outcome=turn.outcome or "completed", signal="file",
                                at=turn.ended_at or 0.0, detail=turn.detail)
        return Response(completion=completion, text=turn.answer or "", source="transcript",
                        note="" if turn.outcome == "completed" else f"turn ended: {turn.detail}")

    # ---- hooks -------------------------------------------------------------------------------------------

    @classmethod
    def install_hooks(cls, hook_command: list[str]) -> str:
        return install_extension(agent_dir() / "extensions", hook_command)

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
            path = payload.get("session_file")
            self.hook_session = path if isinstance(path, str) else self.hook_session
            return True
        try:
            await self.refresh()
        except TmuxError:
            return False
        state = self.file.state if self.file else None
        return state is not None and payload.get("session_id") == state.session_id

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
        """The newest turn, once the file shows its end (waited for up to :data:`ANSWER_WAIT_S`)."""
        deadline = time.monotonic() + ANSWER_WAIT_S
        while True:
            try:
                await self.refresh()
            except TmuxError:
                return None
            turns = self.turns()
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
        turns = self.turns()
        if turns and turns[-1].outcome is None and self.file_age() < STALE_BUSY_S:
            return "busy"
        draft = input_draft(screen)
        if draft is None:
            return "busy"  # no input box: starting
        return "draft" if draft else "ready"

    def file_age(self) -> float:
        """Seconds since the session file was last written (0 when unknown)."""
        try:
            return time.time() - self.file.path.stat().st_mtime if self.file is not None else 0.0
        except OSError:
            return 0.0

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
                        screen=await self.ctx.capture())

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

    async def usage(self) -> SessionUsage | None:
        if self.file is None:
            try:
                await self.refresh()
            except TmuxError:
                return None
        return session_usage(self.file.state.assistant_messages()) if self.file is not None else None

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
            info.pid, hook_session=self.hook_session, last_prompt=self.last_prompt))
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
            steps.append(ResolveStep("turn", True, f"busy: turn {turns[-1].turn_id}" if busy else ended,
                                     {"session": sid, "busy": busy}))
        return steps


@hookimpl
def register_agents(register: RegisterAgent) -> None:
    register(PiAdapter)
