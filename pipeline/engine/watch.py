"""One shared file watcher for every tile: agents' home folders are watched once, not once per tile.

On Linux it is inotify read through the event loop (:mod:`pipeline.system.inotify`): a hint within a
fraction of a millisecond of the write, and nothing running while nothing changes. Elsewhere (or with
``BATON_WATCHER=watchfiles``) it is one ``watchfiles.awatch`` (a worker thread) with tuned latency
(``step=10, debounce=200``: ~15 ms from a write to the hint instead of watchfiles' default 50–100 ms; a
smaller step is faster but wakes the thread that much more often while idle, see bench/bench_watch.py).
Either way it runs over the union of the folders its subscribers asked for. A change is a *hint*:
subscribers confirm from the file's content. When the set of folders changes the watcher restarts and
every subscriber gets one hint, so nothing written during the restart is missed.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from pipeline.system import inotify

__all__ = ["FileWatcher", "Subscription"]

log = logging.getLogger("batonpass")


class Subscription:
    """Hints for one path (a file, or a folder and everything under it). Hints coalesce: a subscriber
    that was busy gets one wake-up with all paths changed since, never a backlog."""

    def __init__(self, watcher: FileWatcher, path: Path, *more: Path,
                 only: Callable[[Path], bool] | None = None) -> None:
        self.watcher, self.path = watcher, path
        #: which changed paths are worth a wake-up (None: all); asked when the change is read
        self.only = only
        #: every path this subscription covers (``path`` first)
        self.paths = (path, *more)
        # as strings, for matching a batch of changes against every subscription without pathlib
        self._strs = tuple(str(p) for p in self.paths)
        self._under = tuple(s.rstrip("/") + "/" for s in self._strs)
        self._parents = tuple(str(p.parent) for p in self.paths)
        self._send: MemoryObjectSendStream[None]
        self._receive: MemoryObjectReceiveStream[None]
        self._send, self._receive = anyio.create_memory_object_stream[None](1)
        self.changed: set[Path] = set()
        #: the file this subscriber follows in a folder shared with others (:meth:`claim`)
        self.claimed: str | None = None
        self._others = True
        #: in the watcher's lookup by path (else it hears only of what it claimed)
        self._filed = False

    def _notify(self, path: Path | None) -> None:
        if path is not None:
            if self.only is not None and not self.only(path):
                return
            self.changed.add(path)
        try:
            self._send.send_nowait(None)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # a wake-up is already pending

    def claim(self, path: Path | None) -> None:
        """Changes at ``path`` are this subscriber's: they wake it even while :attr:`others` is False.
        None: no file claimed. A path that is not under the subscription's own paths as written (a
        symlink resolved, say) is claimed but does not let :attr:`others` take effect: its changes might
        arrive under another name."""
        self.watcher._claim(self, None if path is None else os.path.abspath(path))

    @property
    def others(self) -> bool:
        """Whether changes at paths this subscriber did not claim are asked about (``only``); True by
        default. A follower of one file in a folder shared by many tiles sets it False while the other
        files cannot matter to it: a write by one of 50 tiles then costs one subscriber, not 50."""
        return self._others

    @others.setter
    def others(self, value: bool) -> None:
        self._others = value
        self.watcher._refile(self)

    def _hears_only_claimed(self) -> bool:
        return not self._others and self.claimed is not None and self.matches(self.claimed)

    def wake(self) -> None:
        """A hint from elsewhere (say, the process that writes the files exited): the waiter looks again."""
        self._notify(None)

    def covers(self, path: Path) -> bool:
        return self.matches(str(path))

    def matches(self, raw: str) -> bool:
        """Whether a change at ``raw`` concerns this subscription: one of its paths or anything under it,
        one of their parent folders, or a folder above them (created or removed while they did not exist)."""
        for here, under, parent in zip(self._strs, self._under, self._parents, strict=True):
            if raw == here or raw == parent or raw.startswith(under) or here.startswith(raw + "/"):
                return True
        return False

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
        self._subs: dict[Subscription, None] = {}  # an ordered set
        # which subscriptions a changed path concerns, looked up along the path instead of asked one by one
        # (a batch of changes costs its paths' depth, not the number of tiles): by a path subscribed to (the
        # change is at it or under it), and by each folder above a path subscribed to (the change is there)
        # (dicts used as ordered sets: a subscription leaves and rejoins them as its ``others`` changes)
        self._at: dict[str, dict[Subscription, None]] = {}
        self._above: dict[str, dict[Subscription, None]] = {}
        #: a claimed file -> who claimed it (:meth:`Subscription.claim`)
        self._claims: dict[str, dict[Subscription, None]] = {}
        self._roots: frozenset[Path] = frozenset()
        self._changed = anyio.Event()

    @property
    def watching(self) -> frozenset[Path]:
        """The folders watched now. A subscription that needs a new folder is covered once the restart has
        put it here (the watch is set up in the same step, so a change from then on is seen)."""
        return self._roots

    def subscribe(self, path: str | os.PathLike[str], *more: str | os.PathLike[str],
                  only: Callable[[Path], bool] | None = None) -> Subscription:
        """Hints for ``path`` (and any of ``more``: one wake-up for changes to any of them). They need not
        exist yet: the nearest existing ancestor is watched until they do. ``only(changed_path)`` says which
        changes wake the subscriber (a folder shared by many tiles: each wakes for what concerns it); a
        restart of the watcher wakes it whatever ``only`` says."""
        sub = Subscription(self, Path(os.path.abspath(path)), *(Path(os.path.abspath(p)) for p in more),
                           only=only)
        self._subs[sub] = None
        self._refile(sub)
        self._roots_changed()
        return sub

    def _unsubscribe(self, sub: Subscription) -> None:
        if sub in self._subs:
            del self._subs[sub]
            self._claim(sub, None)
            sub._others = True
            self._file(sub, False)
            self._roots_changed()

    def _refile(self, sub: Subscription) -> None:
        """In the lookup by path unless it hears only of the file it claimed."""
        if sub in self._subs:
            self._file(sub, not sub._hears_only_claimed())

    def _file(self, sub: Subscription, filed: bool) -> None:
        """Put ``sub`` in the lookup by path, or take it out (it then hears only of what it claimed)."""
        if filed == sub._filed:
            return
        sub._filed = filed
        for key, index in self._keys(sub):
            if filed:
                index.setdefault(key, {})[sub] = None
            else:
                subs = index.get(key, {})
                subs.pop(sub, None)
                if not subs:
                    index.pop(key, None)

    def _claim(self, sub: Subscription, path: str | None) -> None:
        if path == sub.claimed:
            return
        if sub.claimed is not None:
            claimers = self._claims[sub.claimed]
            claimers.pop(sub, None)
            if not claimers:
                del self._claims[sub.claimed]
        sub.claimed = path
        if path is not None:
            self._claims.setdefault(path, {})[sub] = None
        self._refile(sub)

    def _keys(self, sub: Subscription) -> Iterator[tuple[str, dict[str, dict[Subscription, None]]]]:
        """Where ``sub`` is filed in the lookup: at each of its paths, and above each of them."""
        for here in sub._strs:
            yield here, self._at
            parent = os.path.dirname(here)
            folder, below = parent, here
            while folder != below:
                if folder == parent or here.startswith(folder + "/"):  # not "/" above a deeper path
                    yield folder, self._above
                folder, below = os.path.dirname(folder), folder

    def _wanted_roots(self) -> frozenset[Path]:
        roots = set()
        for sub in self._subs:
            for path in sub.paths:
                while not path.is_dir() and path != path.parent:
                    path = path.parent
                roots.add(str(path))
        # a root inside another root is covered by it (awatch is recursive)
        return frozenset(Path(r) for r in roots if not _inside_any(r, roots))

    def _roots_changed(self) -> None:
        if self._wanted_roots() != self._roots:
            self._changed.set()

    async def run(self) -> None:
        """Watch until cancelled, restarting whenever the set of folders changes."""
        while True:
            self._roots = self._wanted_roots()
            self._changed = anyio.Event()
            for sub in list(self._subs):
                sub._notify(None)  # anything may have changed while no watcher ran
            if not self._roots:
                await self._changed.wait()
                continue
            async with anyio.create_task_group() as tg:

                async def restart_on_change(scope: anyio.CancelScope = tg.cancel_scope) -> None:
                    await self._changed.wait()
                    scope.cancel()

                tg.start_soon(restart_on_change)
                try:
                    if inotify.available():
                        await self._watch_inotify()
                    else:
                        await self._watch_watchfiles()
                except FileNotFoundError:
                    await anyio.sleep(0.2)  # a root vanished between planning and watching
                tg.cancel_scope.cancel()

    async def _watch_inotify(self) -> None:
        """Until a folder we waited for exists (then it is watched directly) or one went away."""
        with inotify.Inotify() as ino:
            for root in self._roots:
                ino.add_tree(str(root))
            while True:
                paths, folders = await ino.changes()
                self._dispatch((None, p) for p in paths)
                if folders and self._wanted_roots() != self._roots:
                    return

    async def _watch_watchfiles(self) -> None:
        from watchfiles import awatch

        stop = threading.Event()

        async def stop_when_cancelled() -> None:
            # awatch waits for its thread even when cancelled, and the thread ends on the stop event (or after
            # rust_timeout): set it the moment a cancellation comes, not after awatch gave up waiting
            try:
                await anyio.sleep_forever()
            finally:
                stop.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(stop_when_cancelled)
            try:
                # rust_timeout: how often the thread comes back with nothing (the stop event ends it anyway)
                async for changes in awatch(*self._roots, watch_filter=None, step=self.step_ms,
                                            debounce=self.debounce_ms, stop_event=stop, recursive=True,
                                            rust_timeout=60_000, ignore_permission_denied=True):
                    self._dispatch(changes)
                    if self._wanted_roots() != self._roots:
                        return  # a folder we waited for now exists: watch it directly
            finally:
                stop.set()
                tg.cancel_scope.cancel()

    def _dispatch(self, changes: Iterable[tuple[object, str]]) -> None:
        """Each changed path to the subscriptions it concerns (what :meth:`Subscription.matches` says, found
        along the path: at it, at a folder above it, or above a path subscribed to), and to whoever claimed
        it (:meth:`Subscription.claim`)."""
        hits: dict[Subscription, set[str]] = {}
        for raw in {raw for _, raw in changes}:
            for sub in self._claims.get(raw, ()):
                hits.setdefault(sub, set()).add(raw)
            for sub in self._above.get(raw, ()):
                hits.setdefault(sub, set()).add(raw)
            path, folder = raw, os.path.dirname(raw)
            while True:
                for sub in self._at.get(path, ()):
                    hits.setdefault(sub, set()).add(raw)
                if folder == path:
                    break
                path, folder = folder, os.path.dirname(folder)
        paths: dict[str, Path] = {}
        for sub, raws in hits.items():
            for raw in raws:
                changed = paths.get(raw)
                if changed is None:
                    changed = paths[raw] = Path(raw)
                sub._notify(changed)


def _inside_any(path: str, folders: set[str]) -> bool:
    """Whether a proper ancestor of ``path`` is one of ``folders``."""
    parent = os.path.dirname(path)
    while parent != path:
        if parent in folders:
            return True
        path, parent = parent, os.path.dirname(parent)
    return False
