"""The real pi's states on the board, proven against the fake OpenAI chat server's log and its screen
(tests/support/state_proof.py): its project-trust dialog at start (``baton approve`` trusts the folder for
this session) → idle → working (a slowly streamed answer) → idle → a tool turn (pi asks nothing before a
tool: its trust dialog is its only dialog) → idle → Esc → idle → a turn the API answers ``503 overloaded``
(after pi's one retry) → idle, the board sampled every ~150 ms."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from plugins.pi.screen import input_draft
from tests.agent_versions import resolve
from tests.fakes.npm_agents import node_22
from tests.fakes.openai_chat import OVERLOADED, FakeChat
from tests.support.pi import make_pi_home
from tests.support.real_cli import installed, npm_package
from tests.support.state_proof import Screen, StateProof
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow]

PI = resolve("pi")  # pinned, or npm latest with BATON_AGENTS=latest

PI_SCREEN = Screen(
    dialog=lambda s: "Trust project folder?" in s,
    busy=lambda s: any(word in s for word in (" Working", " Retrying (")),
    ready=lambda s: input_draft(s) == "",
)


@pytest.fixture(scope="module")
def node() -> Path:
    return installed("Node 22", node_22)


@pytest.fixture(scope="module")
def pi_bin(node: Path) -> Path:
    return npm_package(PI, node=node)


@pytest.fixture
def api() -> Iterator[FakeChat]:
    with FakeChat() as fake:
        yield fake


def test_the_board_shows_pis_states_truly_and_soon(
        tmux_server: TmuxServer, tmp_path: Path, pi_bin: Path, node: Path, api: FakeChat,
        capsys: pytest.CaptureFixture[str]) -> None:
    pi = make_pi_home(tmp_path, api_url=api.url, pi_bin=pi_bin, node=node, trust_dialog=True)
    settings = json.loads((pi.agent / "settings.json").read_text())
    settings["retry"] = {"maxRetries": 1, "baseDelayMs": 2000}  # an overloaded API: one retry, not three
    (pi.agent / "settings.json").write_text(json.dumps(settings))
    pane = tmux_server.new_pane(pi.shell_command(), cwd=pi.project, width=120, height=40)
    proof = StateProof("pi", tmux_server, pane, PI_SCREEN, tmp_path / "routes.yaml")

    prompt = proof.prompt  # a person's pause before Enter

    with proof.running():
        proof.key("pi")
        tmux_server.type(pane, "pi")
        proof.wait_screen("waiting", hold_s=1.5)
        proof.phase("trusted")
        proof.approve()
        proof.wait_screen("idle", hold_s=1.5)
        proof.answer_turn("SLOWTEST: write the plan", prompt)
        proof.phase("tool")
        prompt("TOOLASK: create approved.txt, then SLOWTEST: say so slowly")  # pi runs it without asking
        proof.wait_screen("working")
        proof.wait_screen("idle", hold_s=1.5)
        proof.interrupted_turn("SLOWTEST: a long answer to interrupt", prompt)
        proof.phase("failed")
        prompt(f"{OVERLOADED}: the API is overloaded")
        proof.wait_screen("working")
        proof.wait_screen("idle", hold_s=3.0)  # long enough to see a failed turn read as still open
        screen = tmux_server.capture(pane)
    assert (pi.project / "approved.txt").exists()
    assert not (pi.agent / "trust.json").exists()  # trusted for this session only
    statuses = [s.status for s in api.streams if s.status != 200]
    assert statuses[0] == 499 and set(statuses[1:]) == {503}, (statuses, screen)
    proof.report(f"pi {PI[1]}", api.streams, capsys)
