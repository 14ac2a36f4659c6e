"""What a waiting agent asks (issue #39): the question and the command, as each agent draws its permission
prompt, read from the recorded screens; the demo agent's own prompt seen as ``waiting`` by ``baton status``,
the board and the page's feed, with what it asks, and answered by ``baton approve``; one state vocabulary
(idle, working, waiting, absent, gone) wherever a person reads a state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.engine.tiles import build_tiles
from pipeline.plugin.agents import AgentAdapter
from pipeline.views.board import Board, render
from pipeline.views.live_board import TileFeed
from pipeline.views.states import state_text
from plugins.claude_code.adapter import ClaudeCodeAdapter
from plugins.cline.adapter import ClineAdapter
from plugins.codex.adapter import CodexAdapter
from plugins.copilot.adapter import CopilotAdapter
from plugins.demo.adapter import DemoAdapter
from plugins.demo.agent import ASK
from plugins.gemini.adapter import GeminiAdapter
from plugins.opencode.adapter import OpenCodeAdapter
from tests.support.agents import start_agent
from tests.support.cli import baton
from tests.support.paths import FIXTURES
from tests.support.pipelines import REGISTRIES, make_config
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

#: (adapter, recorded screen, what it asks); the demo's screen is its agent's prompt line as drawn
ASKED: list[tuple[type[AgentAdapter], str, str | None]] = [
    (ClaudeCodeAdapter, "claude-code/screens/screen_permission_prompt.txt",
     "Do you want to proceed?\nBash command: touch perm_marker.txt && ls"),
    (ClaudeCodeAdapter, "claude-code-2.1.332/screens/screen_permission_prompt.txt",
     "Do you want to proceed?\nTool use: Agent(Survey the project)"),
    (ClaudeCodeAdapter, "claude-code-2.1.332/screens/screen_auto_mode_dialog.txt",
     "Auto mode can't check actions in this session"),
    (CodexAdapter, "codex/approval/screen_approval.txt",
     "Would you like to run the following command?\n$ touch APPROVAL_PROBE.txt && echo PROBE_TOOL_OK"),
    (OpenCodeAdapter, "opencode/screens/screen_permission_prompt.txt",
     "Permission required\n← Access external directory /etc"),
    (GeminiAdapter, "gemini-cli-0.61.0/screens/screen_11_approval_prompt.txt",
     "Allow execution of [Shell]?\nShell: touch approved.txt && echo hello"),
    (GeminiAdapter, "gemini-cli-0.61.0/screens/screen_11_approval_prompt.ansi.txt",
     "Allow execution of [Shell]?\nShell: touch approved.txt && echo hello"),
    (GeminiAdapter, "gemini-cli-0.61.0/screens/screen_11b_approval_prompt_bottom.txt",
     "Allow execution of [Shell]?\nShell: touch approved.txt && echo hello"),
    (CopilotAdapter, "copilot-1.0.102/screens/screen_09_approval_prompt.txt",
     "Do you want to run this command?\nPrint hello: touch approved.txt && echo hello"),
    (CopilotAdapter, "copilot-1.0.102/screens/screen_28_pinned_approval_prompt.txt",
     "Do you want to run this command?\nPrint hello: touch approved.txt && echo hello"),
    (CopilotAdapter, "copilot-1.0.102/screens/screen_01_first_run_folder_trust.txt",
     "Do you trust the files in this folder?\nConfirm folder trust: /home/dev/my-app"),
    (ClineAdapter, "cline-3.0.65/screens/approval.ans",
     "Approve tool call?\nrun_commands: touch approved.txt && echo FAKE_TOOL_OK"),
    (DemoAdapter, f"demo❯ NEEDS_APPROVAL\r\ncoder asks to run `touch demo.txt`: {ASK} ",
     f"coder asks to run `touch demo.txt`: {ASK}"),
]
#: each agent's other recorded screens, where nothing is asked
OTHERS = {ClaudeCodeAdapter: ("claude-code", "claude-code-2.1.332"), CodexAdapter: ("codex",),
          OpenCodeAdapter: ("opencode",), GeminiAdapter: ("gemini-cli-0.61.0",),
          CopilotAdapter: ("copilot-1.0.102",)}


def _reader(cls: type[AgentAdapter]) -> AgentAdapter:
    """An adapter for reading screens only: ``asks`` reads the screen it is given, nothing of its tile."""
    return object.__new__(cls)


def _screen(name: str) -> str:
    return (FIXTURES / name).read_text() if name.endswith((".txt", ".ans")) else name


@pytest.mark.parametrize(("cls", "screen", "asks"), ASKED,
                         ids=[f"{s.split('/')[0]}:{Path(s).stem}" if s.endswith((".txt", ".ans"))
                              else f"{c.name}:drawn" for c, s, _ in ASKED])
def test_each_agent_says_what_its_recorded_dialog_asks(cls: type[AgentAdapter], screen: str,
                                                        asks: str) -> None:
    adapter = _reader(cls)
    assert adapter.asks(_screen(screen)) == asks
    assert adapter.waiting_for(_screen(screen)) is not None  # the same dialog makes it wait


@pytest.mark.parametrize("cls", list(OTHERS), ids=[c.name for c in OTHERS])
def test_no_other_recorded_screen_asks_anything(cls: type[AgentAdapter]) -> None:
    asking = {s for c, s, _ in ASKED if c is cls}
    screens = [p for folder in OTHERS[cls] for p in (FIXTURES / folder).rglob("screen*.txt")
               if str(p.relative_to(FIXTURES)) not in asking and "approval" not in p.name
               and "permission_prompt" not in p.name and "dialog" not in p.name]
    assert screens
    reader = _reader(cls)
    assert [p.name for p in screens if reader.asks(p.read_text()) is not None] == []


def test_what_is_asked_is_made_safe_to_show() -> None:
    """A command drawn with escapes and control characters is shown as text, one line each."""
    screen = f"demo❯ x\r\ncoder asks to run `\x1b]0;evil\x07rm\x08 -rf \x1b[31m/`: {ASK} "
    assert _reader(DemoAdapter).asks(screen) == f"coder asks to run `rm -rf /`: {ASK}"  # type: ignore[attr-defined]


def test_the_board_shows_what_a_waiting_tile_asks_under_its_row() -> None:
    board = Board([("coder", "claude"), ("tests", "shell")])
    board.update({"tile": "coder", "state": "waiting: permission prompt", "last_response": "an old answer",
                  "waiting_for": "Do you want to proceed?\nBash command: touch perm_marker.txt && ls"})
    board.update({"tile": "tests", "state": "idle", "last_response": "ok", "waiting_for": "stale"})
    lines = render(board, 100, 20)
    assert lines[3] == "  └ asks: Do you want to proceed? · Bash command: touch perm_marker.txt && ls"
    assert lines[5] == "  └ ok"
    assert board.views["tests"].waiting_for == ""  # only a waiting tile asks


@pytest.mark.parametrize(("raw", "said"), [
    ("ready", "idle"), ("busy", "working"), ("draft", "idle: draft typed"), ("gone", "gone"),
    ("waiting (permission prompt)", "waiting: permission prompt"),
    ("waiting (dialog open)", "waiting: dialog open"),
    ("working: 1 background agent", "working: 1 background agent"), ("absent", "absent: bare shell"),
    # said once, said the same again
    ("idle", "idle"), ("idle: draft typed", "idle: draft typed"), ("absent: runs vim", "absent: runs vim"),
    ("waiting: permission prompt", "waiting: permission prompt"),
])
def test_one_vocabulary_for_every_state(raw: str, said: str) -> None:
    assert state_text(raw, "bash") == said


def _status(routes: Path, server: TmuxServer) -> dict:
    done = baton("status", "--json", "-c", str(routes), "-L", server.socket)
    assert done.status == 0, (done.out, done.err)
    [row] = json.loads(done.out)
    return row


@pytest.mark.tmux
def test_the_demo_agents_prompt_is_waiting_with_what_it_asks_until_baton_approve_answers_it(
        tmux_server: TmuxServer, tmp_path: Path) -> None:
    pane = start_agent(tmux_server, tmp_path / "log.jsonl", name="coder", role="writer", work_s=0.3)
    routes = tmp_path / "routes.yaml"
    routes.write_text(f'version: 1\ntiles:\n  coder: {{pane: "{pane}", agent: demo}}\n')
    assert _status(routes, tmux_server)["state"] == "idle"
    tmux_server.type(pane, "Plan it. NEEDS_APPROVAL")
    wait_for(lambda: ASK in tmux_server.capture(pane), what="the demo agent's permission prompt")
    row = _status(routes, tmux_server)
    asks = f"coder asks to run `touch demo.txt`: {ASK}"
    assert (row["state"], row["waiting_for"]) == ("waiting: permission prompt", asks), row
    table = baton("status", "-c", str(routes), "-L", tmux_server.socket).out
    assert "waiting: permission prompt" in table, table
    approved = baton("approve", "coder", "-c", str(routes), "-L", tmux_server.socket)
    assert approved.status == 0, (approved.out, approved.err)
    wait_for(lambda: "Draft 1 by coder" in tmux_server.capture(pane), what="the turn, allowed, to go on")
    row = _status(routes, tmux_server)
    assert (row["state"], row["waiting_for"]) == ("idle", None), row


@pytest.mark.tmux
@pytest.mark.anyio
async def test_the_live_feed_the_page_reads_says_waiting_and_what_is_asked(tmux_server: TmuxServer,
                                                                            tmp_path: Path) -> None:
    pane = start_agent(tmux_server, tmp_path / "log.jsonl", name="coder", role="writer")
    tmux_server.type(pane, "Plan it. NEEDS_APPROVAL")
    wait_for(lambda: ASK in tmux_server.capture(pane), what="the demo agent's permission prompt")
    config = make_config({"coder": {"pane": pane, "agent": "demo"}}, [])
    tiles = await build_tiles(config, REGISTRIES.agents, tmux_server.tmux)
    feed = TileFeed(config, tiles, lambda: None)
    await feed.refresh({"coder"})
    view = feed.board.views["coder"]
    assert (view.kind, view.words, view.waiting_for) == (
        "waiting", "permission prompt", f"coder asks to run `touch demo.txt`: {ASK}")
    tmux_server.type(pane, "n", enter=False)
