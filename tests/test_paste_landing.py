"""The Enter after a paste goes once the target shows the paste in its input — never sooner than the agent's
``submit_min_s``, at the latest its ``submit_delay_s`` — as a tmux command of its own (docs/performance.md,
"The latency a person feels"). On real tmux panes running the demo agent (a raw-mode TUI with bracketed
paste); what is checked is the order of things and lower bounds, never how fast."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from pipeline.engine.config import Tile
from pipeline.engine.context import EngineContext
from pipeline.engine.stages.submit import type_prompt
from pipeline.plugin.agents import AgentAdapter
from tests.support.agents import messages, start_agent
from tests.support.pipelines import REGISTRIES
from tests.support.polling import until
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.anyio]

TEXT = "review this answer\nand say what you would change"


def demo_target(tmux_server: TmuxServer, tmp_path: Path) -> tuple[AgentAdapter, Path, list[tuple[str, Any]]]:
    """A demo agent's adapter whose input looks and tmux commands are logged, in order, as they happen."""
    log = tmp_path / "agent.jsonl"
    pane = start_agent(tmux_server, log)
    adapter = REGISTRIES.agents.get("demo")(
        EngineContext(name="t", tile=Tile(pane=pane, agent="demo"), tmux=tmux_server.tmux))
    events: list[tuple[str, Any]] = []
    tmux = tmux_server.tmux
    landed, paste, send_keys = adapter.paste_landed, tmux.paste, tmux.send_keys

    async def logged_landed(text: str) -> bool:
        shows = await landed(text)
        events.append(("landed", shows))
        return shows

    async def logged_paste(pane_id: str, text: str) -> None:
        await paste(pane_id, text)
        events.append(("paste", time.monotonic()))

    async def logged_keys(pane_id: str, *keys: str) -> None:
        events.append(("keys", time.monotonic()) if "Enter" in keys else ("other keys", keys))
        await send_keys(pane_id, *keys)

    adapter.paste_landed = logged_landed  # type: ignore[method-assign]
    tmux.paste, tmux.send_keys = logged_paste, logged_keys  # type: ignore[method-assign]
    return adapter, log, events


def enters(events: list[tuple[str, Any]]) -> list[int]:
    return [i for i, (kind, _) in enumerate(events) if kind == "keys"]


async def test_the_enter_goes_once_the_input_shows_the_paste_not_after_a_fixed_delay(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    adapter, log, events = demo_target(tmux_server, tmp_path)
    adapter.submit_delay_s = 3.0  # the ceiling: not reached, the paste shows long before
    confirmed, _ = await type_prompt(adapter, TEXT)
    assert confirmed
    await until(lambda: messages(log) == [TEXT], what="the prompt, whole")
    first_enter = enters(events)[0]
    looks = [shows for kind, shows in events[:first_enter] if kind == "landed"]
    assert events[0][0] == "paste", events
    assert looks and looks[-1] is True, f"the Enter went without the paste seen in the input: {events}"
    assert looks.count(True) == 1, "the input was looked at again after it showed the paste"


async def test_the_enter_waits_for_the_agents_minimum_however_soon_the_paste_shows(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    adapter, log, events = demo_target(tmux_server, tmp_path)
    adapter.submit_min_s = 0.4
    adapter.submit_delay_s = 3.0
    confirmed, _ = await type_prompt(adapter, TEXT)
    assert confirmed
    paste_at, enter_at = events[0][1], events[enters(events)[0]][1]
    assert enter_at - paste_at >= 0.4, "an Enter sooner than the agent takes one after a paste"
    await until(lambda: messages(log) == [TEXT], what="the prompt, whole")


async def test_an_input_that_never_shows_the_paste_gets_its_enter_at_the_ceiling(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    adapter, log, events = demo_target(tmux_server, tmp_path)
    adapter.submit_delay_s = 0.5

    async def never(text: str) -> bool:
        events.append(("landed", False))
        return False

    adapter.paste_landed = never  # type: ignore[method-assign]
    confirmed, _ = await type_prompt(adapter, TEXT)
    assert confirmed
    paste_at, enter_at = events[0][1], events[enters(events)[0]][1]
    assert enter_at - paste_at >= 0.5
    assert [kind for kind, _ in events].count("paste") == 1
    await until(lambda: messages(log) == [TEXT], what="the prompt, whole")


async def test_a_screen_adapter_sees_its_paste_land(tmux_server: TmuxServer, tmp_path: Path) -> None:
    """The default ``paste_landed`` is the crash recovery's own reading of the input (``input_holds``): the
    text pasted shows as the prompt; before the paste, and with other text there, it does not."""
    log = tmp_path / "agent.jsonl"
    pane = start_agent(tmux_server, log)
    adapter = REGISTRIES.agents.get("demo")(
        EngineContext(name="t", tile=Tile(pane=pane, agent="demo"), tmux=tmux_server.tmux))
    assert not await adapter.paste_landed(TEXT)
    await tmux_server.tmux.paste(pane, TEXT)
    await until(lambda: adapter.paste_landed(TEXT), what="the paste in the demo agent's input")
    assert not await adapter.paste_landed("something a person typed instead")
