"""Following one Cline tile: the pane's ``cline`` (never its hub daemon), its session (resolved again when
the process changes, or while none is known: it is made at the first prompt; a new task in the same process
is a newer session), and the turns that end in it.

An ``assistant`` message without a tool call is the turn's end and is reported at once; an interrupt shows
as the prompt left without an answer once the session's ``status`` is back to ``idle``. While a turn is
open the screen is read for a dialog (``status: pending`` is an approval).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import anyio

from pipeline.plugin import PaneGone, ServerGone, TmuxError
from pipeline.plugin.agents import Emit
from pipeline.plugin.events import Completion
from pipeline.plugin.screen import ScreenAdapter
from pipeline.plugin.tools import strip_ansi
from pipeline.plugin.turns import TurnEnd
from plugins.cline.resolve import ClineProcess, find_cline, resolve_session
from plugins.cline.session import SessionFile, Turn

__all__ = ["ClineFollowing"]

log = logging.getLogger("batonpass")

#: with no session known, or no cline in the pane, look again this often
RECHECK_S = 2.0
#: while a turn is open, look this often (the screen's dialogs)
LOOK_S = 0.3
#: before the first prompt (no session yet), look this often (the provider picker, a notice)
NO_SESSION_S = 1.0


class ClineFollowing(ScreenAdapter):
    """The part of the Cline adapter that keeps up with the pane's session and reports its turns."""

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._lock = anyio.Lock()
        self.process: ClineProcess | None = None
        self._checked = 0.0
        self.file: SessionFile | None = None
        self._switched = False
        self._reported: set[str] = set()

    async def refresh(self, *, force: bool = False) -> ClineProcess | None:
        """The pane's cline, its session (looked for while unknown, every :data:`RECHECK_S`, or when
        ``force``), its files read if they changed."""
        async with self._lock:
            now = time.monotonic()
            process = self.process
            due = force or now - self._checked > RECHECK_S
            if process is None or due or not process.alive():
                info = await self.ctx.pane()
                self._checked = now
                found = await anyio.to_thread.run_sync(find_cline, info.pid)
                if found is None or process is None or found.proc != process.proc:
                    self._switch(None)
                    self.process = process = found
                if process is not None:
                    res = await anyio.to_thread.run_sync(lambda: resolve_session(info.pid, process=process))
                    if res.session is not None and (self.file is None or res.session != self.file.path):
                        log.info("%s: cline session %s (rule: %s)", self.ctx.name, res.session.parent.name,
                                 res.rule)
                        self._switch(res.session)
            if self.file is not None:
                await anyio.to_thread.run_sync(self.file.read)
            return process

    def _switch(self, path: Path | None) -> None:
        """Follow ``path`` from now on: what it holds finished already is the engine's to catch up on."""
        if path is None:
            self.file = None
            return
        self.file = SessionFile(path)
        self.file.read()
        self._reported |= {t.turn_id for t in self.file.state.turns() if t.outcome}
        self._switched = True

    def turns(self) -> list[Turn]:
        return self.file.state.turns() if self.file is not None else []

    def completion(self, turn: Turn, signal: str) -> Completion:
        return Completion(tile=self.ctx.name, turn_id=turn.turn_id, outcome=turn.outcome or "completed",
                          signal=signal, at=turn.ended_at or time.time(), detail=turn.detail)

    async def follow(self, emit: Emit) -> None:
        sub, watched = None, None
        try:
            while True:
                try:
                    process = await self.refresh(force=self.file is None)
                except (PaneGone, ServerGone):
                    process = None
                if self._switched:
                    self._switched = False
                    await self.ctx.resolved()
                pending = await self._report(emit) if process is not None else False
                if process is None:
                    self.ctx.waiting(None)
                folder = process.sessions_dir if process is not None else None
                if self.ctx.watcher is not None and folder is not None and folder != watched:
                    if sub is not None:
                        sub.close()
                    sub, watched = self.ctx.watcher.subscribe(folder), folder
                    continue
                timeout = (LOOK_S if self.file is not None else NO_SESSION_S) if pending else RECHECK_S
                if sub is not None and process is not None:
                    await sub.wait(timeout)
                else:
                    await anyio.sleep(min(timeout, 0.5) if process is not None else RECHECK_S)
        finally:
            if sub is not None:
                sub.close()

    async def _report(self, emit: Emit) -> bool:
        """Emit the turns that ended since the last look; whether one is still open (or none is known:
        then the screen is read for a dialog — the provider picker, a notice, an approval)."""
        turns = self.turns()
        open_turn = self.file is None or (bool(turns) and turns[-1].outcome is None) or \
            (self.file is not None and self.file.state.busy)
        if open_turn:
            await self.screen_busy()
        else:
            self.waiting_now = None
            self.ctx.waiting(None)
        for turn in turns:
            if turn.outcome is not None and turn.turn_id not in self._reported:
                self._reported.add(turn.turn_id)
                await emit(self.completion(turn, "session file"))
        return open_turn

    async def screen_busy(self) -> bool:
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
        """The turns of the pane's session that ended at or after ``since``."""
        try:
            await self.refresh(force=True)
        except (PaneGone, ServerGone):
            return []
        state = self.file.state if self.file is not None else None
        cwd = self.process.cwd if self.process is not None else None
        return [TurnEnd(turn_id=t.turn_id, outcome=t.outcome, text=t.answer or "", ended_at=t.ended_at or 0.0,
                        session_id=state.session_id if state else None, cwd=cwd, detail=t.detail)
                for t in self.turns() if t.outcome is not None and (t.ended_at or 0.0) >= since]
