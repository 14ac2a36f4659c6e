"""Codex: completions and clean answers from its rollout files, busy state from the rollout, the screen last.

The pane's rollout is found by :mod:`plugins.codex.resolve`, read incrementally by
:mod:`plugins.codex.reader`, and watched through the shared watcher (``$CODEX_HOME/sessions``: the rollout
appears only at the first prompt). A turn ends at ``task_complete`` (outcome ``failed`` when it carries an
error) or ``turn_aborted``; its answer is ``task_complete.last_agent_message``, else the turn's last
assistant message, else the hook's text, else the screen. Codex's ``notify`` program is a second signal:
in daemon mode it runs with the daemon's environment, so it is matched to the tile by thread id, and it
carries the same turn id as the rollout, so the detector keeps one of the two.

Following the rollout (and the idle rule of Codex before ~0.104) is :mod:`plugins.codex.follow`'s; this
module adds the answers, the notify hook, the target side and ``baton resolve`` / ``baton extract``.
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
from pipeline.plugin.tools import json_head, strip_ansi
from pipeline.plugin.turns import TurnMark
from pipeline.plugin.usage import SessionUsage
from plugins.codex.follow import RolloutFollowing
from plugins.codex.hooks import install_notify, notify_turn
from plugins.codex.reader import JsonlTail, thread_id_of
from plugins.codex.resolve import (
    default_codex_home,
    resolve_rollout,
)
from plugins.codex.screen import (
    approval_answer,
    approval_prompt,
    approval_question,
    composer_draft,
    paste_placeholder,
    strip_furniture,
)
from plugins.codex.turns import RolloutState, Turn
from plugins.codex.usage import RolloutUsage

__all__ = ["CodexAdapter"]

#: a turn that wrote nothing for this long, with no busy marker on screen, is not trusted to be running
STALE_BUSY_S = 1800.0
#: how long an answer may be waited for when a hook reported the turn before the rollout did
ANSWER_WAIT_S = 1.0
#: a turn started this little before a snapshot still counts as started after it (clock granularity)
START_SLACK_S = 1.0
#: older Codex: an open turn with no answer (an interrupt there writes nothing) and nothing written for this
#: long is not trusted to be running unless the screen says so, or hand-offs to it would wait STALE_BUSY_S
PROVISIONAL_STALE_S = 60.0


#: the ``type`` of a rollout line (docs/agents.md, Codex)
ROLLOUT_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})


class CodexAdapter(RolloutFollowing):
    name = "codex"
    readiness_screen = (True, None, None)  # the colours tell the placeholder from a draft
    summary = "OpenAI Codex CLI: completions and answers from its rollout files"
    file_kind = "a Codex rollout"
    process_names = frozenset({"codex"})
    submit_delay_s = 0.2
    confirm_timeout_s = 8.0
    # nothing shows while the answer streams (docs/agents.md, Codex): the rollout says busy, the screen helps
    busy_markers = ("esc to interrupt",)
    input_line = re.compile(r"^›\s?(.*)$")
    placeholders = ("Ask Codex to do anything",)
    quiet_s = 2.0

    # ---- answers -----------------------------------------------------------------------------------------

    async def _turn(self, turn_id: str, wait_s: float = 0.0) -> Turn | None:
        """The finished turn ``turn_id`` from the rollout, waiting up to ``wait_s`` for its last line."""
        deadline = time.monotonic() + wait_s
        sub = (
            self.ctx.watcher.subscribe(self.rollout)
            if wait_s > 0 and self.ctx.watcher and self.rollout
            else None
        )
        try:
            while True:
                try:
                    await self._refresh()
                except TmuxError:
                    pass
                turn = self._state.turn(turn_id) if self._state else None
                if (turn is not None and turn.outcome is not None) or time.monotonic() >= deadline:
                    return turn
                if sub is not None:
                    await sub.wait(deadline - time.monotonic())
                else:
                    await anyio.sleep(0.05)
        finally:
            if sub is not None:
                sub.close()

    async def response(self, completion: Completion) -> Response | None:
        # a turn the rollout reported is there already; `baton status`/`preview` ask for none in particular
        wait_s = 0.0 if completion.signal in ("rollout", "preview") else ANSWER_WAIT_S
        turn = await self._turn(completion.turn_id, wait_s)
        if turn is not None and turn.answer is not None:
            return Response(completion=completion, text=turn.answer, source="transcript",
                            cwd=self._state.cwd if self._state else None,
                            note=f"{turn.answer_from} in {self.rollout}")
        if completion.text is not None:
            return Response(completion=completion, text=completion.text, source="hook",
                            note="the rollout has no answer for this turn; the notify hook's text")
        screen = await super().response(completion)
        if screen is None:
            return None
        return Response(completion=completion, text=strip_furniture(screen.text), source="terminal",
                        note="neither the rollout nor a hook had the answer")

    async def last_response(self) -> Response | None:
        await self._refresh(force=True)
        state = self._state
        turn = state.last_finished() if state is not None else None
        if state is None or turn is None or turn.answer is None:
            return None
        return Response(completion=self._completion(turn, "rollout"), text=turn.answer, source="transcript",
                        cwd=state.cwd, note=turn.answer_from)

    @classmethod
    def recognizes_file(cls, path: Path) -> bool:
        """A rollout's lines are ``{timestamp, type, payload}`` (``session_meta`` first); one of Codex
        before 0.30 starts with ``{id, timestamp, instructions}`` (docs/agents.md, Codex)."""
        head = json_head(path)
        if head and {"id", "timestamp", "instructions"} <= head[0].keys():
            return True
        return any(r.get("type") in ROLLOUT_TYPES and isinstance(r.get("payload"), dict) for r in head)

    @classmethod
    def extract_file(cls, path: Path, **options: Any) -> Response | None:
        with open(path, "rb"):
            pass  # a missing or unreadable file is an error for the caller, not "no turn"
        state = RolloutState(thread_id=thread_id_of(path))
        for record in JsonlTail(path).read(final=True):
            state.feed(record)
        state.settle("the file ends")  # older Codex: the file read after the fact ends with the answer
        turn = state.last_finished()
        if turn is None:
            raise LookupError(_nothing_finished(path, state))
        completion = Completion(tile=str(path), turn_id=turn.turn_id, outcome=turn.outcome or "completed",
                                signal="file", at=turn.finished_at or 0.0, detail=turn.error or "")
        if turn.answer is None:
            raise LookupError(f"{path}: the last turn ({turn.turn_id}) {turn.outcome}"
                              f"{': ' + turn.error if turn.error else ''}; it left no answer")
        return Response(completion=completion, text=turn.answer, source="transcript", cwd=state.cwd,
                        note=turn.answer_from)

    # ---- the notify hook -----------------------------------------------------------------------------

    async def hook_completion(self, record: HookRecord) -> Completion | None:
        """Codex's ``notify`` (``agent-turn-complete``) or a trusted ``hooks.json`` Stop hook. In daemon
        mode ``record.pane`` is the daemon's, not this pane's: the thread id decides."""
        parsed = notify_turn(record.payload)
        if parsed is None:
            return None
        thread, turn_id, text = parsed
        try:
            await self._refresh(force=self._tail is None)
        except TmuxError:
            return None
        if self._state is None or thread not in (self._state.thread_id, thread_id_of(self.rollout or "")):
            return None
        turn = self._state.turn(turn_id)
        return Completion(tile=self.ctx.name, turn_id=turn_id,
                          outcome=turn.outcome if turn is not None and turn.outcome else "completed",
                          signal="notify", at=record.written_at, text=text, detail=f"thread {thread}")

    @classmethod
    def install_hooks(cls, hook_command: list[str]) -> str:
        return install_notify(default_codex_home() / "config.toml", hook_command)

    # ---- as a target -----------------------------------------------------------------------------------

    async def target_state(self) -> TargetState:
        try:
            info = await self.ctx.pane()
            if info.dead:
                return "gone"
            if await self._refresh(recheck=False) is None:
                return "absent"
            screen = await self.ctx.capture(escapes=True)
        except (PaneGone, ServerGone):
            return "gone"
        if self.waiting_for(screen) is not None:  # never type into an approval dialog: it would answer it
            return "busy"
        busy_on_screen = self.is_busy(strip_ansi(screen))
        state = self._state
        if state is not None and state.busy:
            fresh = state.last_activity is None or time.time() - state.last_activity < STALE_BUSY_S
            if state.provisional is not None and time.monotonic() - self._fed_at >= PROVISIONAL_STALE_S:
                fresh = False
            if fresh or busy_on_screen:
                return "busy"
        if busy_on_screen:
            return "busy"
        draft = composer_draft(screen, self.placeholders)
        if draft is None:
            return "busy"  # no input line: Codex is starting, or a dialog is open
        return "draft" if draft else "ready"

    def waiting_for(self, screen: str) -> str | None:
        return approval_prompt(screen)

    def asks(self, screen: str) -> str | None:
        return approval_question(screen)

    def answer_keys(self, screen: str, approve: bool) -> list[str] | None:
        return approval_answer(screen, approve)

    async def current_draft(self) -> str:
        try:
            return composer_draft(await self.ctx.capture(escapes=True), self.placeholders) or ""
        except TmuxError:
            return ""

    def shows_paste(self, draft: str, text: str) -> bool:
        return paste_placeholder(draft, text) or super().shows_paste(draft, text)

    async def received(self, text: str) -> bool | None:
        """After a crash mid-delivery: the rollout knows whether ``text`` became a prompt."""
        try:
            await self._refresh(force=True)
        except TmuxError:
            return None
        if self._state is None:
            return await super().received(text)
        return self._state.received(text)

    async def snapshot(self) -> TurnMark:
        try:
            await self._refresh(force=True)
        except TmuxError:
            pass
        return TurnMark(
            source=str(self.rollout) if self.rollout is not None else None,
            count=self._state.turn_starts if self._state else 0,
            screen=await self.ctx.capture() if self._tail is None else None,  # only without a rollout
        )

    async def turn_started(self, before: TurnMark) -> bool:
        """A ``task_started`` (or older ``user_message``) appended after the snapshot; the screen only
        when no rollout can be found at all."""
        try:
            await self._refresh()
        except TmuxError:
            return False
        state = self._state
        if state is not None:
            rollout = str(self.rollout) if self.rollout is not None else None
            if rollout != before.source:  # the first prompt made the rollout (or a new thread began)
                return any(t.started_at is not None and t.started_at >= before.at - START_SLACK_S
                           for t in state.turns.values())
            if state.turn_starts > before.count:
                return True
        if self._tail is None and time.time() - before.at > 2.0:
            screen = await self.ctx.capture()
            return self.is_busy(screen) or (before.screen is not None and screen != before.screen)
        return False

    _resolve_view: tuple[JsonlTail, RolloutState] | None = None
    _usage: RolloutUsage | None = None

    async def usage(self) -> SessionUsage | None:
        rollout = self.rollout or (self._resolve_view[0].path if self._resolve_view else None)
        if rollout is None:
            return None
        if self._usage is None or self._usage.path != rollout:
            self._usage = RolloutUsage(rollout)
        return await anyio.to_thread.run_sync(self._usage.read, abandon_on_cancel=True)

    async def working_since(self) -> float | None:
        """The running turn's start: its ``task_started`` line's timestamp (older Codex: its prompt's)."""
        try:
            await self._refresh()
        except TmuxError:
            return None
        state = self._state
        turn = state.turns.get(state.open_turn) if state is not None and state.open_turn else None
        return turn.started_at if turn is not None else None

    async def resolve(self) -> list[ResolveStep]:
        info = await self.ctx.pane()
        steps = [self.pane_step(info)]
        waiting = await self.waiting_step()  # the rollout does not record an approval request (screen.py)
        if waiting is not None:
            steps.append(waiting)
        resolution = await anyio.to_thread.run_sync(
            lambda: resolve_rollout(info.pid, self.last_prompt, self.prompt_sent_at))
        steps += resolution.steps
        if resolution.rollout is not None:
            view = self._resolve_view
            if view is None or view[0].path != resolution.rollout:  # read as it grows: the board asks often
                view = (JsonlTail(resolution.rollout), RolloutState(thread_id=resolution.thread_id))
                self._resolve_view = view
            tail, state = view
            for record in await anyio.to_thread.run_sync(tail.read):
                state.feed(record)
            last = state.last_finished()
            steps.append(
                ResolveStep(
                    "turn",
                    True,
                    ("busy: turn " + str(state.open_turn))
                    if state.busy
                    else f"idle; last turn {last.turn_id} {last.outcome} ({last.answer_from})"
                    if last
                    else "idle, no finished turn",
                    {"thread": state.thread_id, "busy": state.busy},
                )
            )
        return steps


def _nothing_finished(path: Path, state: RolloutState) -> str:
    """Why a rollout holds no finished turn, in words for ``baton extract``."""
    if state.turn_starts == 0:
        if state.lines == 0:
            return f"{path} holds no turn: it has no JSON lines (is it a Codex rollout?)"
        return f"{path} holds no turn: no prompt was written to it"
    if state.busy:
        what = "no answer on disk yet" if state.provisional is not None else "no task_complete on disk yet"
        return f"{path}: the last turn is still open ({what})"
    return f"{path} holds no finished turn"


@hookimpl
def register_agents(register: RegisterAgent) -> None:
    register(CodexAdapter)
