"""The moment to press Enter after a paste: once the agent has drawn it, never sooner than it accepts one.

A fixed delay between the paste and its Enter is either too short for a loaded machine (the Enter read
with the paste is a newline, or submits a placeholder) or time a person feels on every hand-off
(docs/performance.md, "The latency a person feels"). The dispatcher instead looks at the target's input
until the paste shows there — as the text or as the agent's placeholder for it
(:meth:`pipeline.plugin.agents.AgentAdapter.paste_landed`) — and presses Enter then, but not before the
agent's ``submit_min_s`` (measured per agent: docs/agent-versions.md) and not later than its
``submit_delay_s`` (the fixed delay of old, now the fallback for an input it cannot read).
"""

from __future__ import annotations

import time

import anyio

from pipeline.engine.context import look_again
from pipeline.plugin.agents import AgentAdapter
from pipeline.system.tmux import TmuxError

__all__ = ["LANDED_TICK_S", "until_landed"]

#: how often the input is looked at between a paste and its Enter
LANDED_TICK_S = 0.005


async def until_landed(adapter: AgentAdapter, clean: str, pasted: float) -> None:
    """Return once ``clean`` (sanitized), pasted at ``pasted`` (``time.monotonic()``), shows in the adapter's
    input and ``submit_min_s`` has passed since the paste; or at ``submit_delay_s`` after it, whatever the
    input shows. A pane that cannot be captured ends the wait: the Enter's own send reports it."""
    ceiling = pasted + adapter.submit_delay_s
    floor = min(pasted + adapter.submit_min_s, ceiling)
    while time.monotonic() < ceiling:
        look_again()  # each look sees the pane as it is now
        try:
            if await adapter.paste_landed(clean):
                break
        except TmuxError:
            break
        await anyio.sleep(min(LANDED_TICK_S, max(ceiling - time.monotonic(), 0.0)))
    await anyio.sleep(max(floor - time.monotonic(), 0.0))
