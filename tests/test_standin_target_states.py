"""Each target's adapter reads its stand-in's state as a hand-off needs it (tests/fakes/agent_tui.py): ready
when idle, ``draft`` under a person's half-typed text, ``busy`` while it works and while it asks for an
approval — a prompt typed into that dialog would answer it — with ``waiting_for`` saying what for, and ready
again once the turn is over. The stand-ins write their agent's files as the real CLIs do, so this holds the
adapters' file readers too (Gemini CLI's file looks finished while its tool waits: the screen decides). pi
asks nothing before a tool; it asks at start whether to trust a folder with ``.pi/`` settings: ``busy``
until that is answered, a prompt typed into it would answer it."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from pipeline.engine.config import Tile
from pipeline.engine.context import EngineContext
from pipeline.plugin.agents import AgentAdapter
from plugins.claude_code.adapter import ClaudeCodeAdapter
from plugins.codex.adapter import CodexAdapter
from plugins.copilot.adapter import CopilotAdapter
from plugins.gemini.adapter import GeminiAdapter
from plugins.opencode.adapter import OpenCodeAdapter
from plugins.pi.adapter import PiAdapter
from plugins.qwen.adapter import QwenAdapter
from tests.support.polling import until
from tests.support.standin_targets import StandinTarget, say
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.anyio]
ADAPTERS: dict[str, type[AgentAdapter]] = {
    "claude": ClaudeCodeAdapter, "codex": CodexAdapter, "opencode": OpenCodeAdapter, "gemini": GeminiAdapter,
    "copilot": CopilotAdapter, "qwen": QwenAdapter, "pi": PiAdapter,
}
#: agents that ask before a tool runs (pi just runs it)
ASK_BEFORE_TOOLS = [a for a in ADAPTERS if a != "pi"]


def _adapter(target: StandinTarget, server: TmuxServer, monkeypatch: pytest.MonkeyPatch) -> AgentAdapter:
    for key, value in target.env().items():
        monkeypatch.setenv(key, value)
    tile = Tile(pane=target.pane, agent=target.agent)
    return ADAPTERS[target.agent](EngineContext(name="b", tile=tile, tmux=server.tmux))  # type: ignore[arg-type]


@pytest.mark.parametrize("agent", ASK_BEFORE_TOOLS)
async def test_the_adapter_reads_ready_draft_busy_and_asking_from_its_stand_in(
    agent: str, tmux_server: TmuxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = StandinTarget(tmux_server, tmp_path, agent, work_s=0.3)
    adapter = _adapter(target, tmux_server, monkeypatch)

    assert await adapter.target_state() == "ready"
    tmux_server.type(target.pane, "my own half-written", enter=False)
    await until_state(adapter, "draft")
    tmux_server.run("send-keys", "-t", target.pane, "C-u")
    await until_state(adapter, "ready")
    say(tmux_server, target.pane, "NEEDS_APPROVAL: touch a file")
    await until_state(adapter, "busy")
    # the stand-in draws its busy line, then the dialog (as the agent does): the dialog a moment later
    await until(lambda: str(adapter.waiting_for(tmux_server.capture(target.pane))).startswith(
        "permission prompt"), 10, "the permission prompt on screen")
    await anyio.sleep(1.0)  # shapes the scenario: asking for a while, nothing changes
    assert await adapter.target_state() == "busy"
    tmux_server.run("send-keys", "-t", target.pane, "Enter")  # answered: the turn goes on, then ends
    await until_state(adapter, "ready")
    assert adapter.waiting_for(tmux_server.capture(target.pane)) is None
    assert target.messages() == ["NEEDS_APPROVAL: touch a file"]


async def test_pi_reads_asking_at_start_then_ready_draft_busy_from_its_stand_in(
    tmux_server: TmuxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = StandinTarget(tmux_server, tmp_path, "pi", work_s=1.0, trust_dialog=True)
    adapter = _adapter(target, tmux_server, monkeypatch)
    assert adapter.waiting_for(tmux_server.capture(target.pane)) == "project trust dialog"
    await anyio.sleep(1.0)  # shapes the scenario: asking for a while, nothing changes
    assert await adapter.target_state() == "busy"
    tmux_server.run("send-keys", "-t", target.pane, "Down", "Down", "Enter")  # trust, this session only
    await until_state(adapter, "ready")
    tmux_server.type(target.pane, "my own half-written", enter=False)
    await until_state(adapter, "draft")
    tmux_server.run("send-keys", "-t", target.pane, "C-u")
    await until_state(adapter, "ready")
    say(tmux_server, target.pane, "NEEDS_APPROVAL: touch a file")  # no question: the tool just runs
    await until_state(adapter, "busy")
    assert adapter.waiting_for(tmux_server.capture(target.pane)) is None
    await until_state(adapter, "ready")
    assert target.messages() == ["NEEDS_APPROVAL: touch a file"]


async def until_state(adapter: AgentAdapter, state: str) -> None:
    async def there() -> bool:
        return await adapter.target_state() == state

    await until(there, timeout=10, what=f"{adapter.name} {state}")
