"""The real Gemini CLI's states on the board, proven against the fake Gemini API's log and its screen
(tests/support/state_proof.py): its folder-trust dialog at start (``baton approve`` trusts the folder; the
CLI restarts into its input) → idle → working (a slowly streamed answer) → idle → a Shell permission prompt →
``baton approve`` → working → idle → Esc → idle → a turn the API answers ``400`` → idle (it retries a 5xx
without end), the board sampled every ~150 ms."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agent_versions import resolve
from tests.fakes.gemini_api import OVERLOADED, FakeGemini
from tests.support.gemini import make_gemini_home
from tests.support.real_cli import npm_package
from tests.support.state_proof import Screen, StateProof
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow]

GEMINI = resolve("gemini")  # pinned, or npm latest with BATON_AGENTS=latest



def dialog(screen: str) -> bool:
    """The trust dialog or a permission prompt, not the trust dialog answered: that one stays drawn above
    ``Gemini CLI is restarting to apply the trust changes...`` while the new process starts."""
    after = screen.rpartition("restarting to apply the trust changes")[2]
    return any(line in after for line in ("Do you trust the files in this folder?", "Allow execution of"))


GEMINI_SCREEN = Screen(
    dialog=dialog,
    busy=lambda s: "(esc to cancel" in s,
    ready=lambda s: "Type your message or @path/to/file" in s,
)


@pytest.fixture(scope="module")
def gemini_bin() -> Path:
    return npm_package(GEMINI)


@pytest.fixture
def api() -> Iterator[FakeGemini]:
    with FakeGemini() as fake:
        # 0.61.0 retries a 500 or a 503 (overloaded) without end — with backoff, or at ~30 requests a second
        # with ``general.maxAttempts: 1`` — so the failed turn is a request the API refuses (400)
        fake.fail_status = 400
        yield fake


def test_the_board_shows_gemini_clis_states_truly_and_soon(
        tmux_server: TmuxServer, tmp_path: Path, gemini_bin: Path, api: FakeGemini,
        capsys: pytest.CaptureFixture[str]) -> None:
    gem = make_gemini_home(tmp_path, api_url=api.url, gemini_bin=gemini_bin, trusted=False)
    pane = tmux_server.new_pane(gem.shell_command(), cwd=gem.project, width=120, height=40)
    proof = StateProof("gemini", tmux_server, pane, GEMINI_SCREEN, tmp_path / "routes.yaml")

    prompt = proof.prompt  # its pause: an Enter within 30 ms of a key is a newline (FAST_RETURN_TIMEOUT)

    with proof.running():
        proof.key("gemini")
        tmux_server.type(pane, "gemini")
        proof.wait_screen("waiting", hold_s=1.5)
        proof.phase("trusted")
        assert "(keys Enter)" in proof.approve()  # "1. Trust folder" is preselected
        proof.wait_screen("idle", hold_s=1.5)
        proof.answer_turn("SLOWTEST: write the plan", prompt)
        proof.approval_turn("TOOLASK: create approved.txt, then SLOWTEST: say so slowly", prompt)
        proof.interrupted_turn("SLOWTEST: a long answer to interrupt", prompt)
        proof.phase("failed")
        prompt(f"{OVERLOADED}: the API refuses the request")
        proof.wait_screen("idle", hold_s=3.0)  # long enough to see a failed turn read as still open
        screen = tmux_server.capture(pane)
    assert (gem.project / "approved.txt").exists()
    statuses = [s.status for s in api.streams]
    assert statuses == [200, 200, 200, 499, 400], (statuses, screen)
    assert "API Error" in screen
    proof.report(f"Gemini CLI {GEMINI[1]}", api.streams, capsys)
