"""The demo agent's states on the board, proven against its own log and its screen
(tests/support/state_proof.py): start → idle → working (a 3 s turn) → idle → its permission prompt →
``baton approve`` → working → idle → Esc → idle → a failed turn → idle, while the board is sampled every
~150 ms. The demo agent has no model: its log's ``work``/``end`` records are its model's log."""

from __future__ import annotations

from pathlib import Path

import pytest

from plugins.demo.agent import ASK, FAIL, PROMPT
from tests.fakes.loopback import StreamLog
from tests.support.agents import demo_agent_command, read_log
from tests.support.state_proof import Screen, StateProof
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow]


def last_line(screen: str) -> str:
    lines = [ln for ln in screen.rstrip().split("\n") if ln.strip()]
    return lines[-1] if lines else ""


DEMO_SCREEN = Screen(
    dialog=lambda s: last_line(s).rstrip().endswith(ASK),
    busy=lambda s: "(esc to interrupt)" in last_line(s),
    ready=lambda s: last_line(s).startswith(PROMPT.strip()),
)


def demo_streams(log: Path) -> list[StreamLog]:
    """The demo agent's turns as a model's log: from the ``work`` record to the ``end`` record."""
    out: list[StreamLog] = []
    for r in read_log(log):
        if r.get("event") == "work":
            out.append(StreamLog(received=r["t"], first_chunk=r["t"]))
        elif r.get("event") == "end" and out:
            out[-1].ended = r["t"]
    return out


def test_the_board_shows_the_demo_agents_states_truly_and_soon(
        tmux_server: TmuxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))  # where the demo agent keeps its transcript
    log = tmp_path / "demo.jsonl"
    pane = tmux_server.new_pane(env={"XDG_STATE_HOME": str(state)})
    routes = tmp_path / "routes.yaml"
    proof = StateProof("demo", tmux_server, pane, DEMO_SCREEN, routes)

    def prompt(text: str) -> None:
        proof.key("Enter")
        tmux_server.type(pane, text)

    with proof.running():
        proof.key("start")
        tmux_server.type(pane, demo_agent_command(log=log, work_s=3.0))
        proof.wait_screen("idle", hold_s=1.5)
        proof.answer_turn("Write the plan, slowly", prompt)
        proof.approval_turn("NEEDS_APPROVAL: touch the file", prompt)
        proof.interrupted_turn("A long answer to interrupt", prompt)
        proof.phase("failed")
        prompt(f"{FAIL}: the model answers 500")
        proof.wait_screen("working")
        proof.wait_screen("idle", hold_s=1.5)
    outcomes = [r["outcome"] for r in read_log(log) if r.get("event") == "end"]
    assert outcomes == ["completed", "completed", "failed", "failed"]
    verdict = proof.check(demo_streams(log))
    with capsys.disabled():
        print(f"\n{verdict.line()}")
    verdict.assert_true()
