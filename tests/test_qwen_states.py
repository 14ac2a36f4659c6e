"""The real Qwen Code's states on the board, proven against the fake OpenAI chat server's log and its
screen (tests/support/state_proof.py): start (no start-up dialog with its settings made ahead) → idle →
working (a slowly streamed answer) → idle → a Shell permission prompt → ``baton approve`` → working → idle →
Esc → idle (the prompt given back to its input) → a turn the API answers ``400`` → idle (it retries a 503 for
minutes), the board sampled every ~150 ms. Its
follow-up suggestion, drawn in the input box after a turn, is an idle input."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from plugins.qwen.screen import input_draft
from tests.agent_versions import resolve
from tests.fakes.npm_agents import node_22_dir
from tests.fakes.openai_chat import OVERLOADED, FakeChat
from tests.support.qwen import make_qwen_home
from tests.support.real_cli import installed, npm_package
from tests.support.state_proof import Screen, StateProof
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow]

QWEN = resolve("qwen")  # pinned, or npm latest with BATON_AGENTS=latest

QWEN_SCREEN = Screen(
    dialog=lambda s: "Allow execution of" in s or "Waiting for user confirmation" in s,
    busy=lambda s: "esc to cancel" in s,
    # its input box, empty, holding its suggestion or the interrupted prompt it gives back (a draft)
    ready=lambda s: input_draft(s) is not None and "Initializing" not in s,
)


@pytest.fixture(scope="module")
def qwen_bin() -> Path:
    return npm_package(QWEN)


@pytest.fixture(scope="module")
def node_dir() -> Path:
    return installed("Node 22", node_22_dir)


@pytest.fixture
def api() -> Iterator[FakeChat]:
    with FakeChat() as fake:
        # 0.24.4 retries a 503 (overloaded) for minutes, with backoff: the failed turn is a request the API
        # refuses (400)
        fake.fail_status = 400
        yield fake


def test_the_board_shows_qwen_codes_states_truly_and_soon(
        tmux_server: TmuxServer, tmp_path: Path, qwen_bin: Path, node_dir: Path, api: FakeChat,
        capsys: pytest.CaptureFixture[str]) -> None:
    qwen = make_qwen_home(tmp_path, api_url=api.url, qwen_bin=qwen_bin, node_dir=node_dir)
    pane = tmux_server.new_pane(qwen.shell_command(), cwd=qwen.project, width=120, height=40)
    proof = StateProof("qwen", tmux_server, pane, QWEN_SCREEN, tmp_path / "routes.yaml")

    def prompt(text: str) -> None:
        proof.prompt(text, pause_s=0.6)  # its guard: an Enter within 500 ms of a paste-like burst, a newline

    with proof.running():
        proof.key("qwen")
        tmux_server.type(pane, "qwen")
        proof.wait_screen("idle", hold_s=1.5)
        proof.answer_turn("SLOWTEST: write the plan", prompt)
        proof.approval_turn("TOOLASK: create approved.txt, then SLOWTEST: say so slowly", prompt)
        proof.interrupted_turn("SLOWTEST: a long answer to interrupt", prompt)
        # Qwen gives the interrupted prompt back into its input (not always, under load): cleared, and
        # looked at until it is, since a loaded Qwen may drop a key
        for _ in range(10):
            if not (input_draft(tmux_server.capture(pane)) or "").strip():
                break
            tmux_server.run("send-keys", "-t", pane, "C-u")
            proof.hold(0.5)  # shapes the scenario: a beat for the input to redraw
        proof.phase("failed")
        refusals = sum(1 for s in api.streams if s.status == 400)
        prompt(f"{OVERLOADED}: the API refuses the request")
        for _ in range(10):  # a loaded Qwen may swallow the Enter: pressed again while the text still waits
            proof.hold(1.0)  # shapes the scenario: time for the request to reach the API
            if sum(1 for s in api.streams if s.status == 400) > refusals:
                break
            if OVERLOADED in (input_draft(tmux_server.capture(pane)) or ""):
                proof.press("Enter")
        proof.wait_screen("idle", hold_s=3.0)  # long enough to see a failed turn read as still open
        screen = tmux_server.capture(pane)
    assert (qwen.project / "approved.txt").exists()
    statuses = [s.status for s in api.streams if s.status != 200]
    assert statuses[0] == 499 and set(statuses[1:]) == {400}, (statuses, screen)
    proof.report(f"Qwen Code {QWEN[1]}", api.streams, capsys)
