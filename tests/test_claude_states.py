"""The real Claude Code's states on the board, proven against the fake Messages API's log and its screen
(tests/support/state_proof.py): its folder-trust dialog at start (``baton approve``), its offer of auto
mode (``baton deny``) → idle → working (a slowly streamed
answer) → idle → a Bash permission prompt → ``baton approve`` → working → idle → Esc → idle → a turn the
API answers ``529 overloaded`` → idle, the board sampled every ~150 ms."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from plugins.claude_code.screen import input_box
from tests.fakes.claude_api import OVERLOADED, ClaudeAPI, RecordedRequest
from tests.fakes.npm_agents import CLAUDE_CODE
from tests.support.claude import make_claude_home
from tests.support.polling import wait_for
from tests.support.real_cli import npm_package
from tests.support.state_proof import Screen, StateProof
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow]

SLOW = "SLOWTEST"
TOOL = "TOOLASK"
#: a streamed answer of ~3 s: 14 chunks of 16 characters, 0.22 s apart
SLOW_ANSWER = "The plan, streamed slowly: " + "step by step, " * 14


def answer_for(prompt: str) -> str:
    return SLOW_ANSWER if SLOW in prompt else "Done: the marker file is there."


def tool_blocks(request: RecordedRequest) -> list[dict] | None:
    """A Bash call Claude Code asks before running (``touch``), then a plain answer."""
    if TOOL in request.last_user_message and "tool_result" not in request.last_user_message:
        return [{"type": "tool_use", "id": "toolu_states_0001", "name": "Bash",
                 "input": {"command": "touch perm_marker.txt", "description": "Create the marker file"}}]
    return None


CLAUDE_SCREEN = Screen(
    dialog=lambda s: any(line in s for line in ("Yes, I trust this folder", "Do you want to proceed?",
                                                "Make auto mode your default permission mode?")),
    busy=lambda s: "esc to interrupt" in s,
    ready=lambda s: input_box(s) is not None,
)


@pytest.fixture(scope="module")
def claude_bin() -> Path:
    return npm_package(CLAUDE_CODE)


@pytest.fixture
def api() -> Iterator[ClaudeAPI]:
    with ClaudeAPI(answer=answer_for, blocks=tool_blocks,
                   chunk_delay_s=lambda p: 0.22 if SLOW in p else 0.01) as fake:
        yield fake


def test_the_board_shows_claude_codes_states_truly_and_soon(
        tmux_server: TmuxServer, tmp_path: Path, claude_bin: Path, api: ClaudeAPI,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    home = make_claude_home(tmp_path, api_url=api.url, claude_bin=claude_bin, version=CLAUDE_CODE[1],
                            extra_env={"CLAUDE_CODE_MAX_RETRIES": "0"})  # a 529 fails the turn at once
    state = json.loads((home.config / ".claude.json").read_text())
    for project in state["projects"].values():
        project["hasTrustDialogAccepted"] = False  # its start-up dialog: trust this folder?
    for path in (home.home / ".claude.json", home.config / ".claude.json"):
        path.write_text(json.dumps(state))
    # the default permission mode: Claude Code asks before it runs a command (in auto mode it may not)
    (home.config / "settings.json").write_text(json.dumps({"permissions": {"defaultMode": "default"}}))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(home.config))  # where the board finds its files
    pane = tmux_server.new_pane(home.shell_command(), cwd=home.project, width=120, height=40)
    routes = tmp_path / "routes.yaml"
    proof = StateProof("claude", tmux_server, pane, CLAUDE_SCREEN, routes)

    def prompt(text: str) -> None:
        # an Enter sooner than 0.5 s after typing is taken as pasted (docs/agents.md, Claude Code)
        proof.prompt(text, pause_s=0.5, draft=input_box)

    with proof.running():
        proof.key("claude")
        tmux_server.type(pane, "claude")
        proof.wait_screen("waiting", hold_s=1.5)
        proof.phase("trusted")
        assert "(keys Down Enter)" in proof.approve()  # "No, exit" is preselected
        # in the default permission mode, 2.1.332 then offers auto mode: "No, keep manual mode"
        proof.wait_screen("waiting", hold_s=1.5)
        proof.phase("manual mode kept")
        assert "(keys Down Enter)" in proof.approve("deny")
        proof.wait_screen("idle", hold_s=1.5)
        proof.answer_turn(f"{SLOW}: write the plan", prompt)
        proof.phase("permission")
        prompt(f"{TOOL}: create the marker file")
        proof.wait_screen("waiting", hold_s=1.5)
        proof.phase("approved")
        proof.approve()
        proof.wait_screen("idle", hold_s=1.5)
        proof.interrupted_turn(f"{SLOW}: a long answer to interrupt", prompt)
        proof.phase("failed")
        prompt(f"{OVERLOADED}: the API is overloaded")
        wait_for(lambda: api.streams[-1].status == 529, what="the API's 529")
        proof.wait_screen("idle")
        proof.hold(2.0)
        screen = tmux_server.capture(pane)
    assert (home.project / "perm_marker.txt").exists()
    assert [s.status for s in api.streams] == [200, 200, 200, 499, 529], api.streams
    assert "529" in screen or "verloaded" in screen, screen
    proof.report(f"Claude Code {CLAUDE_CODE[1]}", api.streams, capsys)
