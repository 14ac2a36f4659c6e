"""What every page of ``baton web`` shows, made once in the server and sent to each page that listens.

The data is the live board's own (:mod:`pipeline.views.live_board`: this host's tiles, looked at again
when a file they write changes; with a bus, :mod:`pipeline.views.hosts_board`'s every other host's tiles).
Each time either feed says something changed, :class:`WebFeed` turns the boards into one JSON frame; a
frame equal to the last one is not sent. Each page holds a :class:`Listener` that keeps only the newest
frame: a slow page skips frames, it never makes the server queue them. No page asks the server anything on
a timer — the clocks (``working 2m10s``) tick in the page from ``since``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import anyio
import orjson

from pipeline.engine.config import Config
from pipeline.engine.tiles import TileRuntime
from pipeline.views.awaiting import read_awaiting
from pipeline.views.board import TileView, dollars, read_recent, tokens
from pipeline.views.live_board import TileFeed, Wake

__all__ = ["Listener", "WebFeed"]

log = logging.getLogger("batonpass")
#: how much of each last answer the page shows (its first line)
PREVIEW = 1000
#: the hand-offs the page lists (newest first), failed ones with a Retry button
RECENT = 20


class Listener:
    """One page's end of the feed: the newest frame not yet sent to it (older ones are dropped)."""

    def __init__(self) -> None:
        self.frame: bytes | None = None
        self.wake = Wake()

    closed = False

    def close(self) -> None:
        self.closed = True
        self.wake.set()

    def put(self, frame: bytes) -> None:
        self.frame = frame
        self.wake.set()

    async def next(self, timeout: float) -> bytes | None:
        """The newest frame, or None when ``timeout`` passed with none (time for a keep-alive)."""
        while self.frame is None and not self.closed:
            if not await self.wake.wait(timeout):
                return None
        frame, self.frame = self.frame, None
        return frame


def _tile(view: TileView, host: str, local: bool) -> dict[str, Any]:
    u, last = view.usage, view.last
    return {"tile": view.tile, "host": host, "local": local, "agent": view.agent, "kind": view.kind,
            "words": view.words, "since": view.since, "answer": view.answer, "queued": view.queued,
            "last": asdict(last) if last else None,
            "tokens": tokens(u.total) if u else "", "cost": dollars(u.cost_usd) if u else ""}


class WebFeed:
    """The boards, as frames, to every :class:`Listener`."""

    def __init__(self, config: Config, tiles: dict[str, TileRuntime], host: str,
                 bus_link: Any = None) -> None:
        self.config, self.host = config, host
        self.local = TileFeed(config, tiles, self.changed, preview_chars=PREVIEW)
        self.hosts: Any = None
        if bus_link is not None:
            from pipeline.views.hosts_board import HostsFeed

            self.hosts = HostsFeed(bus_link, "all hosts", self.changed, but=host)
        self.listeners: set[Listener] = set()
        self.wake = Wake()
        self.last: bytes = b""
        self.recent: list[dict[str, Any]] = []
        self.held: set[str] = set()
        #: the hand-offs awaiting a person, with their full prompts (the page's Pass and Drop)
        self.awaiting: list[dict[str, Any]] = []
        self.within = {r.label: r.within_s for r in config.routes if r.gate == "person" and r.within_s}

    def changed(self) -> None:
        self.wake.set()

    def look_again(self) -> None:
        """After an action: look at every tile now, not on the next slow look."""
        self.local.look_again()
        if self.hosts is not None:
            self.hosts.wake.set()

    def close(self) -> None:
        """The server stops: every page's stream ends (its page reconnects to whatever runs next)."""
        for listener in list(self.listeners):
            listener.close()

    @contextmanager
    def listen(self) -> Iterator[Listener]:
        """A page's listener, holding the current frame at once."""
        listener = Listener()
        if self.last:
            listener.put(self._stamped())
        self.listeners.add(listener)
        try:
            yield listener
        finally:
            self.listeners.discard(listener)

    def body(self) -> dict[str, Any]:
        """The frame's content: tiles (this host's first), routes, recent hand-offs, the hand-offs awaiting
        a person (with their prompts), notes."""
        tiles = [_tile(v, self.host, True) for v in self.local.board.views.values()]
        notes = [self.local.board.note]
        if self.hosts is not None:
            tiles += [_tile(v, self.hosts.host_of.get(name, "?"), False)
                      for name, v in self.hosts.board.views.items()]
            notes.append(self.hosts.board.note)
        routes = [{"name": r.label, "from": ",".join(r.sources), "to": ",".join(r.targets),
                   "held": r.label in self.held} for r in self.config.routes]
        return {"title": Path(self.config.path).name, "host": self.host, "tiles": tiles, "routes": routes,
                "recent": self.recent, "awaiting": self.awaiting, "note": " · ".join(n for n in notes if n)}

    def _stamped(self) -> bytes:
        """The last frame with the server's clock (the page's clocks count from it, whatever its own)."""
        return self.last[:-1] + b',"sent":' + orjson.dumps(time.time()) + b"}"

    async def publish_loop(self) -> None:
        """One frame per change (a burst of changes: one frame), to every listener."""
        while True:
            views, self.held = await anyio.to_thread.run_sync(read_recent, self.local.journal, RECENT)
            self.recent = [asdict(v) for v in views]
            self.awaiting = await anyio.to_thread.run_sync(read_awaiting, self.local.journal, self.within)
            frame = orjson.dumps(self.body())
            if frame != self.last:
                self.last = frame
                stamped = self._stamped()
                for listener in list(self.listeners):
                    listener.put(stamped)
            await self.wake.wait()

    async def run(self) -> None:
        """Follow everything until cancelled."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self.local.run)
            if self.hosts is not None:
                tg.start_soon(self.hosts.look_loop)
            tg.start_soon(self.publish_loop)
