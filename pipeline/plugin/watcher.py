"""The shared file watcher as a plugin sees it (``ctx.watcher``): subscribe to paths, wait for hints.

The engine's watcher (``pipeline.engine.watch``: inotify on Linux, watchfiles elsewhere) is one of these;
a plugin is written against this shape only, so it never imports the engine.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

__all__ = ["FileWatcher", "Subscription"]


class Subscription(Protocol):
    """Hints for one path (a file, or a folder and everything under it), and any more subscribed with it.
    Hints coalesce: a subscriber that was busy gets one wake-up with every path changed since."""

    #: the first path subscribed to
    path: Path

    async def wait(self, timeout: float | None = None) -> set[Path]:
        """Wait for the next hint (or ``timeout`` seconds); the paths changed since the last wait."""
        ...

    def wake(self) -> None:
        """A hint from elsewhere (the process that writes the files exited, say): the waiter looks again."""
        ...

    def claim(self, path: Path | None) -> None:
        """Changes at ``path`` are this subscriber's: they wake it even while :attr:`others` is False."""
        ...

    @property
    def others(self) -> bool:
        """Whether changes at paths this subscriber did not claim are asked about (``only``); True by
        default. A follower of one file in a folder shared by many tiles sets it False meanwhile."""
        ...

    @others.setter
    def others(self, value: bool) -> None: ...

    def close(self) -> None:
        """No more hints: the watcher lets the paths go."""
        ...

    def __enter__(self) -> Subscription: ...

    def __exit__(self, *exc: object) -> None: ...


class FileWatcher(Protocol):
    """The engine's one watcher of files, shared by every tile."""

    def subscribe(self, path: str | os.PathLike[str], *more: str | os.PathLike[str],
                  only: Callable[[Path], bool] | None = None) -> Subscription:
        """Hints for ``path`` (and any of ``more``). They need not exist yet: the nearest existing ancestor
        is watched until they do. ``only(changed_path)`` says which changes wake the subscriber (a folder
        shared by many tiles: each wakes for what concerns it)."""
        ...
