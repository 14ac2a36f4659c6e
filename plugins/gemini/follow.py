"""Following one Gemini CLI tile: the pane's gemini process, its session file (re-resolved when the process
changes: the trust dialog's restart makes a new child with a new session; and when a file comes or goes in
its folder: ``/clear`` starts a new session file in the same process), and the turns that end in it.

A turn whose last message is an answer without tool calls only *looks* finished: while a tool waits for
approval or runs, the file looks exactly the same. It is reported once the AfterAgent hook confirms it
(:meth:`GeminiFollowing.confirm`), or once the screen has shown neither the busy line nor a dialog on two
looks :data:`~pipeline.plugin.session_follow.SETTLE_S` apart with the file unchanged
(:class:`~pipeline.plugin.session_follow.SessionFollowing`). An interrupt (``Request cancelled.``) or an
error is certain and reported at once.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from pipeline.plugin import TmuxError
from pipeline.plugin.session_follow import SessionFollowing, folder_stamp
from pipeline.plugin.tools import proc, strip_ansi
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
#: a folder mtime younger than this may be shared by the next change (file times tick by the jiffy)
FRESH_NS = 50_000_000


class GeminiFollowing(SessionFollowing[GeminiProcess, SessionFile, Turn]):
    """The part of the Gemini CLI adapter that keeps up with the pane's session file and reports its turns."""

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._checked = 0.0
        self._resolved_at = 0.0
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
            elif self.hook_file and self.file and str(self.file.path) != self.hook_file:
                await self._resolve(process)
            elif self.file is not None and (folder_stamp(self.file.path.parent) != self._folder_stamp or (
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
        stamp = folder_stamp(current.parent) if current is not None else None
        if stamp is not None and time.time_ns() - stamp < FRESH_NS:
            stamp = -1
        screen = None
        if current is not None:  # the screen tells whose a new session is (another pane in the folder)
            try:
                screen = strip_ansi(await self.ctx.capture())
            except TmuxError:
                pass
        res = await anyio.to_thread.run_sync(lambda: resolve_session(
            info.pid, hook_transcript=self.hook_file, last_prompt=self.last_prompt,
            prompt_sent_at=self.prompt_sent_at, process=process, screen=screen, current=current))
        self._resolved_at, self._unsure = time.monotonic(), res.unsure
        if res.session is not None and (self.file is None or res.session != self.file.path):
            log.info("%s: gemini session file %s (rule: %s)", self.ctx.name, res.session, res.rule)
            self._switch(res.session)
        self._folder_stamp = stamp  # None (no file known before): stamped by the next look's resolve

    def _open(self, path: Path) -> SessionFile:
        return SessionFile(path)

    # ---- the follower ------------------------------------------------------------------------------------

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

    async def _pause(self, tg: TaskGroup, process: GeminiProcess | None, sub: Subscription | None,
                     pending: bool) -> None:
        quiet = self._watch_exit(tg, process, sub) and process is not None and process.relaunched
        timeout = LOOK_S if pending else None if quiet and not self._unsure else RECHECK_S
        if sub is not None and self.file is not None:
            await sub.wait(timeout)
        else:  # no session file yet (it is made at startup): soon; no gemini in the pane: seldom
            await anyio.sleep(min(timeout or 0.5, 0.5) if process is not None else RECHECK_S)
