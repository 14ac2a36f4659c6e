"""Which tiles ``baton run`` can reach, said out loud: at start, and again whenever a tile comes or goes.

A tile is *present* when its pane exists and runs its agent, *absent* when the pane runs something else
(a bare shell after the agent exited: nothing is typed there), and *gone* when there is no such pane or no
tmux server. The daemon keeps running in every case — a pane may be created later — but a person
watching it must not have to guess why nothing is handed over.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import anyio
from anyio.abc import TaskStatus

from pipeline.engine.config import Config
from pipeline.engine.tiles import TileRuntime, build_tiles
from pipeline.plugin.manager import Registries
from pipeline.system import proc
from pipeline.system.tmux import PaneGone, PaneInfo, ServerGone, Tmux, TmuxError

__all__ = ["TilePresence", "presence", "watch_presence"]

log = logging.getLogger("batonpass")
CHECK_EVERY_S = 1.0


@dataclass(frozen=True)
class TilePresence:
    tile: str
    pane: str
    agent: str
    #: "present" | "absent" | "gone"
    state: str
    #: why a gone tile is gone: its pane, or the whole tmux server
    why: str = "no such pane"

    def describe(self, give_up_s: float = 600) -> str:
        if self.state == "gone":
            return (f"tile {self.tile}: pane {self.pane} is gone ({self.why}); hand-offs to it are kept and "
                    f"typed once it is back (for up to give_up_s={give_up_s:g}s), its turns followed from "
                    "then")
        if self.state == "absent":
            return (f"tile {self.tile}: pane {self.pane} runs no {self.agent} agent; "
                    "hand-offs to it wait until the agent runs there again")
        return f"tile {self.tile}: pane {self.pane} is back ({self.agent})"


async def presence(tiles: dict[str, TileRuntime]) -> list[TilePresence]:
    """Every tile's presence. A :class:`~pipeline.system.tmux.TmuxError` other than "no pane"/"no server"
    (tmux not installed, say) is raised: nothing can work, and the caller says so.

    Cheap enough to ask every second with many tiles: the panes already resolved are looked up in one
    ``list-panes``, and a tile whose agent process was seen running last time is present while that process
    lives; only the others ask their adapter (:meth:`AgentAdapter.presence_state`)."""
    out = []
    listed: dict[str, PaneInfo] | None = None
    for name, runtime in tiles.items():
        why = "no such pane"
        try:
            info = None
            if runtime.ctx.resolved_pane_id is not None:
                if listed is None:
                    listed = await _list(runtime.ctx.tmux)
                info = runtime.ctx.known_pane(listed)
            if info is None:
                info = await runtime.ctx.pane()
            if info.dead:
                state = "gone"
            elif _agent_still_runs(runtime, info):
                state = "present"
            else:
                state = await runtime.adapter.presence_state(info)
        except PaneGone:
            state = "gone"
        except ServerGone:
            state, why = "gone", "no tmux server is running: start tmux, or `baton up` creates the panes"
        out.append(TilePresence(name, runtime.ctx.tile.pane, runtime.adapter.name,
                                state if state in ("gone", "absent") else "present", why))
    return out


async def _list(tmux: Tmux) -> dict[str, PaneInfo]:
    try:
        return {p.pane_id: p for p in await tmux.list_panes()}
    except ServerGone:
        return {}


#: the agent process last seen in each tile's pane: (pane pid, agent pid, agent start ticks)
_seen: dict[str, tuple[int, int, int]] = {}


def _agent_still_runs(runtime: TileRuntime, info: PaneInfo) -> bool:
    """Whether the pane runs the tile's agent, from /proc alone: the process seen last time still lives
    (one read), else a walk of the pane's process tree. False when the adapter names no process (or none
    runs): the adapter decides then."""
    names = runtime.adapter.process_names
    if not names:
        return False
    seen = _seen.get(runtime.name)
    if seen is not None and seen[0] == info.pid:
        if proc.still_runs(seen[1], seen[2]):
            return True
    found = proc.find_first(info.pid, runtime.adapter.claims_process)
    if found is None:
        _seen.pop(runtime.name, None)
        return False
    _seen[runtime.name] = (info.pid, found.pid, found.start_ticks)
    return True


async def watch_presence(config: Config, registries: Registries, tmux: Tmux, *,
                         task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    """Log each tile that is not present, then each change, until cancelled. Started with
    ``tg.start``: the first check raises TmuxError when tmux itself cannot run (not installed)."""
    tiles = await build_tiles(config, registries.agents, tmux)
    known: dict[str, str] = {}
    give_up_s = config.settings.give_up_s
    _report(await presence(tiles), known, give_up_s)
    task_status.started()
    while True:
        await anyio.sleep(CHECK_EVERY_S)
        _report(await _presence_or_gone(tiles), known, give_up_s)


async def _presence_or_gone(tiles: dict[str, TileRuntime]) -> list[TilePresence]:
    try:
        return await presence(tiles)
    except TmuxError:
        return [TilePresence(name, r.ctx.tile.pane, r.adapter.name, "gone") for name, r in tiles.items()]


def _report(current: list[TilePresence], known: dict[str, str], give_up_s: float) -> None:
    for p in current:
        before = known.get(p.tile)
        if before != p.state and (before is not None or p.state != "present"):
            (log.info if p.state == "present" else log.warning)("%s", p.describe(give_up_s))
        known[p.tile] = p.state
