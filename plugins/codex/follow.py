"""Following one Codex tile's rollout: the pane's codex process, its rollout (re-resolved when it changes),
the lines appended to it, and the turns that end in it.

The rollout is found by :mod:`plugins.codex.resolve` and watched through the shared watcher
(``$CODEX_HOME/sessions``: the rollout appears only at the first prompt). A turn ends at ``task_complete``
(outcome ``failed`` when it carries an error) or ``turn_aborted``.

Codex before ~0.104 (and the legacy format) writes no end of turn: a turn ends at the next prompt, and the
last one when the session goes idle — its newest item is an assistant message, the rollout has been quiet
for :data:`IDLE_QUIET_S` and the screen shows no busy marker — or when the pane's codex exits (those
versions ran no daemon: the TUI itself wrote the rollout). See docs/agent-versions.md.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from pipeline.plugin import PaneGone, ServerGone, TmuxError
from pipeline.plugin.agents import Emit
from pipeline.plugin.events import Completion
from pipeline.plugin.screen import ScreenAdapter
from pipeline.plugin.tools import proc, strip_ansi
from pipeline.plugin.turns import TurnEnd
from plugins.codex.reader import ROLLOUT_NAME, JsonlTail, thread_id_of
from plugins.codex.resolve import (
    CodexProcess,
    find_codex_process,
    resolve_rollout,
)
from plugins.codex.turns import RolloutState, Turn

if TYPE_CHECKING:
    from pipeline.plugin.tools import Subscription

__all__ = ["RolloutFollowing"]

log = logging.getLogger("batonpass")

#: while no rollout is known and a file event may not say when one is (no codex in the pane yet, no pidfd
#: for its exit, a prompt typed here not found yet, threads too close to tell apart), look again this often
UNRESOLVED_RECHECK_S = 2.0
#: with a rollout, check that the pane still runs the same codex this often (where its exit cannot be
#: waited for: no pidfds)
RESOLVED_RECHECK_S = 5.0
#: resolution is not cheap (sqlite, folder listings): at most this often when asked in a tight loop
RESOLVE_MIN_INTERVAL_S = 0.25
#: older Codex (no task events): a turn whose newest item is an answer ends once the rollout stayed this
#: quiet with no busy marker on screen. The answer's item is written whole (nothing while it streams); a
#: tool call after it comes in the same response, and while one streams the screen shows it is working.
IDLE_QUIET_S = 5.0
#: while the screen still says busy after that, look again this often
IDLE_RECHECK_S = 1.0
#: while a turn is open, how often the screen is read for an approval prompt (the rollout records none)
LOOK_S = 0.5


class RolloutFollowing(ScreenAdapter):
    """The part of the Codex adapter that keeps up with the pane's rollout and reports its finished turns."""

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._lock = anyio.Lock()
        self._process: CodexProcess | None = None
        self._resolved_at = 0.0
        self._resolved_wall = 0.0
        #: the last resolution's rule ("ambiguous": threads too close in time to tell apart)
        self._resolved_rule = ""
        #: a file event asked for a resolution the throttle put off
        self._resolve_put_off = False
        self._orphans: list[Turn] = []
        self._tail: JsonlTail | None = None
        self._state: RolloutState | None = None
        #: other panes' rollouts (a resolution did not pick them): their writes wake nobody here
        self._foreign: set[Path] = set()
        #: the prompt found in the followed rollout (its time, and the state it was found in): asked on every
        #: write by any pane, so the answer is kept instead of searched for again
        self._confirmed: tuple[float, RolloutState] | None = None
        self._process_checked = 0.0
        #: a new rollout is followed: the engine is told (ctx.resolved) and asks finished_turns
        self._switched = False
        #: when the rollout last grew (monotonic): older Codex's last turn ends when it stays quiet
        self._fed_at = 0.0
        #: the follower's subscription to the sessions folder (the engine's watcher), while it follows
        self._sub: Subscription | None = None
        #: the codex (pid, start ticks) whose exit wakes the follower (a pidfd), and that watch's scope
        self._exit_watched: tuple[int, int] | None = None
        self._exit_scope: anyio.CancelScope | None = None

    # ---- keeping up with the pane's rollout ------------------------------------------------------------

    @property
    def rollout(self) -> Path | None:
        return self._tail.path if self._tail else None

    @property
    def state(self) -> RolloutState | None:
        return self._state

    async def _refresh(self, hints: set[Path] | None = None, *, force: bool = False,
                       recheck: bool = True) -> CodexProcess | None:
        """Bring the rollout state up to date: the pane's codex, its rollout (resolved when unknown, or
        when a prompt batonpass typed went to a rollout other than the known one), its new lines.
        Resolution is throttled unless ``force``; ``recheck=False`` keeps a known codex that is still
        alive without the periodic look at the pane's processes (a worker thread: not on a hand-off's
        way to the paste)."""
        async with self._lock:
            now = time.monotonic()
            process = self._process
            recheck_due = (recheck and now - self._process_checked > RESOLVED_RECHECK_S
                           and (process is None or process.key != self._exit_watched))
            if process is None or recheck_due or not process.alive():
                info = await self.ctx.pane()  # only then: a tmux round trip is the dearest part of a look
                self._process_checked = now
                process = await anyio.to_thread.run_sync(find_codex_process, info.pid)
                if process is None or self._process is None or process.key != self._process.key:
                    self._switch(None)
                    self._process = process
                    self._foreign.clear()  # a new codex may resume a thread another pane wrote
            self._resolve_put_off = False
            if process is None:
                self._tell_watcher()
                return None
            new_files = {
                p for p in hints or () if ROLLOUT_NAME.match(p.name) and p != self.rollout
            } - self._foreign
            unconfirmed = self._prompt_unconfirmed()
            due = force or now - self._resolved_at > RESOLVE_MIN_INTERVAL_S
            if self._tail is None or (new_files and unconfirmed):
                if due:
                    await self._resolve(process)
                    self._foreign |= {p for p in new_files if p != self.rollout}
                self._resolve_put_off = not due
            if self._tail is not None and self._state is not None:
                records, now = self._tail.read(), time.time()
                if records:
                    self._fed_at = time.monotonic()
                for record in records:
                    self._state.feed(record, now)
            self._tell_watcher()
            return process

    async def _resolve(self, process: CodexProcess) -> None:
        info = await self.ctx.pane()
        resolution = await anyio.to_thread.run_sync(
            lambda: resolve_rollout(info.pid, self.last_prompt, self.prompt_sent_at, process=process))
        self._resolved_at, self._resolved_wall = time.monotonic(), time.time()
        self._resolved_rule = resolution.rule
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

    def _concerns(self, path: Path) -> bool:
        """Whether a change at ``path`` (in the sessions folder every Codex pane of a CODEX_HOME writes to)
        can matter to this follower: its own rollout, any file that is not a rollout, a rollout no
        resolution here has put aside while it has none (a new one may be its first), another pane's
        rollout only while a prompt typed here is not yet in its own (then it may be where the prompt went,
        see :meth:`_refresh`). The rest wakes nobody: a write by one of 50 panes costs one follower, not 50
        (the codex's exit wakes it by itself; an older Codex's idle rule runs on the timeout). Asked only
        while the follower listens to the others' files (:meth:`_tell_watcher`), cheap questions first."""
        tail = self._tail
        if tail is not None and path == tail.path:
            return True
        if not ROLLOUT_NAME.match(path.name):
            return True
        if tail is None or self._state is None:
            return path not in self._foreign
        if self._idle_wait() is not None:
            return True
        return path not in self._foreign and self._prompt_unconfirmed()

    def _tell_watcher(self) -> None:
        """Claim the rollout followed, and hear of the others' writes only while they may matter here
        (what :meth:`_concerns` would say of another pane's rollout; it is asked then)."""
        if self._sub is not None:
            self._sub.claim(self.rollout)
            self._sub.others = (self._tail is None or self._state is None or self._idle_wait() is not None
                                or self._prompt_unconfirmed())

    def prompt_submitted(self, text: str, at: float) -> None:
        """A prompt typed here may start a new rollout: hear of the others' writes until it is seen (the
        engine says so before the Enter that submits it). With no rollout yet, the follower wakes to look
        again every few seconds until one has it (:meth:`_sleep_limit`)."""
        super().prompt_submitted(text, at)
        self._tell_watcher()
        if self._tail is None and self._sub is not None:
            self._sub.wake()

    def _sleep_limit(self, process: CodexProcess | None) -> float | None:
        """How long the follower may wait for a file event before it looks again (None: as long as it
        takes). A codex whose exit is watched and whose rollout is known needs no look; one with no
        rollout yet neither while only a new rollout can change that — its first prompt creates the file
        (at 50 fresh tiles, a resolution every 2 s each was 3 % of a core). It looks every few seconds while
        the events may not tell: no codex in the pane, no pidfd, a prompt typed here and not found yet, or
        threads that started too close together to tell apart (writes to rollouts put aside wake nobody)."""
        if self._resolve_put_off:
            return RESOLVE_MIN_INTERVAL_S
        watched = process is not None and process.key == self._exit_watched
        if self._tail is not None:
            return None if watched else RESOLVED_RECHECK_S
        typed_here = process is not None and self.last_prompt is not None \
            and self.prompt_sent_at >= process.started_at
        if not watched or typed_here or self._resolved_rule == "ambiguous":
            return UNRESOLVED_RECHECK_S
        return None

    def _prompt_unconfirmed(self) -> bool:
        """Whether the prompt batonpass last typed here (since the last resolution) is not in the rollout
        followed: then a new rollout may be where it went."""
        state, sent_at = self._state, self.prompt_sent_at
        if self.last_prompt is None or sent_at <= self._resolved_wall or state is None:
            return False
        if self._confirmed is not None and self._confirmed[0] == sent_at and self._confirmed[1] is state:
            return False
        if state.received(self.last_prompt):
            self._confirmed = (sent_at, state)
            return False
        return True

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

    async def _look_for_approval(self) -> bool:
        """Whether the screen shows an approval prompt (told to the engine either way). Read only while a
        turn may be open (the rollout's, or none known yet): an idle Codex asks nothing."""
        if self._state is not None and not self._state.busy:
            self.ctx.waiting(None)
            return False
        return await self.look_for_person() is not None

    def _completion(self, turn: Turn, signal: str) -> Completion:
        detail = turn.error or ""
        return Completion(tile=self.ctx.name, turn_id=turn.turn_id, outcome=turn.outcome or "completed",
                          signal=signal, at=turn.finished_at or time.time(), detail=detail)

    def _watch_exit(self, tg: TaskGroup, process: CodexProcess | None) -> None:
        """Have the follower woken the moment the pane's codex exits (a pidfd waited on through the event
        loop): then nothing needs to look at the pane's processes every few seconds — at 50 idle tiles
        that look was 10 tmux round trips and process-tree walks a second."""
        key = process.key if process is not None else None
        if key == self._exit_watched:
            return
        if self._exit_scope is not None:
            self._exit_scope.cancel()
        self._exit_watched = self._exit_scope = None
        if key is None or not hasattr(os, "pidfd_open"):
            return
        scope = self._exit_scope = anyio.CancelScope()
        self._exit_watched = key

        async def wake_on_exit() -> None:
            with scope:
                try:
                    await proc.wait_exit(*key)
                except OSError:  # no pidfd after all: the periodic look again
                    self._exit_watched = None
                if self._sub is not None:
                    self._sub.wake()

        tg.start_soon(wake_on_exit)

    async def follow(self, emit: Emit) -> None:
        async with anyio.create_task_group() as tg:
            try:
                await self._follow(emit, tg)
            finally:
                self._watch_exit(tg, None)

    async def _follow(self, emit: Emit, tg: TaskGroup) -> None:
        watcher = self.ctx.watcher
        sub = None
        hints: set[Path] = set()
        try:
            while True:
                process = await self._refresh_or_none(hints)
                self._watch_exit(tg, process)
                hints = set()
                waiting = await self._look_at_screen(process)
                await self._report_finished(emit)
                sessions = Path(os.path.abspath(process.codex_home / "sessions")) if process else None
                if watcher is not None and sessions is not None and (sub is None or sub.path != sessions):
                    if sub is not None:
                        sub.close()
                    sub = self._sub = watcher.subscribe(sessions, only=self._concerns)
                    continue  # read again: lines written before the subscription began
                if sub is not None:
                    hints = await sub.wait(self._wait_s(process, waiting))
                else:
                    await anyio.sleep(0.5)  # no shared watcher (outside the daemon)
        finally:
            self._sub = None
            if sub is not None:
                sub.close()

    async def _refresh_or_none(self, hints: set[Path]) -> CodexProcess | None:
        """:meth:`_refresh`, with a pane or server gone read as no codex in the pane."""
        try:
            return await self._refresh(hints)
        except (PaneGone, ServerGone):
            return None

    async def _look_at_screen(self, process: CodexProcess | None) -> bool:
        """Settle an older Codex's idle turn and look for an approval prompt; whether one waits."""
        if process is None:
            self.ctx.waiting(None)
            return False
        await self._settle_idle()
        return await self._look_for_approval()

    async def _report_finished(self, emit: Emit) -> None:
        """Tell the engine of a new rollout, then emit the turns that finished since the last look."""
        if self._switched:
            self._switched = False
            await self.ctx.resolved()
        finished = list(self._orphans) + (self._state.take_finished() if self._state else [])
        self._orphans = []
        for turn in finished:
            await emit(self._completion(turn, "rollout"))

    def _wait_s(self, process: CodexProcess | None, waiting: bool) -> float | None:
        """How long to wait for a file event: the shortest of the sleep limit, an idle turn's settling, and
        :data:`LOOK_S` while a turn runs or a person is asked."""
        timeout = self._sleep_limit(process)
        busy = waiting or (self._state is not None and self._state.busy)
        for shorter in (self._idle_wait(), LOOK_S if busy else None):
            if shorter is not None:
                timeout = shorter if timeout is None else min(timeout, shorter)
        return timeout

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
