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
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import anyio
import orjson

from pipeline.engine.config import Config
from pipeline.engine.gate_journal import expires_after
from pipeline.engine.tiles import TileRuntime
from pipeline.views.awaiting import read_awaiting
from pipeline.views.board import TileView, clean, dollars, read_recent, tokens
from pipeline.views.edge_counts import EdgeCounts, graph_routes, read_edge_counts
from pipeline.views.live_board import TileFeed, Wake

__all__ = ["Listener", "WebFeed"]

log = logging.getLogger("batonpass")
#: how much of each last answer the page shows (its first line)
PREVIEW = 1000
#: the hand-offs the page lists (newest first), failed ones with a Retry button
RECENT = 20
#: how much of a hand-off's prompt the page shows (its first line)
PROMPT_LINE = 200
#: the route a ``baton send`` (and the page's Send) is journaled under (:mod:`pipeline.commands.send`)
SEND_ROUTE = "send"


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
            "waiting_for": waiting_for(view),
            "joining": view.joining,
            "last": asdict(last) if last else None,
            "tokens": tokens(u.total) if u else "", "cost": dollars(u.cost_usd) if u else ""}


def waiting_for(view: TileView) -> str | None:
    """What a waiting tile asks a person (the dialog's question and command, where the board has them;
    else the board's words for it), shown next to Approve and Deny; None when it does not wait."""
    if view.kind != "waiting":
        return None
    return view.waiting_for or view.words


def prompt_lines(path: Path, keys: list[str]) -> dict[str, tuple[str, bool]]:
    """Per hand-off key: its prompt's first line, and whether it is a send refused before anything was
    typed (route ``send``, failed, never attempted: an action's outcome, nothing to retry). Read-only,
    as the board reads the journal."""
    if not keys or not path.exists():
        return {}
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2)
    try:
        rows = db.execute(f"SELECT key, substr(prompt, 1, {PROMPT_LINE * 4}), route, state, attempts "
                          f"FROM handoffs WHERE key IN ({','.join('?' * len(keys))})", keys).fetchall()
    except sqlite3.Error:
        return {}
    finally:
        db.close()
    return {str(key): (clean((prompt or "").strip().split("\n", 1)[0])[:PROMPT_LINE],
                       route == SEND_ROUTE and state == "failed" and not attempts)
            for key, prompt, route, state, attempts in rows}


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
        #: this host's hand-offs awaiting a person, with their full prompts (the page's Pass and Drop); the
        #: other hosts' come from the bus without theirs (a prompt stays on its host), passed there over it
        self.awaiting: list[dict[str, Any]] = []
        self.within = {r.label: s for r in config.routes if (s := expires_after(r)) is not None}
        self.edges = EdgeCounts()

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
        """The frame's content: tiles (this host's first), routes (with what waits on each edge of the
        graph the page draws), recent hand-offs, the hand-offs awaiting a person (with their prompts),
        notes."""
        tiles = [_tile(v, self.host, True) for v in self.local.board.views.values()]
        notes, awaiting = [self.local.board.note], list(self.awaiting)
        if self.hosts is not None:
            tiles += [_tile(v, self.hosts.host_of.get(name, "?"), False)
                      for name, v in self.hosts.board.views.items()]
            notes.append(self.hosts.board.note)
            awaiting += self.hosts.awaiting
        routes = graph_routes(self.config, self.edges, self.held)
        return {"title": Path(self.config.path).name, "host": self.host, "tiles": tiles, "routes": routes,
                "recent": self.recent, "awaiting": awaiting, "note": " · ".join(n for n in notes if n)}

    async def _told(self, body: dict[str, Any]) -> dict[str, Any]:
        """``body`` with each hand-off's prompt line and whether it is a refused send (this host's journal:
        a hand-off of another host's shows neither)."""
        handoffs = [*body["recent"], *(t["last"] for t in body["tiles"] if t["last"])]
        told = await anyio.to_thread.run_sync(prompt_lines, self.local.journal,
                                              sorted({h["key"] for h in handoffs if h["key"]}))
        for h in handoffs:
            h["prompt"], h["refused"] = told.get(h["key"], ("", False))
        return body

    def _stamped(self) -> bytes:
        """The last frame with the server's clock (the page's clocks count from it, whatever its own)."""
        return self.last[:-1] + b',"sent":' + orjson.dumps(time.time()) + b"}"

    async def publish_loop(self) -> None:
        """One frame per change (a burst of changes: one frame), to every listener."""
        while True:
            views, self.held = await anyio.to_thread.run_sync(read_recent, self.local.journal, RECENT)
            self.edges = await anyio.to_thread.run_sync(read_edge_counts, self.local.journal)
            self.recent = [asdict(v) for v in views]
            self.awaiting = await anyio.to_thread.run_sync(read_awaiting, self.local.journal, self.within)
            frame = orjson.dumps(await self._told(self.body()))
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
