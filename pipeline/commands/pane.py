"""``baton send`` and ``baton resolve``: one pane, looked at or typed into exactly as the daemon does.

Text from outside (an argument, standard input, a file) is capped at :data:`MAX_INPUT_BYTES` before
anything else happens, so a runaway pipe is refused instead of filling a pane."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import IO

import anyio

from pipeline.commands.options import MAX_INPUT_BYTES
from pipeline.commands.server import load_optional, tmux_for
from pipeline.commands.table import json_text
from pipeline.engine.config import Tile
from pipeline.engine.stages.dispatch import type_prompt
from pipeline.engine.tiles import identify_agent
from pipeline.plugin.agents import AgentAdapter, TileContext
from pipeline.plugin.manager import Registries, load_registries
from pipeline.plugin.turns import ResolveStep
from pipeline.system.text import sanitize
from pipeline.system.tmux import Tmux

__all__ = ["InputTooLarge", "adapter_for", "check_size", "pane_setup", "read_input", "resolve_command",
           "send_text"]


class InputTooLarge(ValueError):
    """More text than batonpass types into a pane."""


def read_input(stream: IO[bytes] | IO[str], what: str) -> str:
    """At most :data:`MAX_INPUT_BYTES` from ``stream``, decoded as UTF-8 (bad bytes replaced); more is an
    error, found after reading one byte past the limit, never the whole stream. A text stream (no
    ``.buffer``, as under a test's captured stdin) is read the same way."""
    raw = getattr(stream, "buffer", stream)
    data = raw.read(MAX_INPUT_BYTES + 1)
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    check_size(len(data), what)
    return data.decode("utf-8", "replace")


def check_size(size: int, what: str) -> None:
    if size > MAX_INPUT_BYTES:
        raise InputTooLarge(
            f"{what} is over {MAX_INPUT_BYTES // (1024 * 1024)} MB ({MAX_INPUT_BYTES} bytes); "
            "nothing was typed"
        )


async def adapter_for(pane: str, agent: str, registries: Registries, tmux: Tmux) -> AgentAdapter:
    """The adapter for the agent in ``pane``: ``agent``, or found from its process tree for ``auto``.
    An unknown agent name raises :class:`~pipeline.plugin.registry.UnknownName` before tmux is asked."""
    cls = None if agent == "auto" else registries.agents.get(agent)
    ctx = TileContext(name=pane, tile=Tile(pane=pane, agent=agent), tmux=tmux)
    if cls is None:
        cls = registries.agents.get(identify_agent((await ctx.pane()).pid, registries.agents))
    return cls(ctx)


async def send_text(adapter: AgentAdapter, text: str, out: Callable[..., object] = print) -> int:
    """Type ``text`` if the pane runs the adapter's agent; 1 (and nothing typed) when it does not."""
    state = await adapter.target_state()
    pane = adapter.ctx.tile.pane
    if state in ("absent", "gone"):
        why = f"no {adapter.name} agent runs there" if state == "absent" else "no such pane"
        print(f"baton send: not typing into {pane}: it is {state} ({why})", file=sys.stderr)
        return 1
    typed = sanitize(text)
    confirmed, pane_id = await type_prompt(adapter, text)
    removed = len(text) - len(typed)
    out(f"sent {len(typed)} chars to {pane_id} ({adapter.name})"
        + (f", {removed} control chars removed" if removed else "") + ": "
        + ("the agent started a turn" if confirmed else "typed; the agent did not show a new turn yet"))
    return 0


def pane_setup(args: argparse.Namespace) -> tuple[Registries, Tmux] | None:
    """(registries, tmux) for a one-pane command, or None when routes.yaml is named or found and broken."""
    registries = load_registries()
    if args.agent != "auto":
        registries.agents.get(args.agent)  # an unknown name: one line from main(), before anything else
    config, ok = load_optional(args, registries)
    return (registries, tmux_for(args, config)) if ok else None


def resolve_command(args: argparse.Namespace) -> int:
    """``baton resolve``: every step of the resolution chain; 1 when one stopped it."""
    setup = pane_setup(args)
    if setup is None:
        return 1

    async def resolve() -> tuple[AgentAdapter, list[ResolveStep]]:
        adapter = await adapter_for(args.pane, args.agent, *setup)
        return adapter, await adapter.resolve()

    adapter, steps = anyio.run(resolve)
    ok = all(s.ok for s in steps)
    if args.json:
        print(json_text({"pane": args.pane, "agent": adapter.name, "ok": ok,
                         "steps": [{"step": s.step, "ok": s.ok, "detail": s.detail, "value": s.value}
                                   for s in steps]}))
    else:
        print(f"{args.pane}: agent {adapter.name}")
        for s in steps:
            print(f"  {'ok ' if s.ok else 'STOP'} {s.step:<12} {s.detail}")
    return 0 if ok else 1
