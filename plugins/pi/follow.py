"""Following one pi tile: the pane's pi process, its session file (resolved again when the process changes,
when a file is made in its folder — the first prompt, or the first after ``/new`` — or when a hook names
another), and the turns that end in it.

pi writes each message whole once it is finished, so a ``stop``/``length`` assistant message is the turn's
end and is reported at once. An ``error`` may be retried (pi's auto-retry writes another assistant message
after a back-off): it is reported once the hook says pi settled, or once the screen has shown no busy line
on two looks :data:`SETTLE_S` apart with the file unchanged.
"""

from __future__ import annotations

import logging
import os
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
from plugins.pi.resolve import PiProcess, find_pi, resolve_session, session_folder
from plugins.pi.session import SessionFile, Turn

__all__ = ["PiFollowing"]

log = logging.getLogger("batonpass")

#: with no session file known, or no pi in the pane, look again this often
RECHECK_S = 2.0
#: while a turn is open (or its end must be confirmed), look this often
LOOK_S = 0.3
#: an ``error`` end is taken once the screen stayed idle this long with the file unchanged
SETTLE_S = 0.6


class PiFollowing(ScreenAdapter):
    """The part of the pi adapter that keeps up with the pane's session file and reports its turns."""

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._lock = anyio.Lock()
        self.process: PiProcess | None = None
        self._checked = 0.0
        self.file: SessionFile | None = None
        #: a hook of this pane named its session file
        self.hook_session: str | None = None
        self._folder_stamp: int | None = None
        self._switched = False
        self._reported: set[str] = set()
        self._confirmed: set[str] = set()
        self._settle: tuple[tuple[str, int], float] | None = None

    # ---- keeping up with the pane's session file ----------------------------------------------------------

    async def refresh(self, *, force: bool = False) -> PiProcess | None:
        """The pane's pi process, its session file (resolved when unknown, changed or asked to), new lines
        read."""
        async with self._lock:
            now = time.monotonic()
            process = self.process
            looked = process is None or not process.alive() or force or now - self._checked > RECHECK_S
            if looked:
                info = await self.ctx.pane()
                self._checked = now
                found = await anyio.to_thread.run_sync(find_pi, info.pid)
                if found is None or process is None or found.proc != process.proc:
                    self._switch(None)
                    self.process = process = found
            if process is None:
                return None
            folder, _ = session_folder(process)
            stamp = _stamp(folder) if folder is not None else None
            hooked = self.hook_session and (self.file is None or str(self.file.path) != self.hook_session)
            if force or hooked or stamp != self._folder_stamp or (self.file is None and looked):
                self._folder_stamp = stamp
                await self._resolve(process)
            if self.file is not None:
                await anyio.to_thread.run_sync(self.file.read)
            return process

    async def _resolve(self, process: PiProcess) -> None:
        info = await self.ctx.pane()
        res = await anyio.to_thread.run_sync(lambda: resolve_session(
            info.pid, hook_session=self.hook_session, last_prompt=self.last_prompt, process=process))
        if res.session is not None and (self.file is None or res.session != self.file.path):
            log.info("%s: pi session file %s (rule: %s)", self.ctx.name, res.session, res.rule)
            self._switch(res.session)

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
        """The hook said pi settled after ``turn_id``: its end is final."""
        self._confirmed.add(turn_id)

    def completion(self, turn: Turn, signal: str) -> Completion:
        return Completion(tile=self.ctx.name, turn_id=turn.turn_id, outcome=turn.outcome or "completed",
                          signal=signal, at=turn.ended_at or time.time(), detail=turn.detail)

    # ---- the follower ------------------------------------------------------------------------------------

    async def follow(self, emit: Emit) -> None:
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
                folder = session_folder(process)[0] if process is not None else None
                if self.ctx.watcher is not None and folder is not None and folder != watched \
                        and folder.is_dir():
                    if sub is not None:
                        sub.close()
                    sub, watched = self.ctx.watcher.subscribe(folder), folder
                    continue
                timeout = LOOK_S if pending or self.file is None and process is not None else RECHECK_S
                if sub is not None and process is not None:
                    await sub.wait(timeout)
                else:
                    await anyio.sleep(min(timeout, 0.5) if process is not None else RECHECK_S)
        finally:
            if sub is not None:
                sub.close()

    async def _report(self, emit: Emit) -> bool:
        """Emit the turns that ended since the last look; whether one is still open or unconfirmed (then
        the screen is read: busy, and the trust dialog told to the engine)."""
        turns = self.turns()
        last = turns[-1] if turns else None
        pending = self.file is None or last is not None and last.turn_id not in self._reported and (
            last.outcome is None or (last.provisional and last.turn_id not in self._confirmed))
        busy = await self._screen_busy() if pending else False
        if not pending:
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
        """Whether an ``error`` end has stayed the end, on an idle screen, for :data:`SETTLE_S`."""
        if busy or self.file is None:
            self._settle = None
            return False
        key = (turn.turn_id, self.file.state.changes)
        if self._settle is None or self._settle[0] != key:
            self._settle = (key, time.monotonic())
            return False
        return time.monotonic() - self._settle[1] >= SETTLE_S

    async def finished_turns(self, since: float) -> list[TurnEnd] | None:
        """The turns of the pane's session that ended at or after ``since`` (an ``error`` end only while
        the screen is idle: pi may retry it)."""
        try:
            await self.refresh(force=True)
        except (PaneGone, ServerGone):
            return []
        turns = self.turns()
        if turns and turns[-1].provisional and turns[-1].turn_id not in self._confirmed \
                and await self._screen_busy():
            turns = turns[:-1]
        state = self.file.state if self.file is not None else None
        cwd = self.process.cwd if self.process is not None else None
        return [TurnEnd(turn_id=t.turn_id, outcome=t.outcome, text=t.answer or "", ended_at=t.ended_at or 0.0,
                        session_id=state.session_id if state else None, cwd=cwd, detail=t.detail)
                for t in turns if t.outcome is not None and (t.ended_at or 0.0) >= since]


def _stamp(folder: Path) -> int | None:
    """The folder's mtime: it changes when a file is made or removed in it (not when one is written)."""
    try:
        return os.stat(folder).st_mtime_ns
    except OSError:
        return None
