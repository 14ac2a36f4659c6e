"""The real Cline's states on the board, proven against the fake chat-completions API's log and its screen
(tests/support/state_proof.py): start (its notices marked shown: no dialog) → idle → working (a slowly
streamed answer) → idle → its permission prompt (auto-approve turned off with Shift+Tab) → ``baton
approve`` → working → idle → Esc → idle → a turn the API answers ``400``, which fails it → idle, the board
sampled every ~150 ms."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from plugins.cline.screen import input_draft, is_busy, waiting_for
from tests.agent_versions import resolve
from tests.fakes.openai_chat import FakeChat
from tests.support.cline import make_cline_home
from tests.support.polling import wait_for
from tests.support.real_cli import npm_package
from tests.support.state_proof import Screen, StateProof
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow]

CLINE = resolve("cline")
#: streamed a word every 0.5 s (the fake's SLOWTEST pace): ~3.5 s, and ~15 s for the one interrupted
SLOW_ANSWER = "The plan, streamed slowly, step by step."
LONG_ANSWER = " ".join(["step"] * 30)


def cline_screen() -> Screen:
    """Cline's screen as the truth: its approval, picker or notice → waiting; a spinner → working; its empty
    input box → idle."""
    return Screen(dialog=lambda s: waiting_for(s) is not None, busy=is_busy,
                  ready=lambda s: input_draft(s) == "")


@pytest.fixture
def api() -> Iterator[FakeChat]:
    with FakeChat() as fake:
        yield fake


def test_the_board_shows_clines_states_truly_and_soon(
        tmux_server: TmuxServer, tmp_path: Path, api: FakeChat, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    home = make_cline_home(tmp_path / "cl", api_url=api.url, cline_bin=npm_package(CLINE))
    monkeypatch.setenv("HOME", str(home.home))  # where baton approve's adapter looks (as the pane's)
    pane = tmux_server.new_pane(home.shell_command(), cwd=home.project, width=120, height=40)
    proof = StateProof("cline", tmux_server, pane, cline_screen(), tmp_path / "routes.yaml")
    api.script(SLOW_ANSWER, LONG_ANSWER)  # the tool call and its answer take nothing from the queue

    def prompt(text: str) -> None:
        proof.prompt(text, pause_s=0.3, draft=input_draft)  # not an Enter in the same burst as the keys

    try:
        with proof.running():
            proof.key("cline")
            tmux_server.type(pane, "cline")
            proof.wait_screen("idle", 90, hold_s=1.5)
            proof.phase("answer")
            prompt("SLOWTEST: write the plan")
            wait_for(lambda: api.streams and api.streams[0].first_chunk, 30, what="the slow answer")
            proof.wait_screen("idle", hold_s=1.5)
            proof.press("BTab")  # auto-approve off: Cline asks before a tool
            wait_for(lambda: "Auto-approve all disabled" in tmux_server.capture(pane), what="approvals on")
            proof.wait_screen("idle", hold_s=1.0)
            proof.phase("permission")
            prompt("TOOLASK: create the marker file")
            proof.wait_screen("waiting", hold_s=1.5)
            proof.phase("approved")
            assert "(keys y)" in proof.approve()
            wait_for(lambda: any(r.kind == "tool-final" for r in api.requests), what="the answer after it")
            proof.wait_screen("idle", hold_s=1.5)
            proof.phase("interrupted")
            prompt("SLOWTEST: a long answer to interrupt")
            wait_for(lambda: api.streams[-1].first_chunk, what="the slow answer streaming")
            proof.hold(2.0)  # long enough for the board to be held to it
            proof.press("Escape")
            proof.wait_screen("idle", hold_s=1.5)
            proof.phase("failed")
            api.fail_next(1, status=400)
            prompt("The API refuses this one")
            wait_for(lambda: api.streams[-1].status == 400, what="the API's 400")
            proof.wait_screen("idle", 90)
            proof.hold(2.0)
    finally:
        tmux_server.kill()
        home.end()
    assert (home.project / "approved.txt").exists()
    proof.report(f"Cline {CLINE[1]}", api.streams, capsys)
