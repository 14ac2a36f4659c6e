"""One task group wiring the four stages with bounded streams.

detector → extractor → router → dispatcher. Each stage owns and closes its stream ends, so cancelling the
group (a signal, or the end of the demo) unwinds every stage at once, and a slow stage makes the ones
before it wait instead of piling up memory.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
from anyio.abc import TaskStatus

from pipeline.engine.config import Config
from pipeline.engine.gate import Gate
from pipeline.engine.hops import HopLedger
from pipeline.engine.hosts import local_host
from pipeline.engine.journal import MEMORY, Journal
from pipeline.engine.notify import Notifier
from pipeline.engine.stages.detect import CompletionDetector
from pipeline.engine.stages.dispatch import PromptDispatcher, target_state
from pipeline.engine.stages.extract import ResponseExtractor
from pipeline.engine.stages.route import PromptRouter
from pipeline.engine.tiles import TileRuntime, build_tiles
from pipeline.engine.watch import FileWatcher
from pipeline.plugin.events import Completion, Delivery, Prompt, Response
from pipeline.plugin.manager import Registries
from pipeline.system.tmux import ServerGone, Tmux, TmuxError

__all__ = ["Pipeline"]

log = logging.getLogger("batonpass")
STREAM_SIZE = 64


async def _no_server(tmux: Tmux) -> str:
    """What the start-up line adds when no tmux server runs yet: ``run`` keeps running and waits for one
    (docs/json.md), following each tile once its pane exists; "" when a server answers."""
    try:
        await tmux.run("list-sessions", "-F", "#{session_name}")
    except ServerGone:
        return (" (no tmux server runs there yet: baton run keeps running and follows each tile once tmux "
                "and its pane are there)")
    except TmuxError:
        pass
    return ""


class Pipeline:
    """The routing daemon. ``await pipeline.run()`` runs until cancelled."""

    def __init__(self, config: Config, registries: Registries, tmux: Tmux, *, dry_run: bool = False,
                 report: Callable[[Completion | Delivery], None] | None = None,
                 journal: Journal | None = None, watcher: FileWatcher | None = None,
                 host: str | None = None, notifier: Notifier | None = None) -> None:
        self.config, self.registries, self.tmux = config, registries, tmux
        #: the host this pipeline runs the tiles of (``baton run --host``)
        self.host = host or local_host()
        #: the bus end (pipeline.bus.node.BusNode) when a route crosses hosts; None on a single machine
        self.bus: Any = None
        #: the shared file watcher; a pipeline given none runs its own
        self.watcher = watcher
        self.dry_run, self.report = dry_run, report
        #: the hand-off journal; an in-memory one when none is given (nothing survives the run)
        self.journal = journal if journal is not None else Journal(MEMORY)
        self.hops = HopLedger(self.journal)
        self.tiles: dict[str, TileRuntime] = {}
        self.dispatcher: PromptDispatcher | None = None
        #: tells a person when a tile waits for them, or a hand-off was kept or failed (settings.notify);
        #: one given (``baton run``'s, which outlives a reload) is run by its owner
        self.notifier = notifier if notifier is not None else Notifier(config.settings.notify, tmux)
        self._own_notifier = notifier is None

    async def run(self, *, task_status: TaskStatus[Any] = anyio.TASK_STATUS_IGNORED) -> None:
        watcher = self.watcher or FileWatcher()
        self.tiles = await build_tiles(self.config.on_host(self.host), self.registries.agents, self.tmux,
                                       watcher=watcher)
        for name, runtime in self.tiles.items():
            runtime.ctx.on_waiting = lambda reason, name=name: self.notifier.waiting(name, reason)
        detector = CompletionDetector(self.tiles, self.hops, report=self.report, journal=self.journal,
                                      config=self.config)
        extractor = ResponseExtractor(self.tiles)
        router = PromptRouter(self.config, self.tiles, self.registries.transforms, journal=self.journal,
                              notifier=self.notifier)
        gate = Gate(self.journal, self.notifier, {r.label: r for r in self.config.routes}, self.tiles,
                    dry_run=self.dry_run)
        self.dispatcher = PromptDispatcher(self.tiles, self.hops, give_up_s=self.config.settings.give_up_s,
                                           dry_run=self.dry_run, report=self.report, journal=self.journal,
                                           notifier=self.notifier, limits=self.config.rate_limits(),
                                           gate=gate)
        completions_in, completions_out = anyio.create_memory_object_stream[Completion](STREAM_SIZE)
        responses_in, responses_out = anyio.create_memory_object_stream[Response](STREAM_SIZE)
        prompts_in, prompts_out = anyio.create_memory_object_stream[Prompt](STREAM_SIZE)
        self._prompts_in = prompts_in.clone()
        if self.config.crosses_hosts(self.host):
            from pipeline.bus.node import BusNode  # only here: a single machine never loads the NATS client

            self.bus = BusNode(self.config, self.host, self.journal)
            self.bus.on_action = self._action
            local_in, local_out = anyio.create_memory_object_stream[Prompt](STREAM_SIZE)
        async with anyio.create_task_group() as tg:
            if self.watcher is None:
                tg.start_soon(watcher.run)
            if self._own_notifier:
                tg.start_soon(self.notifier.run)
            tg.start_soon(detector.run, completions_in, watcher)
            tg.start_soon(extractor.run, completions_out, responses_in)
            tg.start_soon(router.run, responses_out, prompts_in)
            if not self.dry_run:
                tg.start_soon(gate.run)
            if self.bus is not None:
                tg.start_soon(self.bus.split, prompts_out, local_in)
                tg.start_soon(self.dispatcher.run, local_out)
            else:
                tg.start_soon(self.dispatcher.run, prompts_out)
            tiles, routes = len(self.tiles), len(self.config.routes)
            log.info("running: %d tile%s, %d route%s on %s%s", tiles, "s" * (tiles != 1), routes,
                     "s" * (routes != 1), self.tmux.describe(), await _no_server(self.tmux))
            tg.start_soon(self._recover)
            task_status.started(self)

    async def _recover(self) -> None:
        """Queue the hand-offs a previous run left unfinished, before anything new (the queues are FIFO)."""
        if self.dispatcher is None:
            return
        stale = time.time() - self.config.settings.catch_up_s
        # a dry run's journal is a copy: what it holds unfinished is the daemon's to finish, not to print
        unfinished = [] if self.dry_run else await self.journal.until_read(self.journal.unfinished)
        for record in unfinished:
            if record.state == "pending":
                # its adapter reports the turn again if it can; one it cannot is past saving after catch_up_s
                if record.created < stale:
                    why = "batonpass stopped while transforming and the source turn was not reported again"
                    await self.journal.until_done(
                        partial(self.journal.set_state, record.key, "failed", error=why))
                continue
            remote = self.bus is not None and self.bus.is_remote(record.target)
            if record.target not in self.tiles and not remote:
                continue  # the tile is gone from the config: left as it is for a config that has it
            if record.state == "delivering":
                self.dispatcher.unsure.add(record.key)
            elif record.state == "awaiting":  # waits for a person even if routes.yaml lost the route's gate
                self.dispatcher.gate.hold_key(record.key)
            log.info("recovered   %s -> %s (%s before the restart)", record.key, record.target, record.state)
            await self.submit(record.to_prompt())
        if self.bus is not None:  # after the recovery: a redelivered hand-off finds its key queued already
            await self.bus.run(self.submit, tiles=self.tile_rows)

    async def tile_rows(self) -> list[dict[str, Any]]:
        """This host's tiles as the dispatcher sees them (for ``baton status --all-hosts``): waiting for a
        person where the adapter said so (the dispatcher alone sees a dialog as ``busy``), and when a busy
        tile's turn began where its agent recorded it (``working_since``, epoch seconds, else None)."""
        rows = []
        for name, runtime in self.tiles.items():
            since = None
            try:
                state: str = await target_state(runtime.adapter)
            except Exception as exc:
                state = f"unknown ({type(exc).__name__})"
            if state == "busy":
                try:
                    since = await runtime.adapter.working_since()
                except Exception:  # the board's own first sight is the clock then
                    since = None
                if runtime.ctx.waiting_for is not None:
                    state = f"waiting ({runtime.ctx.waiting_for})"
            rows.append({"tile": name, "pane": runtime.ctx.tile.pane, "agent": runtime.adapter.name,
                         "state": state, "working_since": since})
        return rows

    async def _action(self, action_id: str, body: dict[str, Any]) -> tuple[bool, str]:
        """An action another host sent over the bus, performed here under its id (done once)."""
        from pathlib import Path

        from pipeline.bus.actions import action_of
        from pipeline.engine.actions import perform_here

        try:
            action = action_of(body)
        except (KeyError, TypeError, ValueError) as exc:
            return False, f"not an action batonpass can read ({type(exc).__name__}: {exc})"
        result = await perform_here(action, config_path=Path(self.config.path), action_id=action_id,
                                    host=self.host, tmux=self.tmux)
        return result.ok, result.message

    async def submit(self, prompt: Prompt) -> None:
        """Queue a prompt as if a route had produced it (the demo's first prompt; ``baton send``)."""
        await self._prompts_in.send(prompt)
