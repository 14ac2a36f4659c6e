"""What ``baton check`` says of the live panes: a tile whose agent cannot start in its pane — pi 1.x on a Node
older than its package's ``engines`` asks for — is a warning at the tile's ``agent:``, in the words ``baton
resolve`` prints for it: the failed ``node`` step of the tile's adapter's own resolution
(docs/agents.md, pi). A tile whose pane (or tmux server) is not there is not looked at: ``baton check``
validates a routes.yaml before ``baton up`` too.
"""

from __future__ import annotations

from pathlib import Path

import anyio

from pipeline.engine.config import Config
from pipeline.engine.config_positions import Positions, Problem
from pipeline.engine.context import EngineContext, make_adapter
from pipeline.engine.tiles import identify_agent
from pipeline.engine.yaml_text import compose_checked, decode_checked, read_checked
from pipeline.plugin.manager import Registries
from pipeline.system.tmux import Tmux, TmuxError

__all__ = ["START_STEPS", "pane_warnings"]

#: the resolve steps that say whether the tile's agent can start in its pane at all
START_STEPS = frozenset({"node"})


def pane_warnings(config: Config, registries: Registries, tmux: Tmux) -> list[Problem]:
    """A warning per failed :data:`START_STEPS` step of each tile whose pane is there."""
    found = anyio.run(_failed_steps, config, registries, tmux)
    if not found:
        return []
    positions = Positions(str(config.path))
    root = compose_checked(decode_checked(read_checked(Path(config.path))))
    if root is not None:
        positions.build(root, ())
    return [positions.problem(("tiles", tile, "agent"), detail, severity="warning") for tile, detail in found]


async def _failed_steps(config: Config, registries: Registries, tmux: Tmux) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for name, tile in config.tiles.items():
        ctx = EngineContext(name=name, tile=tile, tmux=tmux)
        try:
            info = await ctx.pane()
            agent = identify_agent(info.pid, registries.agents) if tile.agent == "auto" else tile.agent
            steps = await make_adapter(registries.agents.get(agent), ctx).resolve()
        except TmuxError:  # no pane, no server: nothing to look at
            continue
        found += [(name, s.detail) for s in steps if s.step in START_STEPS and not s.ok]
    return found
