"""Following one Qwen Code tile: the pane's Qwen Code process, the session its pid file names (``/clear``
names a new one), that session's file, and the turns that end in it.

A turn's end is certain from the file (a reply without function calls, written once the reply is whole), so
it is reported at once; only an API error that a retry may follow waits for the screen to show Qwen idle.
While a turn runs, the screen is read for a permission prompt (told to the engine: ``waiting``).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from pipeline.plugin import PaneGone, ServerGone, TmuxError
from pipeline.plugin.agents import Emit
from pipeline.plugin.events import Completion
from pipeline.plugin.screen import ScreenAdapter
from pipeline.plugin.tools import strip_ansi
from pipeline.plugin.turns import TurnEnd
from plugins.qwen.resolve import QwenProcess, find_qwen, resolve_session
from plugins.qwen.session import SessionFile, Turn

if TYPE_CHECKING:
    from pipeline.plugin.tools import Subscription

__all__ = ["QwenFollowing"]

log = logging.getLogger("batonpass")

#: with no Qwen Code in the pane, look again this often
RECHECK_S = 2.0
#: while a turn runs (or its session file is not made yet), look this often
LOOK_S = 0.3


class QwenFollowing(ScreenAdapter):
    """The part of the Qwen Code adapter that keeps up with the pane's session file and reports its turns."""

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._lock = anyio.Lock()
        self._process: QwenProcess | None = None
        self.session_id: str | None = None
        self.file: SessionFile | None = None
        self._switched = False
        self._reported: set[str] = set()

    # ---- keeping up with the pane's session file ----------------------------------------------------------

    async def refresh(self, *, force: bool = False) -> QwenProcess | None:
        """The pane's Qwen Code process, the session its pid file names, that file's new lines read."""
        async with self._lock:
            process = self._process
            if process is None or not process.alive() or force:
                info = await self.ctx.pane()
                found = await anyio.to_thread.run_sync(find_qwen, info.pid)
                if found is None or process is None or found.proc != process.proc:
                    self._switch(None, None)
                    self._process = process = found
            if process is None:
                return None
            res = await anyio.to_thread.run_sync(lambda: resolve_session(0, process))
            if res.session_id != self.session_id or (self.file is None) != (res.session is None):
                log.info("%s: qwen session %s, file %s", self.ctx.name, res.session_id, res.session)
                self._switch(res.session_id, res.session)
            if self.file is not None:
                await anyio.to_thread.run_sync(self.file.read)
            return process

    def _switch(self, session_id: str | None, path: Path | None) -> None:
        """Follow ``path`` from now on: what it holds finished already is the engine's to catch up on."""
        self.session_id = session_id
        self.file = SessionFile(path) if path is not None else None
        if self.file is not None:
            self.file.read()
            self._reported |= {t.turn_id for t in self.file.state.turns if t.outcome and not t.provisional}
            self._switched = True

    def turns(self) -> list[Turn]:
        return self.file.state.turns if self.file is not None else []

    def completion(self, turn: Turn, signal: str) -> Completion:
        return Completion(tile=self.ctx.name, turn_id=turn.turn_id, outcome=turn.outcome or "completed",
                          signal=signal, at=turn.ended_at or time.time(), detail=turn.detail)

    # ---- the follower ------------------------------------------------------------------------------------

    async def follow(self, emit: Emit) -> None:
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
                folder = self.file.path.parent if self.file is not None else None
                if self.ctx.watcher is not None and folder is not None and folder != watched:
                    if sub is not None:
                        sub.close()
                    sub, watched = self.ctx.watcher.subscribe(folder), folder
                    continue
                if sub is not None and self.file is not None:
                    await sub.wait(LOOK_S if pending else RECHECK_S)
                else:
                    await anyio.sleep(LOOK_S if process is not None else RECHECK_S)
        finally:
            if sub is not None:
                sub.close()

    async def _report(self, emit: Emit) -> bool:
        """Emit the turns that ended since the last look; whether one is still open (or provisional)."""
        turns = self.turns()
        last = turns[-1] if turns else None
        pending = last is not None and last.turn_id not in self._reported and \
            (last.outcome is None or last.provisional)
        busy = await self._screen_busy() if pending else False
        if not pending:
            self.waiting_now = None
            self.ctx.waiting(None)
        for turn in turns:
            if turn.outcome is None or turn.turn_id in self._reported or (turn.provisional and busy):
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

    async def finished_turns(self, since: float) -> list[TurnEnd] | None:
        """The turns of the pane's session that ended at or after ``since`` (an API error's only once the
        screen is idle: a retry may follow it)."""
        try:
            await self.refresh(force=True)
        except (PaneGone, ServerGone):
            return []
        turns = self.turns()
        if turns and turns[-1].provisional and await self._screen_busy():
            turns = turns[:-1]
        cwd = self._process.cwd if self._process is not None else None
        return [TurnEnd(turn_id=t.turn_id, outcome=t.outcome, text=t.answer or "", ended_at=t.ended_at or 0.0,
                        session_id=self.session_id, cwd=cwd, detail=t.detail)
                for t in turns if t.outcome is not None and (t.ended_at or 0.0) >= since]

    def file_age(self) -> float:
        """Seconds since the session file was last written (0 when unknown)."""
        try:
            return time.time() - os.stat(self.file.path).st_mtime if self.file is not None else 0.0
        except OSError:
            return 0.0
