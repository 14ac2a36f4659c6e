"""Codex: completions and clean answers from its rollout files, busy state from the rollout, the screen last.

The pane's rollout is found by :mod:`plugins.codex.resolve`, read incrementally by
:mod:`plugins.codex.reader`, and watched through the shared watcher (``$CODEX_HOME/sessions``: the rollout
appears only at the first prompt). A turn ends at ``task_complete`` (outcome ``failed`` when it carries an
error) or ``turn_aborted``; its answer is ``task_complete.last_agent_message``, else the turn's last
assistant message, else the hook's text, else the screen. Codex's ``notify`` program is a second signal:
in daemon mode it runs with the daemon's environment, so it is matched to the tile by thread id, and it
carries the same turn id as the rollout, so the detector keeps one of the two.
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from pipeline.plugin.agents import Emit, ResolveStep, TargetState
from pipeline.plugin.events import Completion, Response
from pipeline.plugin.markers import hookimpl
from pipeline.plugin.turns import TurnEnd
from pipeline.spool import HookRecord
from pipeline.system.text import strip_ansi
from pipeline.system.tmux import PaneGone, ServerGone, TmuxError
from plugins.codex.hooks import install_notify, notify_turn
from plugins.codex.reader import ROLLOUT_NAME, JsonlTail, RolloutState, Turn, thread_id_of
from plugins.codex.resolve import (
    CodexProcess,
    default_codex_home,
    find_codex_process,
    resolve_rollout,
)
from plugins.codex.screen import composer_draft, strip_furniture
from plugins.terminal.adapter import TerminalAdapter

__all__ = ["CodexAdapter"]

log = logging.getLogger("batonpass")

#: while no rollout is known, look again this often even without a file hint (a new process, say)
UNRESOLVED_RECHECK_S = 2.0
#: with a rollout, check that the pane still runs the same codex this often
RESOLVED_RECHECK_S = 5.0
#: resolution is not cheap (sqlite, folder listings): at most this often when asked in a tight loop
RESOLVE_MIN_INTERVAL_S = 0.25
#: a turn that wrote nothing for this long, with no busy marker on screen, is not trusted to be running
STALE_BUSY_S = 1800.0
#: how long an answer may be waited for when a hook reported the turn before the rollout did
ANSWER_WAIT_S = 1.0
#: a turn started this little before a snapshot still counts as started after it (clock granularity)
START_SLACK_S = 1.0


@dataclass
class _Snapshot:
    rollout: Path | None
    turn_starts: int
    screen: str
    at: float
    wall: float


class CodexAdapter(TerminalAdapter):
    name = "codex"
    summary = "OpenAI Codex CLI: completions and answers from its rollout files"
    process_names = frozenset({"codex"})
    submit_delay_s = 0.2
    confirm_timeout_s = 8.0
    # SPEC §6: nothing shows while the answer streams; the rollout says busy, the screen only helps
    busy_markers = ("esc to interrupt",)
    input_line = re.compile(r"^›\s?(.*)$")
    placeholders = ("Ask Codex to do anything",)
    quiet_s = 2.0

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._lock = anyio.Lock()
        self._process: CodexProcess | None = None
        self._resolved_at = 0.0
        self._resolved_wall = 0.0
        self._orphans: list[Turn] = []
        self._tail: JsonlTail | None = None
        self._state: RolloutState | None = None
        self._foreign: set[Path] = set()
        self._process_checked = 0.0
        #: a new rollout is followed: the engine is told (ctx.resolved) and asks finished_turns
        self._switched = False

    # ---- keeping up with the pane's rollout ------------------------------------------------------------

    @property
    def rollout(self) -> Path | None:
        return self._tail.path if self._tail else None

    @property
    def state(self) -> RolloutState | None:
        return self._state

    async def _refresh(self, hints: set[Path] | None = None, *, force: bool = False) -> CodexProcess | None:
        """Bring the rollout state up to date: the pane's codex, its rollout (resolved when unknown, or
        when a prompt batonpass typed went to a rollout other than the known one), its new lines.
        Resolution is throttled unless ``force``."""
        async with self._lock:
            info = await self.ctx.pane()
            now = time.monotonic()
            process = self._process
            if process is None or now - self._process_checked > RESOLVED_RECHECK_S or not process.alive():
                self._process_checked = now
                process = await anyio.to_thread.run_sync(find_codex_process, info.pid)
                if process is None or self._process is None or process.key != self._process.key:
                    self._switch(None)
                    self._process = process
            if process is None:
                return None
            new_files = {
                p for p in hints or () if ROLLOUT_NAME.match(p.name) and p != self.rollout
            } - self._foreign
            unconfirmed = (self.last_prompt is not None and self.prompt_sent_at > self._resolved_wall
                           and self._state is not None and not self._state.received(self.last_prompt))
            due = force or now - self._resolved_at > RESOLVE_MIN_INTERVAL_S
            if due and (self._tail is None or (new_files and unconfirmed)):
                await self._resolve(process)
                self._foreign |= {p for p in new_files if p != self.rollout}
            if self._tail is not None and self._state is not None:
                for record in self._tail.read():
                    self._state.feed(record)
            return process

    async def _resolve(self, process: CodexProcess) -> None:
        info = await self.ctx.pane()
        resolution = await anyio.to_thread.run_sync(
            lambda: resolve_rollout(info.pid, self.last_prompt, self.prompt_sent_at, process=process))
        self._resolved_at, self._resolved_wall = time.monotonic(), time.time()
        if resolution.rollout is not None and resolution.rollout != self.rollout:
            log.info("%s: codex rollout %s (rule: %s)", self.ctx.name, resolution.rollout, resolution.rule)
            self._switch(resolution.rollout)

    def _switch(self, path: Path | None) -> None:
        """Follow ``path`` from now on. Turns of the old rollout still unread are read first (a
        ``codex exec`` may exit right after its last line); of the new one's finished turns, only the
        finished turns are the engine's to catch up on (:meth:`finished_turns`), not news."""
        if self._tail is not None and self._state is not None:
            for record in self._tail.read(final=True):
                self._state.feed(record)
            self._orphans += self._state.take_finished()
        if path is None:
            self._tail = self._state = None
            return
        self._tail, self._state = JsonlTail(path), RolloutState(thread_id=thread_id_of(path))
        for record in self._tail.read():
            self._state.feed(record)
        self._state.keep_recent_finished(0)
        self._switched = True

    def _completion(self, turn: Turn, signal: str) -> Completion:
        detail = turn.error or ""
        return Completion(tile=self.ctx.name, turn_id=turn.turn_id, outcome=turn.outcome or "completed",
                          signal=signal, at=turn.finished_at or time.time(), detail=detail)

    async def follow(self, emit: Emit) -> None:
        watcher = self.ctx.watcher
        sub = None
        hints: set[Path] = set()
        try:
            while True:
                try:
                    process = await self._refresh(hints)
                except (PaneGone, ServerGone):
                    process = None
                hints = set()
                if self._switched:
                    self._switched = False
                    await self.ctx.resolved()
                finished = list(self._orphans) + (self._state.take_finished() if self._state else [])
                self._orphans = []
                for turn in finished:
                    await emit(self._completion(turn, "rollout"))
                sessions = Path(os.path.abspath(process.codex_home / "sessions")) if process else None
                if watcher is not None and sessions is not None and (sub is None or sub.path != sessions):
                    if sub is not None:
                        sub.close()
                    sub = watcher.subscribe(sessions)
                    continue  # read again: lines written before the subscription began
                timeout = UNRESOLVED_RECHECK_S if self._tail is None else RESOLVED_RECHECK_S
                if sub is not None:
                    hints = await sub.wait(timeout)
                else:
                    await anyio.sleep(0.5)  # no shared watcher (outside the daemon)
        finally:
            if sub is not None:
                sub.close()

    async def finished_turns(self, since: float) -> list[TurnEnd] | None:
        """The turns of the pane's rollout that finished at or after ``since``."""
        try:
            await self._refresh(force=True)
        except (PaneGone, ServerGone):
            return []
        state = self._state
        if state is None:
            return []
        return [
            TurnEnd(
                turn_id=t.turn_id,
                outcome=t.outcome,
                text=t.answer or "",
                ended_at=t.finished_at or time.time(),
                session_id=state.thread_id,
                cwd=state.cwd,
                detail=t.error or "",
            )
            for t in state.turns.values()
            if t.outcome is not None and (t.finished_at or time.time()) >= since
        ]

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
        turn = await self._turn(completion.turn_id, ANSWER_WAIT_S if completion.signal != "rollout" else 0.0)
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
        turn = self._state.last_finished() if self._state is not None else None
        if turn is None or turn.answer is None:
            return None
        return Response(completion=self._completion(turn, "rollout"), text=turn.answer, source="transcript",
                        cwd=self._state.cwd, note=turn.answer_from)

    @classmethod
    def extract_file(cls, path: Path) -> Response | None:
        with open(path, "rb"):
            pass  # a missing or unreadable file is an error for the caller, not "no turn"
        state = RolloutState(thread_id=thread_id_of(path))
        for record in JsonlTail(path).read(final=True):
            state.feed(record)
        turn = state.last_finished()
        if turn is None:
            return None
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
            if await self._refresh() is None:
                return "absent"
            screen = await self.ctx.tmux.capture(info.pane_id, escapes=True)
        except (PaneGone, ServerGone):
            return "gone"
        busy_on_screen = self.is_busy(strip_ansi(screen))
        state = self._state
        if state is not None and state.busy:
            fresh = state.last_activity is None or time.time() - state.last_activity < STALE_BUSY_S
            if fresh or busy_on_screen:
                return "busy"
        if busy_on_screen:
            return "busy"
        draft = composer_draft(screen, self.placeholders)
        if draft is None:
            return "busy"  # no input line: Codex is starting, or a dialog is open
        return "draft" if draft else "ready"

    async def current_draft(self) -> str:
        try:
            return composer_draft(await self.ctx.capture(escapes=True), self.placeholders) or ""
        except TmuxError:
            return ""

    async def received(self, text: str) -> bool | None:
        """After a crash mid-delivery: the rollout knows whether ``text`` became a prompt."""
        try:
            await self._refresh(force=True)
        except TmuxError:
            return None
        if self._state is None:
            return await super().received(text)
        return self._state.received(text)

    async def snapshot(self) -> Any:
        try:
            await self._refresh(force=True)
        except TmuxError:
            pass
        return _Snapshot(
            self.rollout,
            self._state.turn_starts if self._state else 0,
            await self.ctx.capture(),
            time.monotonic(),
            time.time(),
        )

    async def turn_started(self, before: Any) -> bool:
        """A ``task_started`` (or older ``user_message``) appended after the snapshot; the screen only
        when no rollout can be found at all."""
        try:
            await self._refresh()
        except TmuxError:
            return False
        state = self._state
        if state is not None:
            if self.rollout != before.rollout:  # the first prompt made the rollout (or a new thread began)
                return any(t.started_at is not None and t.started_at >= before.wall - START_SLACK_S
                           for t in state.turns.values())
            if state.turn_starts > before.turn_starts:
                return True
        if self._tail is None and time.monotonic() - before.at > 2.0:
            screen = await self.ctx.capture()
            return self.is_busy(screen) or screen != before.screen
        return False

    async def resolve(self) -> list[ResolveStep]:
        info = await self.ctx.pane()
        steps = [
            ResolveStep(
                "pane",
                True,
                f"{self.ctx.tile.pane} -> {info.pane_id} ({info.address}), pid {info.pid}",
                {"pane_id": info.pane_id, "pid": info.pid},
            )
        ]
        resolution = await anyio.to_thread.run_sync(
            lambda: resolve_rollout(info.pid, self.last_prompt, self.prompt_sent_at))
        steps += resolution.steps
        if resolution.rollout is not None:
            state = RolloutState(thread_id=resolution.thread_id)
            tail = JsonlTail(resolution.rollout)
            for record in tail.read():
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


@hookimpl
def register_agents(register) -> None:
    register(CodexAdapter)
