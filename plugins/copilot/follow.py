"""Following one Copilot CLI tile: the pane's native ``copilot`` process, its session folder (by the lock file
it holds, :mod:`plugins.copilot.resolve`), the lines appended to its ``events.jsonl``, and the user turns
that end there (:mod:`plugins.copilot.events`).

The events are watched through the engine's watcher on ``$COPILOT_HOME/session-state`` (the file appears
only at the first prompt, and a new session — ``/clear``, ``/new``, a restart — moves the lock to another
folder). The lock moves at once, but a prompt sent right after ``/clear`` may still be taken by the old
session, whose file gets that turn and then ``session.shutdown`` (seen on 1.0.102): a session left by the
same process is read on until it has shut down (docs/agent-versions.md).
Copilot writes its events in batches, a moment after the fact; ``open-sessions-state.json``'s ``working``
flag (true from the submit to the end of the turn, and during an approval) covers the gap for readiness.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from pipeline.plugin import PaneGone, ServerGone
from pipeline.plugin.agents import Emit
from pipeline.plugin.events import Completion
from pipeline.plugin.screen import ScreenAdapter
from pipeline.plugin.tools import AppendedLines
from plugins.copilot.events import Interaction, SessionEvents
from plugins.copilot.resolve import CopilotProcess, Resolution, find_copilot_process, resolve_session

if TYPE_CHECKING:
    from pipeline.plugin.tools import Subscription

__all__ = ["EventsFollowing", "asked"]

log = logging.getLogger("batonpass")

#: how often the pane's process and its session lock are looked at again without a file event
RECHECK_S = 2.0
#: while a turn runs (or a person is asked), how often the follower looks (the screen's approval box)
LOOK_S = 0.5
#: how many sessions followed before the current one are kept for their answers
KEEP_SESSIONS = 4


class EventsFollowing(ScreenAdapter):
    """The part of the Copilot adapter that keeps up with the pane's session and reports its ended turns."""

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._lock = anyio.Lock()
        self._process: CopilotProcess | None = None
        self._resolution: Resolution | None = None
        self._checked = 0.0
        self._tail: AppendedLines | None = None
        self._state: SessionEvents | None = None
        self._orphans: list[tuple[SessionEvents, Interaction]] = []
        #: sessions the same process left (``/clear``): read on until they shut down, as they may still
        #: take a prompt sent right after the switch
        self._draining: list[tuple[AppendedLines, SessionEvents]] = []
        #: the sessions followed before this one, newest last (their turns' answers are still asked for)
        self._before: list[SessionEvents] = []
        #: a new session is followed: the engine is told (ctx.resolved) and asks finished_turns
        self._switched = False

    @property
    def events_path(self) -> Path | None:
        return self._tail.path if self._tail else None

    async def _refresh(self, *, force: bool = False) -> CopilotProcess | None:
        """Bring the session state up to date: the pane's copilot, its session (looked for again every
        :data:`RECHECK_S`, or when ``force``), the lines appended since the last read."""
        async with self._lock:
            now = time.monotonic()
            process = self._process
            due = force or now - self._checked > RECHECK_S
            if process is None or due or not process.alive():
                info = await self.ctx.pane()
                self._checked = now
                found = await anyio.to_thread.run_sync(find_copilot_process, info.pid)
                if found is None or process is None or found.key != process.key:
                    self._switch(None)
                    self._process = process = found
                if process is not None:
                    res = await anyio.to_thread.run_sync(lambda: resolve_session(info.pid, process=process))
                    self._resolution = res
                    if res.events is not None and res.events != self.events_path:
                        log.info("%s: copilot session %s (rule: %s)", self.ctx.name, res.session_id, res.rule)
                        self._switch(res.events)
            if self._tail is not None and self._state is not None:
                for record in self._tail.read():
                    self._state.feed(record)
            self._drain()
            return process

    def _drain(self) -> None:
        """Read the sessions left behind until they shut down; their turns that ended go to the engine."""
        still = []
        for tail, state in self._draining:
            for record in tail.read():
                state.feed(record)
            self._orphans += [(state, t) for t in state.take_finished()]
            if not state.shut_down:
                still.append((tail, state))
        self._draining = still[-KEEP_SESSIONS:]

    def _switch(self, path: Path | None) -> None:
        """Follow ``path`` from now on; the old session's turns still unread are read first (and, when the
        same process goes on, read on until it shuts down: :meth:`_drain`). Of the new one, what finished
        already is the engine's to catch up on (:meth:`finished_turns`), not news."""
        if self._tail is not None and self._state is not None:
            tail, state = self._tail, self._state
            for record in tail.read():
                state.feed(record)
            if path is not None and not state.shut_down:
                self._draining.append((tail, state))  # the same process: it may still write a turn here
            else:
                for record in tail.read(final=True):
                    state.feed(record)
            self._orphans += [(state, t) for t in state.take_finished()]
            self._before = [*self._before, state][-KEEP_SESSIONS:]
        if path is None:  # the process is gone (or another): no turn of the old one ends any more
            self._tail = self._state = None
            self._draining = []
            return
        self._tail, self._state = AppendedLines(path), SessionEvents(session_id=path.parent.name)
        for record in self._tail.read():
            self._state.feed(record)
        self._state.take_finished()
        self._switched = True

    def find_turn(self, tid: str) -> Interaction | None:
        """The turn ``tid`` of the session followed now, or of one followed before it."""
        states = [self._state] if self._state is not None else []
        for state in [*states, *reversed(self._before)]:
            turn = next((t for t in state.turns.values() if state.turn_key(t) == tid), None)
            if turn is not None:
                return turn
        return None

    def _completion(self, state: SessionEvents, turn: Interaction, signal: str) -> Completion:
        return Completion(tile=self.ctx.name, turn_id=state.turn_key(turn),
                          outcome=turn.outcome or "completed", signal=signal,
                          at=turn.ended_at or time.time(), detail=turn.detail)

    def working_flag(self) -> bool | None:
        """``open-sessions-state.json``'s ``working`` for the followed session, None when it does not say."""
        process, res = self._process, self._resolution
        if process is None or res is None or res.session_id is None:
            return None
        try:
            data = json.loads((process.home / "open-sessions-state.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        entry = data.get(res.session_id) if isinstance(data, dict) else None
        working = entry.get("working") if isinstance(entry, dict) else None
        return working if isinstance(working, bool) else None

    # ---- completion ------------------------------------------------------------------------------

    async def follow(self, emit: Emit) -> None:
        sub: Subscription | None = None
        try:
            while True:
                try:
                    process = await self._refresh()
                except (PaneGone, ServerGone):
                    process = None
                await self._report(emit)
                busy = await self._look_for_person(process)
                root = process.home / "session-state" if process is not None else None
                watcher = self.ctx.watcher
                if watcher is not None and root is not None and (sub is None or sub.path != root):
                    if sub is not None:
                        sub.close()
                    sub = watcher.subscribe(root)
                    continue  # read again: lines written before the subscription began
                timeout = LOOK_S if busy else RECHECK_S
                if sub is not None:
                    await sub.wait(timeout)
                else:
                    await anyio.sleep(min(timeout, LOOK_S))  # no shared watcher (outside the daemon)
        finally:
            if sub is not None:
                sub.close()

    async def _report(self, emit: Emit) -> None:
        """Tell the engine of a new session, then emit the turns that finished since the last look."""
        if self._switched:
            self._switched = False
            await self.ctx.resolved()
        finished = list(self._orphans)
        if self._state is not None:
            finished += [(self._state, t) for t in self._state.take_finished()]
        self._orphans = []
        for state, turn in finished:
            await emit(self._completion(state, turn, "events"))

    async def _look_for_person(self, process: CopilotProcess | None) -> bool:
        """Tell the engine whether a person is asked (the events' open permission request, else the screen's
        approval box while a turn may run); whether the follower should look again soon."""
        state = self._state
        if process is None:
            self.ctx.waiting(None)
            return False
        if state is not None and state.asking is not None:
            self.waiting_now = asked(state)
            self.ctx.waiting(self.waiting_now)
            return True
        if state is not None and not state.busy and not self.working_flag():
            self.waiting_now = None
            self.ctx.waiting(None)
            return False
        seen = await self.look_for_person()  # the events lag (batches), or no session was found
        return seen is not None or (state is not None and state.busy)


def asked(state: SessionEvents) -> str:
    """What the person is asked for, in a few words (the board, the notice)."""
    what = " ".join(state.asking_for.split())
    return f"permission prompt: {what[:60]}" if what else "permission prompt"
