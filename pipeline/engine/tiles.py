"""A tile at run time: its context, its adapter and its terminal fallback."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pipeline.engine.config import Config
from pipeline.engine.context import EngineContext, make_adapter
from pipeline.engine.watch import FileWatcher
from pipeline.plugin.agents import AgentAdapter
from pipeline.plugin.registry import AgentRegistry
from pipeline.system import proc
from pipeline.system.tmux import Tmux, TmuxError

__all__ = ["TileRuntime", "build_tiles", "identify_agent"]

log = logging.getLogger("batonpass")


@dataclass
class TileRuntime:
    ctx: EngineContext
    adapter: AgentAdapter
    #: the terminal adapter that answers when ``adapter`` cannot (may be ``adapter`` itself)
    fallback: AgentAdapter

    @property
    def name(self) -> str:
        return self.ctx.name


def identify_agent(pane_pid: int, agents: AgentRegistry) -> str:
    """For ``agent: auto``: the adapter that claims the first process under the pane it claims
    (:meth:`AgentAdapter.claims_process`, asked in registry order), else ``shell``."""
    classes = [(name, agents.get(name)) for name in agents.names()]
    classes = [(name, cls) for name, cls in classes if getattr(cls, "process_names", None)]
    for p in proc.subtree(pane_pid):
        for name, cls in classes:
            if cls.claims_process(p):
                return name
    return "shell"


async def build_tiles(config: Config, agents: AgentRegistry, tmux: Tmux,
                      watcher: FileWatcher | None = None) -> dict[str, TileRuntime]:
    tiles: dict[str, TileRuntime] = {}
    for name, tile in config.tiles.items():
        ctx = EngineContext(name=name, tile=tile, tmux=tmux, watcher=watcher)
        kind = tile.agent
        if kind == "auto":
            try:
                info = await ctx.pane()
                kind = identify_agent(info.pid, agents)
                log.info("tile %s: agent auto -> %s (from the process tree of %s)", name, kind, info.pane_id)
            except TmuxError as exc:
                kind = "terminal"
                log.warning(
                    "tile %s: cannot see pane %s (%s); reading it as a plain terminal", name, tile.pane, exc
                )
        adapter = make_adapter(agents.get(kind), ctx)
        fallback = adapter if adapter.reads_screen else make_adapter(agents.get("terminal"), ctx)
        tiles[name] = TileRuntime(ctx=ctx, adapter=adapter, fallback=fallback)
    return tiles

