"""Following one pi tile: the pane's pi process, its session file (resolved again when the process changes,
when a file is made in its folder — the first prompt, or the first after ``/new`` — or when a hook names
another), and the turns that end in it.

pi writes each message whole once it is finished, so a ``stop``/``length`` assistant message is the turn's
end and is reported at once. An ``error`` may be retried (pi's auto-retry writes another assistant message
after a back-off): it is reported once the hook says pi settled, or once the screen has shown no busy line
on two looks :data:`~pipeline.plugin.session_follow.SETTLE_S` apart with the file unchanged
(:class:`~pipeline.plugin.session_follow.SessionFollowing`).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from pipeline.plugin.session_follow import SessionFollowing, folder_stamp
from plugins.pi.resolve import PiProcess, find_pi, resolve_session, session_folder
from plugins.pi.session import SessionFile, Turn

if TYPE_CHECKING:
    from pipeline.plugin.tools import Subscription

__all__ = ["PiFollowing"]

log = logging.getLogger("batonpass")

#: with no session file known, or no pi in the pane, look again this often
RECHECK_S = 2.0
#: while a turn is open (or its end must be confirmed), look this often
LOOK_S = 0.3


class PiFollowing(SessionFollowing[PiProcess, SessionFile, Turn]):
    """The part of the pi adapter that keeps up with the pane's session file and reports its turns."""

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._checked = 0.0
        self._folder_stamp: int | None = None

    # ---- keeping up with the pane's session file ----------------------------------------------------------

    async def refresh(self, *, force: bool = False) -> PiProcess | None:
        """The pane's pi process, its session file (resolved when unknown, changed or asked to), new lines
        read."""
        async with self._lock:
            now = time.monotonic()
            process = self._process
            looked = process is None or not process.alive() or force or now - self._checked > RECHECK_S
            if looked:
                info = await self.ctx.pane()
                self._checked = now
                found = await anyio.to_thread.run_sync(find_pi, info.pid)
                if found is None or process is None or found.proc != process.proc:
                    self._switch(None)
                    self._process = process = found
            if process is None:
                return None
            folder, _ = session_folder(process)
            stamp = folder_stamp(folder) if folder is not None else None
            hooked = self.hook_file and (self.file is None or str(self.file.path) != self.hook_file)
            if force or hooked or stamp != self._folder_stamp or (self.file is None and looked):
                self._folder_stamp = stamp
                await self._resolve(process)
            if self.file is not None:
                await anyio.to_thread.run_sync(self.file.read)
            return process

    async def _resolve(self, process: PiProcess) -> None:
        info = await self.ctx.pane()
        res = await anyio.to_thread.run_sync(lambda: resolve_session(
            info.pid, hook_session=self.hook_file, last_prompt=self.last_prompt, process=process))
        if res.session is not None and (self.file is None or res.session != self.file.path):
            log.info("%s: pi session file %s (rule: %s)", self.ctx.name, res.session, res.rule)
            self._switch(res.session)

    def _open(self, path: Path) -> SessionFile:
        return SessionFile(path)

    # ---- the follower ------------------------------------------------------------------------------------

    def _folder(self, process: PiProcess | None) -> Path | None:
        """The sessions folder (the file is made in it at the first prompt), once it exists."""
        folder = session_folder(process)[0] if process is not None else None
        return folder if folder is not None and folder.is_dir() else None

    async def _pause(self, tg: TaskGroup, process: PiProcess | None, sub: Subscription | None,
                     pending: bool) -> None:
        timeout = LOOK_S if pending or self.file is None and process is not None else RECHECK_S
        if sub is not None and process is not None:
            await sub.wait(timeout)
        else:
            await anyio.sleep(min(timeout, 0.5) if process is not None else RECHECK_S)

    def _pending(self, last: Turn | None) -> bool:
        """No session file yet (the first prompt makes it), or the last turn open or unconfirmed."""
        return self.file is None or super()._pending(last)
