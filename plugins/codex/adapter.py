"""Codex: completions and clean answers from its rollout files, busy state from the rollout, the screen last.

The pane's rollout is found by :mod:`plugins.codex.resolve`, read incrementally by
:mod:`plugins.codex.reader`, and watched through the shared watcher (``$CODEX_HOME/sessions``: the rollout
appears only at the first prompt). A turn ends at ``task_complete`` (outcome ``failed`` when it carries an
error) or ``turn_aborted``; its answer is ``task_complete.last_agent_message``, else the turn's last
assistant message, else the hook's text, else the screen. Codex's ``notify`` program is a second signal:
in daemon mode it runs with the daemon's environment, so it is matched to the tile by thread id, and it
carries the same turn id as the rollout, so the detector keeps one of the two.

Codex before ~0.104 (and the legacy format) writes no end of turn: a turn ends at the next prompt, and the
last one when the session goes idle — its newest item is an assistant message, the rollout has been quiet
for :data:`IDLE_QUIET_S` and the screen shows no busy marker — or when the pane's codex exits (those
versions ran no daemon: the TUI itself wrote the rollout). See docs/agent-versions.md.
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

from pipeline.plugin import RegisterAgent
from pipeline.plugin.agents import Emit, ResolveStep, TargetState
from pipeline.plugin.events import Completion, Response
from pipeline.plugin.markers import hookimpl
from pipeline.plugin.turns import TurnEnd
from pipeline.plugin.usage import SessionUsage
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
from plugins.codex.usage import RolloutUsage
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
#: older Codex (no task events): a turn whose newest item is an answer ends once the rollout stayed this
#: quiet with no busy marker on screen. The answer's item is written whole (nothing while it streams); a
#: tool call after it comes in the same response, and while one streams the screen shows it is working.
IDLE_QUIET_S = 5.0
#: while the screen still says busy after that, look again this often
IDLE_RECHECK_S = 1.0
#: older Codex: an open turn with no answer (an interrupt there writes nothing) and nothing written for this
#: long is not trusted to be running unless the screen says so, or hand-offs to it would wait STALE_BUSY_S
PROVISIONAL_STALE_S = 60.0


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
        #: when the rollout last grew (monotonic): older Codex's last turn ends when it stays quiet
        self._fed_at = 0.0

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
                records, now = self._tail.read(), time.time()
                if records:
                    self._fed_at = time.monotonic()
                for record in records:
                    self._state.feed(record, now)
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
                self._state.feed(record, time.time())
            if path is None:  # the pane's codex is gone: older Codex's open turn ended with it
                self._state.settle("the codex process exited before the turn ended", gone=True)
            self._orphans += self._state.take_finished()
        if path is None:
            self._tail = self._state = None
            return
        self._tail, self._state = JsonlTail(path), RolloutState(thread_id=thread_id_of(path))
        for record in self._tail.read():
            self._state.feed(record)
        self._state.keep_recent_finished(0)
        try:
            self._fed_at = time.monotonic() - max(0.0, time.time() - os.stat(path).st_mtime)
        except OSError:
            self._fed_at = time.monotonic()
        self._switched = True

    def _idle_wait(self) -> float | None:
        """How long until an older Codex's answered open turn may be settled; None when there is none."""
        turn = self._state.provisional if self._state is not None else None
        if turn is None or not turn.answered:
            return None
        return max(IDLE_RECHECK_S, IDLE_QUIET_S - (time.monotonic() - self._fed_at))

    async def _settle_idle(self) -> None:
        """End an older Codex's open turn when the session went idle after its answer (see the module doc)."""
        state = self._state
        turn = state.provisional if state is not None else None
        if (
            state is None
            or turn is None
            or not turn.answered
            or time.monotonic() - self._fed_at < IDLE_QUIET_S
        ):
            return
        try:
            busy = self.is_busy(strip_ansi(await self.ctx.capture()))
        except TmuxError:
            busy = False
        if not busy:
            state.settle("the session went idle after the answer")

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
                if process is not None:
                    await self._settle_idle()
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
                timeout = min(timeout, self._idle_wait() or timeout)
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
            if await self._refresh(force=True) is not None:
                await self._settle_idle()
        except (PaneGone, ServerGone):
            return []
        state = self._state
        if state is None:
            return []
        finished = [t for t in state.turns.values() if t.outcome is not None]
        try:
            written = os.stat(self.rollout).st_mtime if self.rollout else time.time()
        except OSError:
            written = time.time()

        def ended(turn: Turn) -> float:
            """A legacy line has no time: the newest turn ended when the file was last written, the others
            no later than the session began (so old history is never taken for news)."""
            if turn.finished_at is not None:
                return turn.finished_at
            return written if turn is finished[-1] else (state.started_at or 0.0)

        return [TurnEnd(turn_id=t.turn_id, outcome=t.outcome, text=t.answer or "", ended_at=ended(t),
                        session_id=state.thread_id, cwd=state.cwd, detail=t.error or "")
                for t in finished if t.outcome is not None and ended(t) >= since]

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
    def extract_file(cls, path: Path) -> Response | None:
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
            if await self._refresh() is None:
                return "absent"
            screen = await self.ctx.tmux.capture(info.pane_id, escapes=True)
        except (PaneGone, ServerGone):
            return "gone"
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

    _resolve_view: tuple[JsonlTail, RolloutState] | None = None
    _usage: RolloutUsage | None = None

    async def usage(self) -> SessionUsage | None:
        rollout = self.rollout or (self._resolve_view[0].path if self._resolve_view else None)
        if rollout is None:
            return None
        if self._usage is None or self._usage.path != rollout:
            self._usage = RolloutUsage(rollout)
        return await anyio.to_thread.run_sync(self._usage.read, abandon_on_cancel=True)

    async def resolve(self) -> list[ResolveStep]:
        info = await self.ctx.pane()
        steps = [self.pane_step(info)]
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
