"""One ``baton run`` per state folder: the journal is its memory of what was handed off, and two daemons
sharing it lose and double hand-offs.

Two daemons on one journal both see the same turn end and race to route it; with tiles on several hosts
the target host's daemon takes the source's record of a hand-off for its own and drops the message as a
duplicate. So a daemon holds an exclusive ``flock`` on ``daemon.lock`` beside the journal for as long as
it runs; the kernel lets go of it when the process dies, SIGKILL included, so a crash never leaves a stale
lock behind. The file says who holds it, for the error the second daemon prints.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson

__all__ = ["StateFolderBusy", "hold_state_folder"]


class StateFolderBusy(Exception):
    """Another ``baton run`` holds the state folder."""


@contextmanager
def hold_state_folder(folder: Path, host: str) -> Iterator[None]:
    """Hold ``folder`` for this process, or raise :class:`StateFolderBusy` naming the holder."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / "daemon.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StateFolderBusy(_busy_message(path, host)) from None
        os.ftruncate(fd, 0)
        os.write(fd, orjson.dumps({"pid": os.getpid(), "host": host, "machine": socket.gethostname(),
                                   "since": time.time()}))
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _busy_message(path: Path, host: str) -> str:
    try:
        holder = orjson.loads(path.read_bytes())
        who = f"baton run (pid {int(holder['pid'])}, host {str(holder['host'])!r})"
    except (OSError, ValueError, TypeError, KeyError):
        who = "another baton run"
    return (f"{who} already uses {path.parent} (its journal); a second daemon on the same journal would "
            f"lose or double hand-offs. Stop it, or give this one (host {host!r}) its own folder: "
            f"XDG_STATE_HOME=/some/other/dir baton run")
