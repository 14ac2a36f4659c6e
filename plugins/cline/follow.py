"""Following one Cline tile: the pane's ``cline`` (never its hub daemon), its session (resolved again when
the process changes, or while none is known: it is written at the first prompt; a new task in the same
process is a newer session), and the turns that end in it
(:class:`~pipeline.plugin.session_follow.SessionFollowing` reports each once).

An ``assistant`` message without a tool call is the turn's end and is reported at once; an interrupt shows
as the prompt left without an answer once the session's ``status`` is back to ``idle``. A turn is open — and
the screen read for a dialog — while no session is known yet (the provider picker, a notice), while the last
turn has no end, and while the record says ``running`` or ``pending`` (the prompt reaches the messages only
at the turn's first step).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from pipeline.plugin.session_follow import SessionFollowing
from plugins.cline.launches import LaunchLog
from plugins.cline.resolve import ClineProcess, find_cline, resolve_session
from plugins.cline.session import SessionFile, Turn

if TYPE_CHECKING:
    from pipeline.plugin.tools import Subscription

__all__ = ["ClineFollowing"]

log = logging.getLogger("batonpass")

#: with no cline in the pane, or idle, look again this often
RECHECK_S = 2.0
#: while a turn is open, look this often (the screen's dialogs)
LOOK_S = 0.3
#: before the first prompt (no session yet), look this often (the provider picker, a notice)
NO_SESSION_S = 1.0


class ClineFollowing(SessionFollowing[ClineProcess, SessionFile, Turn]):
    """The part of the Cline adapter that keeps up with the pane's session and reports its turns."""

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._checked = 0.0
        #: Cline's log, read on from where the last look stopped (which process started which session)
        self._log: LaunchLog | None = None

    async def refresh(self, *, force: bool = False) -> ClineProcess | None:
        """The pane's cline, its session (looked for while unknown, every :data:`RECHECK_S`, or when
        ``force``), its files read if they changed."""
        async with self._lock:
            now = time.monotonic()
            process = self._process
            if process is None or force or self.file is None or now - self._checked > RECHECK_S \
                    or not process.alive():
                info = await self.ctx.pane()
                self._checked = now
                found = await anyio.to_thread.run_sync(find_cline, info.pid)
                if found is None or process is None or found.proc != process.proc:
                    self._switch(None)
                    self._process = process = found
                if process is not None:
                    launches = self._launch_log(process)
                    res = await anyio.to_thread.run_sync(lambda: resolve_session(info.pid, process=process,
                                                                                 log=launches))
                    if res.session is not None and (self.file is None or res.session != self.file.path):
                        log.info("%s: cline session %s (rule: %s)", self.ctx.name, res.session.parent.name,
                                 res.rule)
                        self._switch(res.session)
            if self.file is not None:
                await anyio.to_thread.run_sync(self.file.read)
            return process

    def _launch_log(self, process: ClineProcess) -> LaunchLog:
        if self._log is None or self._log.path != process.log_file:
            self._log = LaunchLog(process.log_file)
        return self._log

    def _open(self, path: Path) -> SessionFile:
        return SessionFile(path)

    def _folder(self, process: ClineProcess | None) -> Path | None:
        """The sessions folder (a session's is made in it at its first prompt)."""
        return process.sessions_dir if process is not None else None

    def _pending(self, last: Turn | None) -> bool:
        """No session yet, the record says a turn runs, or the last turn open."""
        return self.file is None or self.file.state.busy or super()._pending(last)

    async def _pause(self, tg: TaskGroup, process: ClineProcess | None, sub: Subscription | None,
                     pending: bool) -> None:
        timeout = (LOOK_S if self.file is not None else NO_SESSION_S) if pending else RECHECK_S
        if sub is not None and process is not None:
            await sub.wait(timeout)
        else:
            await anyio.sleep(min(timeout, 0.5) if process is not None else RECHECK_S)
