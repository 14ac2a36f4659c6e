"""Following one Qwen Code tile: the pane's Qwen Code process, the session its pid file names (``/clear``
names a new one), that session's file, and the turns that end in it.

A turn's end is certain from the file (a reply without function calls, written once the reply is whole), so
it is reported at once; only an API error that a retry may follow waits for the screen to show Qwen idle.
While a turn runs, the screen is read for a permission prompt (told to the engine: ``waiting``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from pipeline.plugin.session_follow import SessionFollowing
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


class QwenFollowing(SessionFollowing[QwenProcess, SessionFile, Turn]):
    """The part of the Qwen Code adapter that keeps up with the pane's session file and reports its turns."""

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.session_id: str | None = None

    # ---- keeping up with the pane's session file ----------------------------------------------------------

    async def refresh(self, *, force: bool = False) -> QwenProcess | None:
        """The pane's Qwen Code process, the session its pid file names, that file's new lines read."""
        async with self._lock:
            process = self._process
            if process is None or not process.alive() or force:
                info = await self.ctx.pane()
                found = await anyio.to_thread.run_sync(find_qwen, info.pid)
                if found is None or process is None or found.proc != process.proc:
                    self._follow_session(None, None)
                    self._process = process = found
            if process is None:
                return None
            res = await anyio.to_thread.run_sync(lambda: resolve_session(0, process))
            if res.session_id != self.session_id or (self.file is None) != (res.session is None):
                log.info("%s: qwen session %s, file %s", self.ctx.name, res.session_id, res.session)
                self._follow_session(res.session_id, res.session)
            if self.file is not None:
                await anyio.to_thread.run_sync(self.file.read)
            return process

    def _follow_session(self, session_id: str | None, path: Path | None) -> None:
        """Follow session ``session_id`` (its file ``path``, once made) from now on."""
        self.session_id = session_id
        self._switch(path)

    def _open(self, path: Path) -> SessionFile:
        return SessionFile(path)

    def _turns_in(self, file: SessionFile) -> list[Turn]:
        return file.state.turns

    def _followed_session(self) -> str | None:
        return self.session_id

    # ---- the follower ------------------------------------------------------------------------------------

    async def _pause(self, tg: TaskGroup, process: QwenProcess | None, sub: Subscription | None,
                     pending: bool) -> None:
        if sub is not None and self.file is not None:
            await sub.wait(LOOK_S if pending else RECHECK_S)
        else:
            await anyio.sleep(LOOK_S if process is not None else RECHECK_S)

    def _held(self, turn: Turn, last: Turn | None, busy: bool) -> bool:
        """An API error's end waits while the screen is busy (a retry may follow), however short."""
        return turn.provisional and busy
