"""Following one Gemini CLI tile: the pane's gemini process, its session file (re-resolved when the process
changes: the trust dialog's restart makes a new child with a new session; and when a file comes or goes in
its folder: ``/clear`` starts a new session file in the same process), and the turns that end in it.

A turn whose last message is an answer without tool calls only *looks* finished: while a tool waits for
approval or runs, the file looks exactly the same. It is reported once the AfterAgent hook confirms it
(:meth:`GeminiFollowing.confirm`), or once the screen has shown neither the busy line nor a dialog on two
looks :data:`SETTLE_S` apart with the file unchanged. An interrupt (``Request cancelled.``) or an error is
certain and reported at once.
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
from plugins.gemini.resolve import GeminiProcess, find_gemini, resolve_session
from plugins.gemini.session import SessionFile, Turn

if TYPE_CHECKING:
    from pipeline.plugin.tools import Subscription

__all__ = ["GeminiFollowing"]

log = logging.getLogger("batonpass")

#: with no session file known, or the process not known to be the same, look again this often
RECHECK_S = 2.0
#: while a turn is open (or looks finished and the screen must confirm it), look this often
LOOK_S = 0.3
#: a final-looking answer is taken for the end once the screen stayed idle this long with the file unchanged
SETTLE_S = 0.6
#: a folder mtime younger than this may be shared by the next change (file times tick by the jiffy)
FRESH_NS = 50_000_000


class GeminiFollowing(ScreenAdapter):
    """The part of the Gemini CLI adapter that keeps up with the pane's session file and reports its turns."""

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._lock = anyio.Lock()
        self._process: GeminiProcess | None = None
        self._checked = 0.0
        self._resolved_at = 0.0
        self.file: SessionFile | None = None
        #: a hook of this pane named its session file
        self.hook_transcript: str | None = None
        self._switched = False
        self._reported: set[str] = set()
        self._confirmed: set[str] = set()
        #: (turn id, state version) of a final-looking answer the screen showed idle, and since when
        self._settle: tuple[tuple[str, int], float] | None = None
        #: the session folder's mtime when the session was last resolved (None: unknown, resolve again)
        self._folder_stamp: int | None = None
        #: another Gemini CLI works in the folder and a newer session may be this pane's: resolve on changes
        self._unsure = False
        #: the gemini (pid, start ticks) whose exit wakes the follower, and that watch's scope
        self._exit_watched: tuple[int, int] | None = None
        self._exit_scope: anyio.CancelScope | None = None

    # ---- keeping up with the pane's session file ----------------------------------------------------------

    async def refresh(self, *, force: bool = False) -> GeminiProcess | None:
        """The pane's gemini process, its session file (resolved when unknown or asked to), new lines read."""
        async with self._lock:
            now = time.monotonic()
            process = self._process
            # the relaunched child found, its exit is what changes the pane (it wakes the follower); the top
            # process alone is looked past every few seconds (its child may come yet)
            periodic = process is not None and not process.relaunched and now - self._checked > RECHECK_S
            if process is None or not process.alive() or force or periodic:
                info = await self.ctx.pane()
                self._checked = now
                found = await anyio.to_thread.run_sync(find_gemini, info.pid)
                if found is None or process is None or found.proc != process.proc:
                    self._switch(None)
                    self._process = process = found
            if process is None:
                return None
            if self.file is None and (force or now - self._resolved_at > RECHECK_S / 4):
                await self._resolve(process)
            elif self.hook_transcript and self.file and str(self.file.path) != self.hook_transcript:
                await self._resolve(process)
            elif self.file is not None and (_stamp(self.file.path.parent) != self._folder_stamp or (
                    self._unsure and now - self._resolved_at > LOOK_S)):
                await self._resolve(process)  # a session file came or went: /clear, another pane
            if self.file is not None:
                await anyio.to_thread.run_sync(self.file.read)
            return process

    async def _resolve(self, process: GeminiProcess) -> None:
        info = await self.ctx.pane()
        current = self.file.path if self.file is not None else None
        # the folder's mtime before resolving: a file made meanwhile is seen on the next look; a stamp this
        # fresh may be shared with a change to come (file times tick by the jiffy): resolved next look
        stamp = _stamp(current.parent) if current is not None else None
        if stamp is not None and time.time_ns() - stamp < FRESH_NS:
            stamp = -1
        screen = None
        if current is not None:  # the screen tells whose a new session is (another pane in the folder)
            try:
                screen = strip_ansi(await self.ctx.capture())
            except TmuxError:
                pass
        res = await anyio.to_thread.run_sync(lambda: resolve_session(
            info.pid, hook_transcript=self.hook_transcript, last_prompt=self.last_prompt,
            prompt_sent_at=self.prompt_sent_at, process=process, screen=screen, current=current))
        self._resolved_at, self._unsure = time.monotonic(), res.unsure
        if res.session is not None and (self.file is None or res.session != self.file.path):
            log.info("%s: gemini session file %s (rule: %s)", self.ctx.name, res.session, res.rule)
            self._switch(res.session)
        self._folder_stamp = stamp  # None (no file known before): stamped by the next look's resolve

    def _switch(self, path: Path | None) -> None:
        """Follow ``path`` from now on: what it holds finished already is the engine's to catch up on."""
        if path is None:
            self.file = None
            return
        self.file = SessionFile(path)
        self.file.read()
        self._reported |= {t.turn_id for t in self.file.state.turns() if t.outcome and not t.provisional}
        self._switched = True

    def turns(self) -> list[Turn]:
        return self.file.state.turns() if self.file is not None else []

    def confirm(self, turn_id: str) -> None:
        """The AfterAgent hook said ``turn_id`` ended: its final-looking answer is the end."""
        self._confirmed.add(turn_id)

    def completion(self, turn: Turn, signal: str) -> Completion:
        return Completion(tile=self.ctx.name, turn_id=turn.turn_id, outcome=turn.outcome or "completed",
                          signal=signal, at=turn.ended_at or time.time(), detail=turn.detail)

    # ---- the follower ------------------------------------------------------------------------------------

    async def follow(self, emit: Emit) -> None:
        async with anyio.create_task_group() as tg:
            try:
                await self._follow(emit, tg)
            finally:
                tg.cancel_scope.cancel()

    def _watch_exit(self, tg: TaskGroup, process: GeminiProcess | None, sub: Subscription | None) -> bool:
        """Have the follower woken when the pane's gemini exits (a pidfd: no periodic look at the pane's
        processes); whether its exit is watched."""
        key = (process.pid, process.proc.start_ticks) if process is not None and sub is not None else None
        if key != self._exit_watched:
            if self._exit_scope is not None:
                self._exit_scope.cancel()
            self._exit_watched, self._exit_scope = key, None
            if key is not None and sub is not None and hasattr(os, "pidfd_open"):
                scope = self._exit_scope = anyio.CancelScope()

                async def wake_on_exit(pid: int, ticks: int, wake: Any) -> None:
                    with scope:
                        try:
                            await proc.wait_exit(pid, ticks)
                        except OSError:
                            self._exit_watched = None  # no pidfd after all: looked at periodically
                            return
                        wake()

                tg.start_soon(wake_on_exit, key[0], key[1], sub.wake)
        return self._exit_scope is not None and self._exit_watched is not None

    async def _follow(self, emit: Emit, tg: TaskGroup) -> None:
        sub, watched = None, None
        try:
            while True:
                try:
                    process = await self.refresh()
                except (PaneGone, ServerGone):
                    process = None
                if self._switched:
                    self._switched = False
                    await self.ctx.resolved()
                pending = await self._report(emit) if process is not None else False
                if process is None:
                    self.ctx.waiting(None)
                folder = self.file.path.parent if self.file is not None else None
                if self.ctx.watcher is not None and folder is not None and folder != watched:
                    if sub is not None:
                        sub.close()
                    sub, watched = self.ctx.watcher.subscribe(folder), folder
                    continue
                quiet = self._watch_exit(tg, process, sub) and process is not None and process.relaunched
                timeout = LOOK_S if pending else None if quiet and not self._unsure else RECHECK_S
                if sub is not None and self.file is not None:
                    await sub.wait(timeout)
                else:  # no session file yet (it is made at startup): soon; no gemini in the pane: seldom
                    await anyio.sleep(min(timeout or 0.5, 0.5) if process is not None else RECHECK_S)
        finally:
            if sub is not None:
                sub.close()

    async def _report(self, emit: Emit) -> bool:
        """Emit the turns that ended since the last look; whether one is still open or unconfirmed."""
        turns = self.turns()
        last = turns[-1] if turns else None
        pending = last is not None and last.turn_id not in self._reported and (
            last.outcome is None or (last.provisional and last.turn_id not in self._confirmed))
        busy = await self._screen_busy() if pending else False
        if not pending:  # no turn runs: nothing is asked (the screen is read while one does)
            self.waiting_now = None
            self.ctx.waiting(None)
        for turn in turns:
            if turn.outcome is None or turn.turn_id in self._reported:
                continue
            if turn is last and turn.provisional and turn.turn_id not in self._confirmed \
                    and not self._settled(turn, busy):
                continue
            self._reported.add(turn.turn_id)
            await emit(self.completion(turn, "session file"))
        return pending

    async def _screen_busy(self) -> bool:
        """Whether the screen shows the busy line or a dialog (told to the engine: ``waiting``)."""
        try:
            screen = strip_ansi(await self.ctx.capture())
        except TmuxError:
            return True
        waiting = self.waiting_for(screen)
        self.waiting_now = waiting
        self.ctx.waiting(waiting)
        return waiting is not None or self.is_busy(screen)

    def _settled(self, turn: Turn, busy: bool) -> bool:
        """Whether a final-looking answer has stayed the end, on an idle screen, for :data:`SETTLE_S`."""
        if busy or self.file is None:
            self._settle = None
            return False
        key = (turn.turn_id, self.file.state.version)
        if self._settle is None or self._settle[0] != key:
            self._settle = (key, time.monotonic())
            return False
        return time.monotonic() - self._settle[1] >= SETTLE_S

    async def finished_turns(self, since: float) -> list[TurnEnd] | None:
        """The turns of the pane's session that ended at or after ``since`` (a final-looking last answer
        only while the screen is idle)."""
        try:
            await self.refresh(force=True)
        except (PaneGone, ServerGone):
            return []
        turns = self.turns()
        if turns and turns[-1].provisional and turns[-1].turn_id not in self._confirmed \
                and await self._screen_busy():
            turns = turns[:-1]
        state = self.file.state if self.file is not None else None
        cwd = self._process.cwd if self._process is not None else None
        return [TurnEnd(turn_id=t.turn_id, outcome=t.outcome, text=t.answer or "", ended_at=t.ended_at or 0.0,
                        session_id=state.session_id if state else None, cwd=cwd, detail=t.detail)
                for t in turns if t.outcome is not None and (t.ended_at or 0.0) >= since]

    def file_age(self) -> float:
        """Seconds since the session file was last written (0 when unknown)."""
        try:
            return time.time() - os.stat(self.file.path).st_mtime if self.file is not None else 0.0
        except OSError:
            return 0.0


def _stamp(folder: Path) -> int | None:
    """The folder's mtime: it changes when a file is made or removed in it (not when one is written)."""
    try:
        return os.stat(folder).st_mtime_ns
    except OSError:
        return None
