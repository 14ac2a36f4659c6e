"""Which pane a name means, and which agent is expected there — for everything that acts on one pane: ``baton
send``, ``baton resolve``, and the actions (:mod:`pipeline.engine.actions`: approve, deny, send, retry).

A tile's name (of routes.yaml) names the tile's pane and its agent; a pane (``%N``, ``session:window.pane``,
``title:NAME``) that is a tile's pane — the same target, or one tmux resolves to the same ``%N`` — expects
that tile's agent too. An agent named besides (``--agent``) is the agent of a pane no tile declares; one
that contradicts the tile's is refused when asked strictly (``send``; ``resolve`` only reads, so it reads with
the adapter named). Without either, the agent is found from the pane's process tree. The tiles count only on
routes.yaml's own tmux server (the command's ``-L``/``-S`` naming another leaves them out: see
:func:`pipeline.cmdline.target.target_setup`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.engine.config import Config, Tile
from pipeline.engine.context import EngineContext, make_adapter
from pipeline.engine.hosts import local_host, tile_host
from pipeline.engine.tiles import identify_agent
from pipeline.plugin.agents import AgentAdapter
from pipeline.plugin.manager import Registries
from pipeline.system.tmux import PaneGone, PaneInfo, ServerGone, Tmux, TmuxError

__all__ = ["PaneTarget", "Setup", "TargetError", "adapter_for", "find_target", "running_in"]


class TargetError(Exception):
    """The target named cannot be used as asked; ``status`` is the exit status (2: bad usage)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class PaneTarget:
    """What a one-pane command was pointed at: the tile it belongs to, if any, and the agent expected."""

    given: str
    #: the tile's name, or None for a pane no tile declares
    name: str | None
    #: the tile (for a pane no tile declares, one made up for it), its ``agent`` the one expected there
    tile: Tile

    def where(self, pane_id: str) -> str:
        """``%3 (tile rev)``, ``%3 (work:0.1)`` or ``%3``: the pane, as the person will recognise it."""
        label = f"tile {self.name}" if self.name else (self.given if self.given != pane_id else "")
        return f"{pane_id} ({label})" if label else pane_id


@dataclass(frozen=True)
class Setup:
    """What a one-pane send or action works with."""

    registries: Registries
    config: Config | None
    tmux: Tmux
    #: routes.yaml's tiles, when the tmux server asked is routes.yaml's own
    tiles: dict[str, Tile]


def _looks_like_pane(target: str) -> bool:
    return target.startswith(("%", "title:")) or ":" in target


async def find_target(given: str, agent: str, setup: Setup, *, strict: bool) -> PaneTarget:
    """The tile ``given`` names or whose pane it is, and the agent expected there. ``agent`` is
    ``--agent`` (``auto`` when not given); one that contradicts the tile's is a :class:`TargetError`
    (status 2) when ``strict``, else it wins. Raises :class:`~pipeline.system.tmux.TmuxError` when
    ``given`` is no tile and tmux knows no such pane."""
    config, tiles, here = setup.config, setup.tiles, local_host()
    name: str | None = None
    if given in tiles:
        name, tile = given, tiles[given]
        if tile_host(tile, here) != here:
            raise TargetError(f"tile {given} is on host {tile.host}: its pane is on that machine; run baton "
                              "there")
    else:
        try:
            info = await setup.tmux.resolve(given)
        except PaneGone as exc:
            raise PaneGone(_no_such_target(given, exc, config, tiles, setup.tmux)) from None
        except ServerGone as exc:  # a misspelt tile is likelier than a pane of a server not running
            if _looks_like_pane(given) or config is None or given in config.tiles:
                raise
            names = ", ".join(sorted(config.tiles)) or "none"
            raise ServerGone(f"no tile {given!r} in {config.path} (tiles: {names}), and {exc}") from None
        found = await _tile_of(info, given, tiles, setup.tmux)
        name, tile = found if found else (None, Tile(pane=given, agent="auto"))
    if name is not None and tile.agent != "auto" and agent not in ("auto", tile.agent):
        if strict:
            raise TargetError(f"--agent {agent} contradicts tile {name}'s agent {tile.agent} in "
                              f"{config.path if config else 'routes.yaml'}: leave --agent out", status=2)
    elif name is not None and tile.agent != "auto":
        agent = tile.agent
    return PaneTarget(given, name, tile.model_copy(update={"agent": agent}))


async def _tile_of(info: PaneInfo, given: str, tiles: dict[str, Tile],
                   tmux: Tmux) -> tuple[str, Tile] | None:
    """The tile (of this host) whose pane is ``info``: named as ``given`` is, or resolving to its ``%N``."""
    here = {n: t for n, t in tiles.items() if tile_host(t, local_host()) == local_host()}
    for name, tile in here.items():
        if tile.pane == given:
            return name, tile
    for name, tile in here.items():
        try:
            if (await tmux.resolve(tile.pane)).pane_id == info.pane_id:
                return name, tile
        except TmuxError:  # that tile's pane is not there: it is not this one
            continue
    return None


def _no_such_target(given: str, exc: PaneGone, config: Config | None, tiles: dict[str, Tile],
                    tmux: Tmux) -> str:
    """tmux's "no such pane", and for a word that reads as a tile's name, which tiles there are."""
    if _looks_like_pane(given):
        return str(exc)
    if config is None:
        return (f"no pane {given} on {tmux.describe()}, and no routes.yaml here declares a tile "
                "(-c FILE names one)")
    if given in config.tiles:
        return (f"tile {given} of {config.path} is on its own tmux server "
                f"({Tmux(config.tmux.socket_name).describe()}), not on {tmux.describe()}")
    names = ", ".join(sorted(tiles)) or "none"
    return f"no tile {given!r} in {config.path} (tiles: {names}) and no pane {given} on {tmux.describe()}"


def adapter_for(agent: str, ctx: EngineContext, registries: Registries) -> AgentAdapter:
    return make_adapter(registries.agents.get(agent), ctx)


def running_in(info: PaneInfo, registries: Registries) -> tuple[str, str]:
    """(the agent found in the pane's process tree, or "" for none; a few words on what runs there)."""
    found = identify_agent(info.pid, registries.agents)
    agent = "" if found == "shell" else found
    running = f"it runs {info.current_command or 'an unknown program'}"
    return agent, running + (f", a {agent} agent" if agent else "")
