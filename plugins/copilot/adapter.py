"""GitHub Copilot CLI, read from its own files: the resolution chain, the events' answer, two completion
signals, written against the public plugin API only.

A user turn is reported by whichever comes first of: its end in ``events.jsonl`` (a ``turn_end`` after an
``assistant.message`` with no tool requests; ``abort`` for an interrupt; ``session.error`` for a failure —
:mod:`plugins.copilot.events`), and the ``agentStop`` hook installed by ``baton hooks install --agent
copilot``. Both name the turn ``copilot:<sessionId>:<interactionId>``, so the detector keeps one. The
answer is the events'; the screen is the last resort. A person asked (an approval) is the events' open
``permission.requested``, else the screen's approval box.
"""

from __future__ import annotations

import logging
import shlex
import time
from pathlib import Path
from typing import Any

import anyio

from pipeline.plugin import HookRecord, PaneGone, PaneInfo, RegisterAgent, ServerGone, TmuxError, TurnMark
from pipeline.plugin import turns as Turns
from pipeline.plugin.agents import ResolveStep, TargetState
from pipeline.plugin.events import Completion, Response
from pipeline.plugin.markers import hookimpl
from pipeline.plugin.screen_rules import ReadsScreenRules, ScreenRules
from pipeline.plugin.tools import AppendedLines, json_head, sanitize, strip_ansi
from pipeline.plugin.usage import SessionUsage
from plugins.copilot.events import Interaction, SessionEvents, turn_id
from plugins.copilot.follow import EventsFollowing, asked
from plugins.copilot.hooks import hook_kind, install_copilot_hooks
from plugins.copilot.resolve import default_copilot_home, find_copilot_process
from plugins.copilot.screen import (
    approval_answer,
    approval_prompt,
    approval_question,
    input_draft,
    is_working,
    paste_placeholder,
    strip_furniture,
)
from plugins.copilot.usage import EventsUsage

__all__ = ["CopilotAdapter"]

log = logging.getLogger("batonpass")

#: how long response() and the hook wait for the events to show a turn's end (they are written in batches)
ANSWER_WAIT_S = 2.0
#: an agentStop hook names the turn that ended at most this long before it fired
HOOK_SLACK_S = 30.0
#: a turn started this little before a snapshot still counts as started after it (clock granularity)
START_SLACK_S = 1.0
#: the screen :meth:`CopilotAdapter.target_state` read answers the same look's :meth:`resolve` this long
LOOK_REUSE_S = 1.0


class CopilotAdapter(ReadsScreenRules, EventsFollowing):
    name = "copilot"
    summary = "GitHub Copilot CLI: answers and completion from its events.jsonl and agentStop hook"
    file_kind = "a Copilot CLI events.jsonl"
    #: the native binary's executable name: its comm is ``MainThread`` (docs/agents.md)
    process_names = frozenset({"copilot"})
    #: Copilot gathers a bracketed paste before it draws it (the placeholder showed 0.35–0.43 s after the
    #: paste, docs/agent-versions.md): the Enter waits until the input shows what it submits
    submit_delay_s = 0.6
    confirm_timeout_s = 8.0
    busy_markers = ("esc esc interrupt", "esc again to interrupt", "esc esc edit prompt")
    quiet_s = 1.5
    #: the screen the last :meth:`target_state` read, and when (monotonic), for the same look's resolve()
    _looked: tuple[float, str] | None = None

    # ---- the screen ------------------------------------------------------------------------------

    rules = ScreenRules(is_busy=is_working, waiting_for=approval_prompt, answer_keys=approval_answer,
                        input_draft=input_draft, paste_placeholder=paste_placeholder)

    def asks(self, screen: str) -> str | None:
        return approval_question(screen)

    # ---- the answer ------------------------------------------------------------------------------

    async def _turn(self, tid: str, wait_s: float) -> Interaction | None:
        """The finished turn ``tid`` from the events, waiting up to ``wait_s`` for its end to be written."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                await self._refresh(force=self._state is None)
            except TmuxError:
                pass
            turn = self.find_turn(tid)
            if (turn is not None and turn.outcome is not None) or time.monotonic() >= deadline:
                return turn
            await anyio.sleep(0.05)

    async def response(self, completion: Completion) -> Response | None:
        if not completion.turn_id.startswith("copilot:"):
            return await super().response(completion)  # a turn seen on the screen
        turn = await self._turn(completion.turn_id, 0.0 if completion.signal == "events" else ANSWER_WAIT_S)
        cwd = self._state.cwd if self._state else None
        if turn is not None and turn.outcome is not None:
            note = "" if turn.outcome == "completed" else f"turn ended: {turn.detail}"
            return Response(completion=completion, text=turn.answer or "", source="transcript", cwd=cwd,
                            note=note or f"events of {self.events_path}")
        why = f"the events show no end of turn {completion.turn_id} after {ANSWER_WAIT_S:.0f}s"
        log.info("%s: answer from the terminal: %s", self.ctx.name, why)
        screen = await super().response(completion)
        return Response(completion=completion, text=strip_furniture(screen.text) if screen else "",
                        source="terminal", note=why)

    async def last_response(self) -> Response | None:
        try:
            await self._refresh(force=True)
        except TmuxError:
            return None
        state = self._state
        turn = state.last_finished() if state is not None else None
        if state is None or turn is None:
            return None
        return Response(completion=self._completion(state, turn, "events"), text=turn.answer or "",
                        source="transcript", cwd=state.cwd)

    async def finished_turns(self, since: float) -> list[Turns.TurnEnd] | None:
        """The turns of the pane's session that finished at or after ``since``."""
        try:
            await self._refresh(force=True)
        except (PaneGone, ServerGone):
            return []
        state = self._state
        if state is None:
            return []
        return [Turns.TurnEnd(turn_id=state.turn_key(t), outcome=t.outcome or "completed",
                              text=t.answer or "", ended_at=t.ended_at or 0.0, session_id=state.session_id,
                              cwd=state.cwd, detail=t.detail)
                for t in state.finished() if (t.ended_at or 0.0) >= since]

    @classmethod
    def recognizes_file(cls, path: Path) -> bool:
        """An ``events.jsonl`` starts with ``{type: "session.start", data: {sessionId, producer, …}}``; every
        event is ``{type, data, id, timestamp}`` (:mod:`plugins.copilot.events`)."""
        head = json_head(path)
        return any(r.get("type") == "session.start" and isinstance(r.get("data"), dict) for r in head)

    @classmethod
    def extract_file(cls, path: Path, **options: Any) -> Response | None:
        """``baton extract --agent copilot events.jsonl``: the last finished turn's answer."""
        with open(path, "rb"):
            pass  # a missing or unreadable file is an error for the caller, not "no turn"
        state = SessionEvents(session_id=Path(path).parent.name)
        for record in AppendedLines(path).read(final=True):
            state.feed(record)
        turn = state.last_finished()
        if turn is None:
            what = "the last turn is still open" if state.busy else "it holds no finished turn"
            raise LookupError(f"{path}: {what}" if state.prompts else f"{path} holds no prompt "
                              "(is it a Copilot CLI events.jsonl?)")
        completion = Completion(tile=str(path), turn_id=state.turn_key(turn),
                                outcome=turn.outcome or "completed", signal="file", at=turn.ended_at or 0.0,
                                detail=turn.detail)
        if turn.outcome != "completed":
            raise LookupError(f"{path}: the last turn {turn.outcome} ({turn.detail}); it left no answer")
        return Response(completion=completion, text=turn.answer or "", source="transcript", cwd=state.cwd)

    # ---- the hooks -------------------------------------------------------------------------------

    async def hook_completion(self, record: HookRecord) -> Completion | None:
        """``agentStop`` (once per finished user turn; none after an interrupt): the turn that ended last in
        this pane's session. The hook names no turn, so the events are read for it (a moment later, when
        batched). ``notification`` is only logged: the events' ``permission.requested`` says the same."""
        payload = record.payload
        kind = hook_kind(payload)
        if kind is None:
            return None
        session = payload.get("sessionId")
        if not isinstance(session, str) or not await self._mine(record, session):
            return None
        if kind == "notification":
            log.info("%s: copilot asks: %s", self.ctx.name, payload.get("message") or payload.get("title"))
            return None
        stamp = payload.get("timestamp")
        at = stamp / 1000 if isinstance(stamp, int | float) else record.written_at
        deadline = time.monotonic() + ANSWER_WAIT_S
        while True:
            try:
                await self._refresh(force=self._state is None)
            except TmuxError:
                return None
            turn = self._ended_by(at)
            if turn is not None:
                return Completion(tile=self.ctx.name, turn_id=turn_id(session.lower(), turn.interaction_id),
                                  signal="hook", at=at, detail="agentStop hook")
            if time.monotonic() >= deadline:
                log.info("%s: an agentStop hook with no finished turn in the events; the file will tell",
                         self.ctx.name)
                return None
            await anyio.sleep(0.05)

    def _ended_by(self, at: float) -> Interaction | None:
        """The completed turn an agentStop hook fired at ``at`` is about."""
        state = self._state
        done = [t for t in state.finished() if t.outcome == "completed"] if state else []
        turn = done[-1] if done else None
        if turn is None or turn.ended_at is None:
            return None
        if not at - HOOK_SLACK_S <= turn.ended_at <= at + START_SLACK_S:
            return None
        return turn

    async def _mine(self, record: HookRecord, session: str) -> bool:
        """Whether a hook record is this tile's: its pane when the hook ran in one, else its session."""
        try:
            pane_id = (await self.ctx.pane()).pane_id
        except TmuxError:
            return False
        if record.pane:
            return record.pane == pane_id
        try:
            await self._refresh(force=self._state is None)
        except TmuxError:
            return False
        return self._state is not None and (self._state.session_id or "").lower() == session.lower()

    @classmethod
    def install_hooks(cls, hook_command: list[str]) -> str:
        return install_copilot_hooks(default_copilot_home(), shlex.join(hook_command))

    # ---- as a target -----------------------------------------------------------------------------

    async def target_state(self) -> TargetState:
        try:
            info = await self.ctx.pane()
            if info.dead:
                return "gone"
            if await self._refresh() is None:
                return "absent"
            screen = await self.ctx.capture()
        except (PaneGone, ServerGone):
            return "gone"
        self._looked = (time.monotonic(), screen)
        if self.waiting_for(screen) is not None:  # never type into an approval box: it would answer it
            return "busy"
        working, state = self.working_flag(), self._state
        if working or (state is not None and state.busy and working is not False) or self.is_busy(screen):
            return "busy"
        draft = input_draft(screen)
        if draft is None:
            return "busy"  # no input line: a dialog (folder trust), or Copilot starting
        return "draft" if draft else "ready"

    async def presence_state(self, info: PaneInfo) -> TargetState:
        """Asked every second: whether the pane runs copilot, from /proc alone (no screen, no files)."""
        found = await anyio.to_thread.run_sync(find_copilot_process, info.pid)
        return "ready" if found is not None else "absent"

    async def current_draft(self) -> str:
        try:
            return input_draft(await self.ctx.capture()) or ""
        except TmuxError:
            return ""

    async def received(self, text: str) -> bool | None:
        """After a crash mid-delivery: the events know whether ``text`` became a prompt."""
        try:
            await self._refresh(force=True)
        except TmuxError:
            return None
        if self._state is not None:
            return self._state.received(sanitize(text))
        if self._resolution is not None and self._resolution.session_dir is not None:
            return False  # the session has no events.jsonl yet: it never took a prompt
        return await super().received(text)

    async def snapshot(self) -> TurnMark:
        try:
            await self._refresh(force=True)
        except TmuxError:
            pass
        return TurnMark(source=str(self.events_path) if self.events_path else None,
                        count=self._state.prompts if self._state else 0,
                        screen=await self.ctx.capture() if self._state is None else None)

    async def turn_started(self, before: TurnMark) -> bool:
        """A ``user.message`` appended after the snapshot (the first prompt creates the file), or the
        session says it works; the screen only when no events can be found."""
        try:
            await self._refresh(force=self._state is None)
        except TmuxError:
            return False
        state = self._state
        if state is not None:
            if str(self.events_path) != before.source:
                return any(t.started_at >= before.at - START_SLACK_S for t in state.turns.values())
            if state.prompts > before.count:
                return True
        if self.working_flag():
            return True
        try:
            screen = strip_ansi(await self.ctx.capture())
        except TmuxError:
            return False
        return self.is_busy(screen) or (before.screen is not None and screen != strip_ansi(before.screen))

    # ---- the board -------------------------------------------------------------------------------

    _usage: EventsUsage | None = None

    async def usage(self) -> SessionUsage | None:
        path = self.events_path
        if path is None:
            return None
        if self._usage is None or self._usage.path != path:
            self._usage = EventsUsage(path)
        return await anyio.to_thread.run_sync(self._usage.read, abandon_on_cancel=True)

    async def working_since(self) -> float | None:
        try:
            await self._refresh()
        except TmuxError:
            return None
        state = self._state
        turn = state.turns.get(state.open) if state is not None and state.open else None
        return turn.started_at if turn is not None else None

    async def resolve(self) -> list[ResolveStep]:
        info = await self.ctx.pane()
        steps = [self.pane_step(info)]
        await self._refresh(force=True)
        res = self._resolution
        if self._process is None or res is None:
            steps.append(ResolveStep("process", False, f"no copilot process under pid {info.pid}"))
            return steps
        steps += res.steps
        state = self._state
        if state is not None and state.asking is not None:
            steps.append(ResolveStep("activity", True, f"waiting ({asked(state)})", asked(state)))
        elif (waiting := await self._looked_waiting()) is not None:
            steps.append(waiting)
        if state is not None:
            last = state.last_finished()
            steps.append(ResolveStep(
                "turn", True,
                f"busy: prompt {state.open}" if state.busy
                else f"idle; last turn {last.interaction_id} {last.outcome}" if last
                else "idle, no finished turn",
                {"session": state.session_id, "busy": state.busy}))
        return steps

    async def _looked_waiting(self) -> ResolveStep | None:
        """The ``activity`` step of the screen this look's :meth:`target_state` read (within
        :data:`LOOK_REUSE_S`), else of the screen now: one look reads one screen. Read twice, a dialog that
        closed between the two reads made the row ``working`` — busy for the dialog, and no dialog for the
        activity — a state Copilot was not in: the folder-trust dialog closes straight to the idle input."""
        looked, self._looked = self._looked, None
        if looked is None or time.monotonic() - looked[0] > LOOK_REUSE_S:
            return await self.waiting_step()
        reason = self.waiting_for(looked[1])
        return ResolveStep("activity", True, f"waiting ({reason})", reason) if reason else None


@hookimpl
def register_agents(register: RegisterAgent) -> None:
    register(CopilotAdapter)
