"""Following an agent from its session file (Gemini CLI, pi, Qwen Code): the pane's agent process, the file it
writes, and the turns that end in it, each reported once.

Each agent finds its process and its file in its own way (its ``refresh``), and says how long its follower
sleeps between looks (its ``_pause``). What they share is here: a file newly followed holds turns that ended
already (the engine's to catch up on, not reported again); a turn whose end is only *provisional* (a
final-looking answer, an error a retry may follow) is reported once a hook confirms it or once the screen
has shown neither the busy line nor a dialog on two looks :data:`SETTLE_S` apart with the file unchanged;
while a turn is open the screen is read for a dialog (told to the engine: ``waiting``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import anyio
from anyio.abc import TaskGroup

from pipeline.plugin.agents import Emit
from pipeline.plugin.events import Completion
from pipeline.plugin.node_cli import AgentProc
from pipeline.plugin.screen import ScreenAdapter
from pipeline.plugin.tools import strip_ansi
from pipeline.plugin.turns import FileTurn, TurnEnd
from pipeline.system.tmux import PaneGone, ServerGone, TmuxError

if TYPE_CHECKING:
    from pipeline.plugin.tools import Subscription

__all__ = ["SETTLE_S", "SessionFollowing", "TurnsFile", "folder_stamp"]

#: a provisional end is taken once the screen stayed idle this long with the file unchanged
SETTLE_S = 0.6


class TurnsFile(Protocol):
    """A session file read as it grows (:class:`pipeline.plugin.session_file.FollowedFile`)."""

    path: Path
    state: Any
    fed: int

    def read(self, *, final: bool = False) -> bool: ...


P = TypeVar("P", bound=AgentProc)
F = TypeVar("F", bound=TurnsFile)
T = TypeVar("T", bound=FileTurn)


class SessionFollowing(ScreenAdapter, Generic[P, F, T]):
    """The part of a session-file adapter that keeps up with the pane's session file and reports its turns."""

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._lock = anyio.Lock()
        self._process: P | None = None
        self.file: F | None = None
        #: a hook of this pane named its session file
        self.hook_file: str | None = None
        self._switched = False
        self._reported: set[str] = set()
        self._confirmed: set[str] = set()
        #: (turn id, records read) of a provisional end the screen showed idle, and since when
        self._settle: tuple[tuple[str, int], float] | None = None

    # ---- what each agent says ----------------------------------------------------------------------------

    async def refresh(self, *, force: bool = False) -> P | None:
        """The pane's agent process, its session file (resolved when unknown or asked to), new lines read."""
        raise NotImplementedError

    def _open(self, path: Path) -> F:
        """The agent's session file at ``path``, not read yet."""
        raise NotImplementedError

    async def _pause(self, tg: TaskGroup, process: P | None, sub: Subscription | None, pending: bool) -> None:
        """Wait until the follower should look again (``pending``: a turn is open or unconfirmed)."""
        raise NotImplementedError

    def _turns_in(self, file: F) -> list[T]:
        """Every user turn ``file`` holds, oldest first."""
        turns: list[T] = file.state.turns()
        return turns

    def _folder(self, process: P | None) -> Path | None:
        """The folder whose changes wake the follower: the session file's."""
        return self.file.path.parent if self.file is not None else None

    def _followed_session(self) -> str | None:
        """The followed session's id."""
        return self.file.state.session_id if self.file is not None else None

    # ---- the followed file -------------------------------------------------------------------------------

    def _switch(self, path: Path | None) -> None:
        """Follow ``path`` from now on: what it holds finished already is the engine's to catch up on."""
        if path is None:
            self.file = None
            return
        self.file = self._open(path)
        self.file.read()
        self._reported |= {t.turn_id for t in self._turns_in(self.file) if t.outcome and not t.provisional}
        self._switched = True

    def turns(self) -> list[T]:
        return self._turns_in(self.file) if self.file is not None else []

    def confirm(self, turn_id: str) -> None:
        """A hook said ``turn_id`` ended: its provisional end is the end."""
        self._confirmed.add(turn_id)

    def completion(self, turn: T, signal: str) -> Completion:
        return Completion(tile=self.ctx.name, turn_id=turn.turn_id, outcome=turn.outcome or "completed",
                          signal=signal, at=turn.ended_at or time.time(), detail=turn.detail)

    def file_age(self) -> float:
        """Seconds since the session file was last written (0 when unknown)."""
        try:
            return time.time() - os.stat(self.file.path).st_mtime if self.file is not None else 0.0
        except OSError:
            return 0.0

    # ---- the follower ------------------------------------------------------------------------------------

    async def follow(self, emit: Emit) -> None:
        async with anyio.create_task_group() as tg:
            try:
                await self._follow(emit, tg)
            finally:
                tg.cancel_scope.cancel()

    async def _follow(self, emit: Emit, tg: TaskGroup) -> None:
        sub: Subscription | None = None
        watched: Path | None = None
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
                folder = self._folder(process)
                if self.ctx.watcher is not None and folder is not None and folder != watched:
                    if sub is not None:
                        sub.close()
                    sub, watched = self.ctx.watcher.subscribe(folder), folder
                    continue
                await self._pause(tg, process, sub, pending)
        finally:
            if sub is not None:
                sub.close()

    def _pending(self, last: T | None) -> bool:
        """Whether the last turn is still open, or ended provisionally and unreported."""
        return last is not None and last.turn_id not in self._reported and (
            last.outcome is None or (last.provisional and last.turn_id not in self._confirmed))

    def _held(self, turn: T, last: T | None, busy: bool) -> bool:
        """Whether an ended turn waits: the last, its end provisional, unconfirmed and not settled."""
        return turn is last and turn.provisional and turn.turn_id not in self._confirmed \
            and not self._settled(turn, busy)

    async def _report(self, emit: Emit) -> bool:
        """Emit the turns that ended since the last look; whether one is still open or unconfirmed (then the
        screen is read: busy, and a dialog told to the engine)."""
        turns = self.turns()
        last = turns[-1] if turns else None
        pending = self._pending(last)
        busy = await self._screen_busy() if pending else False
        if not pending:  # no turn runs: nothing is asked (the screen is read while one does)
            self.waiting_now = None
            self.ctx.waiting(None)
        for turn in turns:
            if turn.outcome is None or turn.turn_id in self._reported or self._held(turn, last, busy):
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

    def _settled(self, turn: T, busy: bool) -> bool:
        """Whether a provisional end has stayed the end, on an idle screen, for :data:`SETTLE_S`."""
        if busy or self.file is None:
            self._settle = None
            return False
        key = (turn.turn_id, self.file.fed)
        if self._settle is None or self._settle[0] != key:
            self._settle = (key, time.monotonic())
            return False
        return time.monotonic() - self._settle[1] >= SETTLE_S

    async def finished_turns(self, since: float) -> list[TurnEnd] | None:
        """The turns of the pane's session that ended at or after ``since`` (a provisional last end only
        while the screen is idle)."""
        try:
            await self.refresh(force=True)
        except (PaneGone, ServerGone):
            return []
        turns = self.turns()
        if turns and turns[-1].provisional and turns[-1].turn_id not in self._confirmed \
                and await self._screen_busy():
            turns = turns[:-1]
        sid = self._followed_session()
        cwd = self._process.cwd if self._process is not None else None
        return [TurnEnd(turn_id=t.turn_id, outcome=t.outcome, text=t.answer or "", ended_at=t.ended_at or 0.0,
                        session_id=sid, cwd=cwd, detail=t.detail)
                for t in turns if t.outcome is not None and (t.ended_at or 0.0) >= since]


def folder_stamp(folder: Path) -> int | None:
    """The folder's mtime: it changes when a file is made or removed in it (not when one is written)."""
    try:
        return os.stat(folder).st_mtime_ns
    except OSError:
        return None
