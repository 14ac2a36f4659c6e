"""Stages without tmux: a config parsed from text, tiles whose adapter is a scripted stand-in that keeps
its "files" in a list, and the streams between stages. For the unit tests of the detector, extractor,
router and hop ledger (the tmux end-to-end tests cover the same stages with real panes)."""

from __future__ import annotations

import time
from typing import Any

import anyio

from pipeline.engine.config import Config, parse_config
from pipeline.engine.context import EngineContext
from pipeline.engine.tiles import TileRuntime
from pipeline.plugin.agents import AgentAdapter, Emit, TargetState, TileContext
from pipeline.plugin.events import Completion, Response
from pipeline.plugin.turns import TurnEnd
from pipeline.system.tmux import Tmux

__all__ = ["ScriptedAdapter", "completion", "config", "ended", "tiles", "with_catch_up"]


class ScriptedAdapter(AgentAdapter):
    """An agent whose finished turns are a list (its "files"); ``follow`` reports what is put in ``live``."""

    name = "scripted"

    def __init__(self, ctx: TileContext) -> None:
        super().__init__(ctx)
        self.on_disk: list[TurnEnd] = []
        self.asked: list[float] = []
        self.live_in, self.live_out = anyio.create_memory_object_stream[TurnEnd](16)

    async def finished_turns(self, since: float) -> list[TurnEnd] | None:
        self.asked.append(since)
        return [t for t in self.on_disk if t.ended_at >= since]

    async def follow(self, emit: Emit) -> None:
        async for end in self.live_out:
            self.on_disk.append(end)
            await emit(end.completion(self.ctx.name, "file"))

    async def response(self, completion: Completion) -> Response | None:
        return None  # the stages under test take the answer from the completion or the fallback

    async def target_state(self) -> TargetState:
        return "ready"


def config(text: str = "") -> Config:
    doc = text or """
version: 1
tiles:
  a: {pane: '%1', agent: shell}
  b: {pane: '%2', agent: shell}
routes:
  - {from: a, to: b}
"""
    cfg, _ = parse_config(doc)
    return cfg


def tiles(cfg: Config) -> dict[str, TileRuntime]:
    out = {}
    for name, tile in cfg.tiles.items():
        ctx = EngineContext(name=name, tile=tile, tmux=Tmux(socket_name="stage-kit-unused"))
        adapter = ScriptedAdapter(ctx)
        out[name] = TileRuntime(ctx=ctx, adapter=adapter, fallback=adapter)
    return out


def ended(turn: str, ago: float, text: str = "", **kw: Any) -> TurnEnd:
    return TurnEnd(
        turn_id=turn, outcome="completed", text=text or f"answer {turn}", ended_at=time.time() - ago, **kw
    )


def completion(tile: str, turn: str, **kw: Any) -> Completion:
    return Completion(tile=tile, turn_id=turn, **kw)


def with_catch_up(
    adapter: AgentAdapter, emit: Emit, *, first_run: bool = False, look_back_s: float = 60.0
) -> Emit:
    """For adapter tests that run ``follow`` without the engine: what the detector does with it, in
    small — on ``ctx.resolved()`` the adapter's finished turns of the last ``look_back_s`` are reported
    (signal ``catch-up``), and each turn id passes once whichever way it comes. ``first_run``: the first
    look finds history (kept from being reported), as on a tile no run followed before; else it is a
    restart, and what ended before the first look is caught up."""
    seen: set[str] = set()
    looked = not first_run

    async def once(completion: Completion) -> None:
        if completion.turn_id not in seen:
            seen.add(completion.turn_id)
            await emit(completion)

    async def catch_up() -> None:
        nonlocal looked
        for end in await adapter.finished_turns(time.time() - look_back_s) or []:
            if looked:
                await once(end.completion(adapter.ctx.name, "catch-up"))
            else:
                seen.add(end.turn_id)
        looked = True

    adapter.ctx.on_resolved = catch_up
    return once
