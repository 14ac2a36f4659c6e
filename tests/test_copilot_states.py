"""The real GitHub Copilot CLI's states on the board, proven against the fake OpenAI chat server's log and its
screen (tests/support/state_proof.py): its folder-trust dialog at start (``baton approve`` takes "Yes", for
this session) → idle → working (a slowly streamed answer) → idle → a command's approval box → ``baton
approve`` → working → idle → interrupted (Esc twice while the answer streams) → idle → a turn the API
answers with an error → idle, the board sampled every ~150 ms."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from plugins.copilot.screen import approval_prompt, input_draft, is_working
from tests.agent_versions import resolve
from tests.fakes.openai_chat import OVERLOADED, FakeChat
from tests.support.copilot import make_copilot_home
from tests.support.polling import wait_for
from tests.support.real_cli import npm_package
from tests.support.state_proof import Screen, StateProof
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow]

COPILOT = resolve("copilot")  # pinned, or npm latest with BATON_AGENTS=latest

COPILOT_SCREEN = Screen(
    dialog=lambda s: approval_prompt(s) is not None,  # an approval box, or the folder-trust dialog
    busy=is_working,
    ready=lambda s: input_draft(s) is not None,
)


@pytest.fixture(scope="module")
def copilot_bin() -> Path:
    return npm_package(COPILOT)


@pytest.fixture
def api() -> Iterator[FakeChat]:
    with FakeChat() as fake:
        yield fake


def test_the_board_shows_copilots_states_truly_and_soon(
        tmux_server: TmuxServer, tmp_path: Path, copilot_bin: Path, api: FakeChat,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    cp = make_copilot_home(tmp_path, api_url=api.url, copilot_bin=copilot_bin, version=COPILOT[1])
    (cp.copilot / "config.json").write_text(json.dumps({}))  # the project not trusted: its dialog at start
    monkeypatch.setenv("COPILOT_HOME", str(cp.copilot))
    pane = tmux_server.new_pane(cp.shell_command(), cwd=cp.project, width=160, height=45)
    proof = StateProof("copilot", tmux_server, pane, COPILOT_SCREEN, tmp_path / "routes.yaml")

    def prompt(text: str) -> None:
        proof.prompt(text, pause_s=0.3, draft=input_draft)

    def interrupt() -> None:
        """Esc twice once tokens stream: the first arms it (``esc again to interrupt``), the second
        interrupts. A loaded Copilot can miss the second (at load 12–16 the arming ran out ~1 s later, the
        footer said ``esc esc interrupt`` again and the answer streamed on to its end): then the two again,
        as a person would. The footer alone does not tell a missed Esc (retried on it at once, the next
        first Esc twice got no ``esc again to interrupt``); still streaming 5 s later does."""
        for _ in range(3):
            for key in ("first", "second"):
                proof.press("Escape")
                if key == "first":
                    wait_for(lambda: "esc again to interrupt" in tmux_server.capture(pane),
                             what="the first Esc")
            try:
                wait_for(lambda: "Operation cancelled by user" in tmux_server.capture(pane), timeout=5,
                         what="the interrupt")
                return
            except AssertionError:
                if "esc esc interrupt" not in tmux_server.capture(pane):  # not streaming on either
                    raise
        raise AssertionError(f"three Esc pairs did not interrupt Copilot:\n{tmux_server.capture(pane)}")

    with proof.running():
        proof.key("copilot")
        tmux_server.type(pane, "copilot")
        proof.wait_screen("waiting", 90, hold_s=1.5)
        proof.phase("trusted")
        assert "(keys Enter)" in proof.approve()  # "1. Yes" (this session) is preselected
        proof.wait_screen("idle", hold_s=1.5)
        proof.answer_turn("SLOWTEST: write the plan", prompt)
        proof.approval_turn("TOOLASK: create approved.txt, then SLOWTEST: say so slowly", prompt)
        proof.phase("interrupted")
        api.script("A long answer, streamed slowly: " + "word " * 40)  # ~20 s, cut short
        prompt("SLOWTEST: a long answer to interrupt")
        wait_for(lambda: api.streams[-1].first_chunk, what="the slow answer streaming")
        proof.wait_screen("working", hold_s=1.5)
        interrupt()
        proof.wait_screen("idle", hold_s=1.5)
        proof.phase("failed")
        prompt(f"{OVERLOADED}: the API refuses the request")
        proof.wait_screen("idle", hold_s=3.0)  # long enough to see a failed turn read as still open
        screen = tmux_server.capture(pane)
    assert (cp.project / "approved.txt").exists()
    assert "Operation cancelled by user" in screen
    statuses = [s.status for s in api.streams if s.status != 200]
    assert statuses[0] == 499 and set(statuses[1:]) == {api.fail_status}, (statuses, screen)
    proof.report(f"Copilot CLI {COPILOT[1]} (the failed turn: {len(statuses) - 1} requests answered "
                 f"{api.fail_status})", api.streams, capsys)
