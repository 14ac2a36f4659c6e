"""A journal that cannot be written (a full disk, a read-only file or folder, a lock another process holds,
a damaged file) is a *fault*, not a crash: what it is, the one line that says what to do, and the waits
that pause whatever depends on the journal until it can be written again."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import anyio

from pipeline.engine.journal.schema import JournalBase

log = logging.getLogger("batonpass")
T = TypeVar("T")

#: a journal that cannot be written is tried again this soon, then less often
RETRY_FIRST_S, RETRY_MAX_S = 0.2, 5.0
#: SQLite's primary result codes that say the file cannot be used now (not a bug in a statement): busy,
#: locked, no memory, read-only, I/O error, damaged, full, cannot open, protocol, not a database
_FAULT_CODES = {5, 6, 7, 8, 10, 11, 13, 14, 15, 26}
_LOCKED, _READ_ONLY, _DAMAGED, _FULL = {5, 6}, {8, 14}, {11, 26}, {13}
_NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EEXIST, errno.EISDIR)


class JournalUnusable(Exception):
    """The journal (or its folder) cannot be written: the message names the file and the fix."""


def is_fault(exc: BaseException) -> bool:
    """``exc``, from SQLite, says the journal cannot be used now (a full disk, read-only, locked, damaged)
    rather than a mistake in batonpass (a syntax error is no fault)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, sqlite3.DatabaseError) and isinstance(code, int) and code & 0xFF in _FAULT_CODES


def describe(exc: BaseException, path: Path) -> str:
    """What is wrong with the journal at ``path`` and what to do, in one line."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    where = getattr(exc, "filename", None) or path
    if code in _DAMAGED:
        return (f"the journal {path} is damaged ({why}): move it aside (mv {path} {path}.damaged) and "
                "baton run starts a new one")
    if code in _LOCKED:
        return (f"the journal {path} is locked by another process ({why}): end the program that holds it "
                f"(fuser -v {path}), then start again")
    if code in _FULL or getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return f"no room to write {where} ({why}): free space on its disk"
    if code in _READ_ONLY or getattr(exc, "errno", None) in _NOT_WRITABLE:
        return (f"cannot write {where} ({why}): make it and its folder writable (chmod u+w; chattr -i; a "
                "read-only mount), or point XDG_STATE_HOME at a folder you can write")
    return f"cannot use the journal {path} ({why}): check its disk, or point XDG_STATE_HOME elsewhere"


def check_folder(folder: Path) -> None:
    """Make ``folder`` (0700) and write and remove a small file in it: raises :class:`JournalUnusable` when
    it cannot be made or written (read-only, full, not a folder)."""
    probe = folder / f".probe-{os.getpid()}"
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(probe, "wb") as f:
            f.write(b"batonpass checks it can write here\n")
    except OSError as exc:
        raise JournalUnusable(describe(exc, folder)) from None
    finally:
        with contextlib.suppress(OSError):
            probe.unlink()


class FaultPauses(JournalBase):
    """The journal's calls that wait out a fault: a write that cannot go through pauses its caller — one
    log line says why, one says when a write went through again — and nothing is dropped."""

    def probe(self) -> None:
        """One real write that changes nothing (the header's ``user_version``, set to what it is): raises
        what any write would raise now."""
        (version,) = self.db.execute("PRAGMA user_version").fetchone()
        self.db.execute(f"PRAGMA user_version = {int(version)}")

    def try_write(self, write: Callable[[], object]) -> bool:
        """``write()``; False, said once per pause, when the journal cannot be written now. In a pause
        the probe goes first: a write that happens to change nothing proves nothing."""
        try:
            if self.fault:
                self.probe()
            write()
        except sqlite3.Error as exc:
            if not is_fault(exc):
                raise
            self._paused(exc)
            return False
        self._resumed()
        return True

    async def until_writable(self) -> None:
        """Wait until a write goes through (tried again and again, less and less often)."""
        delay = RETRY_FIRST_S
        while not self.try_write(self.probe):
            await anyio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)

    async def until_done(self, call: Callable[[], T]) -> T:
        """``call()``, a write, waiting out a journal that cannot be used now: the caller, and what it
        would do next, waits with it; nothing is dropped."""
        return await self._until(call, resumes=True)

    async def until_read(self, call: Callable[[], T]) -> T:
        """``call()``, a read, waited out like a write; a read that goes through says nothing of writes."""
        return await self._until(call, resumes=False)

    async def _until(self, call: Callable[[], T], *, resumes: bool) -> T:
        delay = RETRY_FIRST_S
        while True:
            try:
                if resumes and self.fault:
                    self.probe()
                result = call()
            except sqlite3.Error as exc:
                if not is_fault(exc):
                    raise
                self._paused(exc)
                await anyio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
                continue
            if resumes:
                self._resumed()
            return result

    async def recover(self, exc: BaseException) -> None:
        """After ``exc``, a fault raised by a journal call made elsewhere: say so (once), wait a moment,
        then until the journal can be written again."""
        self._paused(exc)
        await anyio.sleep(RETRY_FIRST_S)
        await self.until_writable()

    def _paused(self, exc: BaseException) -> None:
        if not self.fault:
            self.fault = describe(exc, self.path)
            log.error("journal: %s; delivery paused: nothing is typed until the journal can be written",
                      self.fault)

    def _resumed(self) -> None:
        if self.fault:
            self.fault = ""
            log.warning("journal: %s can be written again; delivery resumes", self.path)
