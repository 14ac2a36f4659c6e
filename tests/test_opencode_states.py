"""The real OpenCode's states on the board, proven against the fake chat-completions API's log and its screen
(tests/support/state_proof.py): start (1.18.33 shows no dialog) → idle → working (a slowly streamed answer)
→ idle → its permission prompt (``"permission": {"bash": "ask"}``) → ``baton approve`` → working → idle →
Esc (twice: the first asks "esc again to interrupt") → idle → a turn the API answers ``500``, which OpenCode
retries by itself (docs/agent-versions.md, OpenCode) → idle → a turn the API answers ``400``, which fails it →
idle, the board sampled every ~150 ms."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pipeline.plugin.tools import proc, strip_ansi
from plugins.opencode.adapter import OpenCodeAdapter
from plugins.opencode.screen import input_draft, permission_prompt
from tests.agent_versions import resolve
from tests.fakes.openai_chat import FakeChat, opencode_config
from tests.support.opencode import opencode_env, stop_left_behind
from tests.support.polling import wait_for
from tests.support.real_cli import npm_package
from tests.support.state_proof import Screen, StateProof
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow]

OPENCODE = resolve("opencode")
#: streamed a word every 0.5 s (the fake's SLOWTEST pace): ~3.5 s, and ~15 s for the one interrupted
SLOW_ANSWER = "The plan, streamed slowly, step by step."
LONG_ANSWER = " ".join(["step"] * 30)


def input_box_bottom(screen: str) -> int | None:
    """The row of the input box's bottom border (``╹▀▀▀``), None when no box is drawn."""
    lines = strip_ansi(screen).rstrip("\n").split("\n")
    return next((i for i in range(len(lines) - 1, -1, -1) if lines[i].lstrip().startswith("╹▀")), None)


def awaiting_answer(screen: str) -> bool:
    """The prompt just sent is drawn right above the empty input box (three rows over its mode line), with
    nothing of an answer under it yet: OpenCode has taken it and may take seconds before it calls the model,
    with no busy line meanwhile."""
    bottom = input_box_bottom(screen)
    lines = strip_ansi(screen).rstrip("\n").split("\n")
    return bottom is not None and bottom >= 5 and lines[bottom - 5].strip().startswith("┃")


def opencode_screen(prompted: list[str]) -> Screen:
    """OpenCode's screen as the truth: its permission dialog → waiting; its busy line, or a prompt it has
    taken and not yet begun to answer → working; its empty input → idle. Its start screen (the logo over
    ``Ask anything``) is idle until a prompt was sent (``prompted`` not empty): then it stays up, seconds at
    times, while OpenCode opens the session for the first one — working."""

    def busy(s: str) -> bool:
        opening = bool(prompted) and any(p in s for p in OpenCodeAdapter.placeholders)
        return any(m in s for m in OpenCodeAdapter.busy_markers) or awaiting_answer(s) or opening

    return Screen(dialog=lambda s: permission_prompt(s) is not None, busy=busy,
                  ready=lambda s: input_box_bottom(s) is not None and input_draft(s) == "")


@pytest.fixture(scope="module")
def opencode_bin() -> Path:
    return npm_package(OPENCODE)


@pytest.fixture
def api() -> Iterator[FakeChat]:
    with FakeChat() as fake:
        yield fake


def test_the_board_shows_opencodes_states_truly_and_soon(
        tmux_server: TmuxServer, tmp_path: Path, opencode_bin: Path, api: FakeChat,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    home, project = tmp_path / "home", tmp_path / "web"
    project.mkdir()
    env = opencode_env(home, opencode_bin)
    (home / ".config" / "opencode").mkdir(parents=True)
    config_json = opencode_config(api.url) | {"permission": {"bash": "ask"}}
    (home / ".config" / "opencode" / "opencode.json").write_text(json.dumps(config_json))
    monkeypatch.setenv("XDG_DATA_HOME", env["XDG_DATA_HOME"])  # where the board finds the store
    pane = tmux_server.new_pane(env=env, cwd=project, width=120, height=48)
    routes = tmp_path / "routes.yaml"
    prompted: list[str] = []
    proof = StateProof("opencode", tmux_server, pane, opencode_screen(prompted), routes)
    api.script(SLOW_ANSWER, LONG_ANSWER)  # the tool call and its answer take nothing from the queue

    def prompt(text: str) -> None:
        tmux_server.run("send-keys", "-t", pane, "-l", text)
        wait_for(lambda: input_draft(tmux_server.capture(pane)) == text, what="the typed prompt")
        proof.hold(0.3)  # as a person would: not an Enter in the same burst as the typing
        prompted.append(text)
        proof.press("Enter")
        wait_for(lambda: input_draft(tmux_server.capture(pane)) != text, what="the prompt sent")

    started: list[proc.Proc] = []
    try:
        with proof.running():
            proof.key("opencode")
            tmux_server.type(pane, "opencode")
            proof.wait_screen("idle", 90, hold_s=1.5)  # no start-up dialog
            found = proc.find_agent(tmux_server.pane_pid(pane), {"opencode"})
            assert found is not None
            started = list(proc.subtree(found.pid))
            proof.phase("answer")
            prompt("SLOWTEST: write the plan")
            wait_for(lambda: api.streams and api.streams[0].first_chunk, 30, what="the slow answer")
            proof.wait_screen("idle", hold_s=1.5)
            proof.phase("permission")
            prompt("TOOLASK: create the marker file")
            proof.wait_screen("waiting", hold_s=1.5)
            proof.phase("approved")
            assert "(keys Enter)" in proof.approve()  # "Allow once"
            wait_for(lambda: any(r.kind == "tool-final" for r in api.requests), what="the answer after it")
            proof.wait_screen("idle", hold_s=1.5)
            proof.phase("interrupted")
            prompt("SLOWTEST: a long answer to interrupt")
            wait_for(lambda: api.streams[-1].first_chunk, what="the slow answer streaming")
            proof.hold(2.0)  # long enough for the board to be held to it
            proof.press("Escape")
            wait_for(lambda: "esc again to interrupt" in tmux_server.capture(pane), what="OpenCode's 'again'")
            proof.press("Escape")
            proof.wait_screen("idle", hold_s=1.5)
            proof.phase("retried")
            api.fail_next(1)
            prompt("The API fails this one once")
            wait_for(lambda: api.streams[-1].status == 500, what="the API's 500")
            wait_for(lambda: api.streams[-1].status == 200 and api.streams[-1].ended, 30, what="the retry")
            proof.wait_screen("idle", hold_s=1.5)
            proof.phase("failed")
            api.fail_next(1, status=400)
            prompt("The API refuses this one")
            wait_for(lambda: api.streams[-1].status == 400, what="the API's 400")
            proof.wait_screen("idle")
            proof.hold(2.0)
            screen = tmux_server.capture(pane)
    finally:
        tmux_server.kill()
        stop_left_behind(started)
    assert (project / "approved.txt").exists()
    asked = [(r.kind, r.last_user_text[:40]) for r in api.requests]
    assert [s.status for s in api.streams] == [200, 200, 200, 499, 500, 200, 400], (api.streams, asked)
    assert "400" in screen or "fake: scripted" in screen, screen
    proof.report(f"OpenCode {OPENCODE[1]}", api.streams, capsys)
