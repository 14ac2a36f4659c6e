"""Telling a person when a tile needs them: a tile waiting (a permission prompt, a dialog), a hand-off kept
or failed, a loop stopped at ``max_hops``, a gated hand-off awaiting their decision.

The stages and the adapters report what they see, as often as they see it (an adapter reads its agent's
status on every file event); the :class:`Notifier` turns that into one notice per change of state — one
per waiting episode, one per kept and one per failed hand-off, one per loop stop — and hands it to the places
``settings.notify`` lists (:mod:`pipeline.engine.notify_sinks`). Sending happens in the background:
reporting never waits, so a slow or dead webhook never holds up a hand-off. A full queue drops notices
(said once in the log) rather than waiting.

``baton run`` keeps one notifier for its whole life and hands it to each pipeline it starts: a reload of
routes.yaml (a new pipeline) neither forgets which tiles wait (they are not announced again) nor drops a
notice still being tried. An episode carried over a reload is the new pipeline's to confirm: its adapter
reports the tile again on its first look; one nobody confirms within :data:`CARRY_S` is over.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Collection, Sequence

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from pipeline.engine.notify_config import NotifyEvent, NotifyTarget
from pipeline.engine.notify_sinks import Notice, Sink, TmuxSink, make_sink, one_line
from pipeline.system.tmux import Tmux

__all__ = ["Notice", "Notifier"]

log = logging.getLogger("batonpass")

QUEUE_SIZE = 64
#: how many hand-offs' notices are remembered for de-duplication
MEMORY = 1024
#: how long a waiting episode carried over a reload waits for the new pipeline's first look at its tile
CARRY_S = 30.0


class Notifier:
    """De-duplicates reports into notices and sends each to the places that want it."""

    def __init__(self, targets: Sequence[NotifyTarget] = (), tmux: Tmux | None = None) -> None:
        self.sinks: list[Sink] = [make_sink(t, tmux) for t in targets]
        #: tile -> the reason of its current waiting episode
        self._waiting: dict[str, str] = {}
        #: tile -> until when (monotonic) its episode, carried over a reload, waits to be confirmed
        self._carried: dict[str, float] = {}
        self._said: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._send: MemoryObjectSendStream[Notice]
        self._receive: MemoryObjectReceiveStream[Notice]
        self._send, self._receive = anyio.create_memory_object_stream[Notice](QUEUE_SIZE)
        self._dropping = False
        self._tg: TaskGroup | None = None

    @property
    def active(self) -> bool:
        return bool(self.sinks)

    def reload(self, targets: Sequence[NotifyTarget], tmux: Tmux | None, tiles: Collection[str]) -> None:
        """A new pipeline is starting with ``targets`` and ``tiles`` (routes.yaml was read again). A place
        that stays keeps its notices under way and its "failing" state; the waiting episodes of tiles that
        stay are carried over (see the module's docstring), those of tiles that went are forgotten."""
        old, fresh = list(self.sinks), []
        sinks: list[Sink] = []
        for target in targets:
            sink = next((s for s in old if s.target == target), None)
            if sink is None:
                sink = make_sink(target, tmux)
                fresh.append(sink)
            else:
                old.remove(sink)
            if isinstance(sink, TmuxSink):
                sink.tmux = tmux  # the tiles' tmux server may be another one now
            sinks.append(sink)
        self.sinks = sinks
        if self._tg is not None:
            for sink in fresh:
                self._tg.start_soon(sink.prepare)
        for tile in [t for t in self._waiting if t not in tiles]:
            del self._waiting[tile]
        until = time.monotonic() + CARRY_S
        self._carried = {tile: until for tile in self._waiting}

    # ---- what the engine reports -----------------------------------------------------------------

    def waiting(self, tile: str, reason: str | None) -> None:
        """``tile`` waits for a person (``reason``: what for) or not (None). Called on every look; a notice
        goes out when an episode starts, not while it lasts nor when its reason changes (2.1.332 shows
        "dialog open" before "permission prompt" in one episode)."""
        carried = self._carried.pop(tile, None)
        if carried is not None and time.monotonic() > carried:
            self._waiting.pop(tile, None)  # not confirmed in time: it ended while no pipeline looked
        if reason is None:
            if self._waiting.pop(tile, None) is not None and self.active:
                log.info("notice      %s no longer waits for a person", tile)
            return
        if tile in self._waiting:
            return
        self._waiting[tile] = reason
        self._post(Notice("waiting", tile, f"{tile} is waiting for you", f"{tile} is waiting: {reason}"))

    def kept(self, key: str, route: str, target: str, reason: str) -> None:
        """A hand-off could not be typed (its target is absent or gone) and is kept for a retry."""
        if self._first("kept", key):
            self._post(Notice("kept", target, f"hand-off to {target} kept",
                              f"hand-off {route} kept: {reason}; retrying", route=route, handoff=key))

    def failed(self, key: str, route: str, target: str, error: str) -> None:
        """A hand-off ended ``failed`` (gave up on its target, the typing failed, its transform failed)."""
        if self._first("failed", key):
            self._post(Notice("failed", target, f"hand-off to {target} failed",
                              f"hand-off {route} failed: {error}", route=route, handoff=key))

    def wants(self, event: NotifyEvent) -> bool:
        """Some place listed in ``settings.notify`` wants ``event``."""
        return any(sink.target.wants(event) for sink in self.sinks)

    def awaiting(self, key: str, route: str, target: str, prompt: str) -> None:
        """A gated hand-off awaits a person's decision (``gate: person``): told once per hand-off (the
        journal remembers across restarts: :mod:`pipeline.engine.gate`)."""
        if self._first("awaiting", key):
            self._post(Notice("awaiting", target, f"hand-off to {target} awaits you",
                              f"route {route}: baton pass {key} types it (baton drop {key} drops it): "
                              f"{one_line(prompt, 120)}", route=route, handoff=key))

    def max_hops(self, key: str, route: str, source: str, limit: int) -> None:
        """A route did not fire because the chain that led to its turn reached ``max_hops``."""
        if self._first("max_hops", key):
            self._post(Notice("max_hops", source, f"loop stopped at {source}",
                              f"route {route} stopped: the chain reached max_hops={limit}", route=route,
                              handoff=key))

    def _first(self, event: str, key: str) -> bool:
        if (event, key) in self._said:
            return False
        self._said[(event, key)] = None
        if len(self._said) > MEMORY:
            self._said.popitem(last=False)
        return True

    def _post(self, notice: Notice) -> None:
        if not any(sink.target.wants(notice.event) for sink in self.sinks):
            return
        log.info("notice      %s: %s", notice.event, notice.message)
        try:
            self._send.send_nowait(notice)
            self._dropping = False
        except anyio.WouldBlock:
            if not self._dropping:
                log.warning("notices are not being sent fast enough; dropping them until the queue drains")
                self._dropping = True
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the pipeline is stopping

    # ---- sending ---------------------------------------------------------------------------------

    async def run(self) -> None:
        """Send notices until cancelled; each send runs on its own, bounded per place."""
        async with self._receive, anyio.create_task_group() as tg:
            self._tg = tg
            try:
                for sink in self.sinks:
                    tg.start_soon(sink.prepare)
                async for notice in self._receive:
                    for sink in self.sinks:
                        if sink.target.wants(notice.event):
                            sink.enqueue(tg, notice)
            finally:
                self._tg = None
