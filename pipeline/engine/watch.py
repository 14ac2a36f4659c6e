"""One shared file watcher for every tile: agents' home folders are watched once, not once per tile.

Each ``watchfiles.awatch`` holds a worker thread, so batonpass runs exactly one, over the union of the
folders its subscribers asked for, with tuned latency (``step=10, debounce=200`` gives ~15 ms from a
write to the hint instead of watchfiles' default 50–100 ms). A change is a *hint*: subscribers confirm
from the file's content. When the set of folders changes the watcher restarts and every subscriber gets
one hint, so nothing written during the restart is missed.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from pathlib import Path

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

__all__ = ["FileWatcher", "Subscription"]

log = logging.getLogger("batonpass")


class Subscription:
    """Hints for one path (a file, or a folder and everything under it). Hints coalesce: a subscriber
    that was busy gets one wake-up with all paths changed since, never a backlog."""

    def __init__(self, watcher: FileWatcher, path: Path) -> None:
        self.watcher, self.path = watcher, path
        self._send: MemoryObjectSendStream[None]
        self._receive: MemoryObjectReceiveStream[None]
        self._send, self._receive = anyio.create_memory_object_stream[None](1)
        self.changed: set[Path] = set()

    def _notify(self, path: Path | None) -> None:
        if path is not None:
            self.changed.add(path)
        try:
            self._send.send_nowait(None)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # a wake-up is already pending

    def covers(self, path: Path) -> bool:
        return path == self.path or self.path in path.parents

    async def wait(self, timeout: float | None = None) -> set[Path]:
        """Wait for the next hint (or ``timeout`` seconds) and return the paths changed since last time."""
        with anyio.move_on_after(timeout):
            await self._receive.receive()
        changed, self.changed = self.changed, set()
        return changed

    def close(self) -> None:
        self.watcher._unsubscribe(self)
        self._send.close()
        self._receive.close()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FileWatcher:
    def __init__(self, *, step_ms: int = 10, debounce_ms: int = 200) -> None:
        self.step_ms, self.debounce_ms = step_ms, debounce_ms
        self._subs: list[Subscription] = []
        self._roots: frozenset[Path] = frozenset()
        self._changed = anyio.Event()

    @property
    def watching(self) -> frozenset[Path]:
        """The folders watched now. A subscription that needs a new folder is covered once the restart has
        put it here (the watch is set up in the same step, so a change from then on is seen)."""
        return self._roots

    def subscribe(self, path: str | os.PathLike[str]) -> Subscription:
        """Hints for ``path``. It need not exist yet: its nearest existing ancestor is watched until it
        does."""
        sub = Subscription(self, Path(os.path.abspath(path)))
        self._subs.append(sub)
        self._roots_changed()
        return sub

    def _unsubscribe(self, sub: Subscription) -> None:
        if sub in self._subs:
            self._subs.remove(sub)
            self._roots_changed()

    def _wanted_roots(self) -> frozenset[Path]:
        roots = set()
        for sub in self._subs:
            path = sub.path
            while not path.is_dir() and path != path.parent:
                path = path.parent
            roots.add(path)
        # a root inside another root is covered by it (awatch is recursive)
        return frozenset(r for r in roots if not any(o in r.parents for o in roots))

    def _roots_changed(self) -> None:
        if self._wanted_roots() != self._roots:
            self._changed.set()

    async def run(self) -> None:
        """Watch until cancelled, restarting whenever the set of folders changes."""
        from watchfiles import awatch

        while True:
            self._roots = self._wanted_roots()
            self._changed = anyio.Event()
            for sub in list(self._subs):
                sub._notify(None)  # anything may have changed while no watcher ran
            if not self._roots:
                await self._changed.wait()
                continue
            stop = threading.Event()
            async with anyio.create_task_group() as tg:

                async def restart_on_change(stop: threading.Event = stop) -> None:
                    await self._changed.wait()
                    stop.set()

                tg.start_soon(restart_on_change)
                try:
                    async for changes in awatch(*self._roots, watch_filter=None, step=self.step_ms,
                                                debounce=self.debounce_ms, stop_event=stop, recursive=True,
                                                rust_timeout=500, ignore_permission_denied=True):
                        self._dispatch(changes)
                        if self._wanted_roots() != self._roots:
                            break  # a folder we waited for now exists: watch it directly
                except FileNotFoundError:
                    await anyio.sleep(0.2)  # a root vanished between planning and watching
                finally:
                    stop.set()
                tg.cancel_scope.cancel()

    def _dispatch(self, changes: Iterable[tuple[object, str]]) -> None:
        for _, raw in changes:
            path = Path(raw)
            for sub in list(self._subs):
                if sub.covers(path) or path in sub.path.parents or path == sub.path.parent:
                    sub._notify(path)
