"""The engine in the test's own process: a config from dicts, a running :class:`Pipeline` on a test's tmux
server, and what to wait on before a scenario starts (a tile's first look, a watcher on its folders)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio

from pipeline.engine.config import Config
from pipeline.engine.runtime import Pipeline
from pipeline.plugin.events import Delivery
from pipeline.plugin.manager import load_registries
from tests.support.tmux import TmuxServer

__all__ = ["REGISTRIES", "first_look", "make_config", "running", "watches"]

#: the installed agents, transforms and sinks, loaded once
REGISTRIES = load_registries()


def make_config(tiles: dict[str, dict], routes: list[dict], **settings: Any) -> Config:
    return Config.model_validate({"version": 1, "tiles": tiles, "routes": routes, "settings": settings})


@contextlib.asynccontextmanager
async def running(
    config: Config, server: TmuxServer, deliveries: list | None = None
) -> AsyncIterator[Pipeline]:
    """``config``'s pipeline running on ``server``; its deliveries are appended to ``deliveries``."""

    def report(event: object) -> None:
        if deliveries is not None and isinstance(event, Delivery):
            deliveries.append(event)

    pipeline = Pipeline(config, REGISTRIES, server.tmux, report=report)
    async with anyio.create_task_group() as tg:
        await tg.start(pipeline.run)
        yield pipeline
        tg.cancel_scope.cancel()


def first_look(pipeline: Any, tile: str) -> bool:
    """A screen-read tile (shell, terminal, amp) of a running pipeline has taken its first look: its turn
    mark is set, so what is typed from now on is a turn of its own, not part of the screen it found."""
    return getattr(pipeline.tiles[tile].adapter, "_mark", None) is not None


def watches(watcher: Any, *paths: Path) -> bool:
    """A running ``FileWatcher`` covers each of ``paths`` (it, or a folder above it): the watcher restarts
    when a subscriber needs a new folder, and a change written before that restart is seen late, if at all."""
    return all(any(root == p or root in p.parents for root in watcher.watching) for p in paths)
