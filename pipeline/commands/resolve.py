"""``baton resolve``: one pane, looked at exactly as the daemon does — every step of its adapter's resolution
chain (which pane and which agent: :mod:`pipeline.engine.pane_target`)."""

from __future__ import annotations

import argparse
import sys

import anyio

from pipeline.cmdline.output import json_text
from pipeline.cmdline.target import target_setup
from pipeline.engine.context import EngineContext
from pipeline.engine.pane_target import PaneTarget, TargetError, adapter_for, find_target
from pipeline.engine.tiles import identify_agent
from pipeline.plugin.agents import AgentAdapter
from pipeline.system.tmux import PaneGone

__all__ = ["resolve_command"]


def resolve_command(args: argparse.Namespace) -> int:
    """``baton resolve``: every step of the resolution chain; 1 when one stopped it."""
    setup = target_setup(args)
    if setup is None:
        return 1

    async def resolve() -> tuple[PaneTarget, AgentAdapter, list]:
        target = await find_target(args.pane, args.agent, setup, strict=False)
        ctx = EngineContext(name=target.name or target.given, tile=target.tile, tmux=setup.tmux)
        agent = target.tile.agent
        if agent == "auto":
            agent = identify_agent((await ctx.pane()).pid, setup.registries.agents)
        adapter = adapter_for(agent, ctx, setup.registries)
        return target, adapter, await adapter.resolve()

    try:
        target, adapter, steps = anyio.run(resolve)
    except TargetError as exc:
        print(f"baton resolve: {exc}", file=sys.stderr)
        return exc.status
    except PaneGone as exc:
        if args.pane not in setup.tiles:
            raise
        tile = setup.tiles[args.pane]
        make = "baton up creates it" if tile.command else "no `command:`, so baton up cannot make it"
        print(f"baton resolve: tile {args.pane}'s pane {tile.pane} is not there ({make}): {exc}",
              file=sys.stderr)
        return 1
    ok = all(s.ok for s in steps)
    pane = target.tile.pane if target.name == target.given else target.given
    if args.json:
        print(json_text({"pane": pane, "tile": target.name, "agent": adapter.name, "ok": ok,
                         "steps": [{"step": s.step, "ok": s.ok, "detail": s.detail, "value": s.value}
                                   for s in steps]}))
    else:
        print(f"{pane}: agent {adapter.name}" + (f" (tile {target.name})" if target.name else ""))
        for s in steps:
            print(f"  {'ok ' if s.ok else 'STOP'} {s.step:<12} {s.detail}")
    return 0 if ok else 1
