"""The actions people take from outside a pane (pipeline.engine.actions): ``baton approve``/``deny`` on real
panes running stand-ins of each agent (tests/fakes/agent_tui.py and the demo agent) that draw the agent's
permission prompt and log every key they get; hold, resume and retry against a real daemon and journal."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.engine.journal import Journal, default_journal_path
from tests.support.agents import read_log
from tests.support.cli import baton, write_routes
from tests.support.polling import wait_for
from tests.support.standin_targets import TARGETS, StandinTarget
from tests.support.tmux import TmuxServer


def _asking(tmux_server: TmuxServer, tmp_path: Path, agent: str) -> tuple[StandinTarget, Path]:
    """A stand-in of ``agent`` in tile ``b``, showing its permission prompt."""
    standin = StandinTarget(tmux_server, tmp_path, agent, work_s=0.1)
    config = write_routes(tmp_path, tmux_server.socket, {"b": standin.tile})
    tmux_server.type(standin.pane, "NEEDS_APPROVAL: touch a file")
    asks = "allow? [y/n]" if agent == "demo" else ""
    wait_for(lambda: any(w in tmux_server.capture(standin.pane) for w in (
        asks or "Do you want to proceed?", "Would you like to run", "Permission required")),
        what=f"the {agent} stand-in asking")
    return standin, config


def _answers(standin: StandinTarget) -> list[str]:
    return [r.get("approval") or r.get("answer", "") for r in read_log(standin.log)
            if "approval" in r or r.get("event") == "approval" and r.get("answer")]


def _went_on(screen: str, agent: str) -> bool:
    """The agent answered the prompt's turn (the demo agent, an echo, repeats the prompt)."""
    return screen.count("NEEDS_APPROVAL: touch a file") == 2 if agent == "demo" else "answer to:" in screen


@pytest.mark.parametrize("agent", TARGETS)
@pytest.mark.parametrize("approve", [True, False], ids=["approve", "deny"])
def test_approve_and_deny_answer_each_agents_prompt_with_its_own_keys(
        agent: str, approve: bool, tmux_server: TmuxServer, tmp_path: Path) -> None:
    standin, config = _asking(tmux_server, tmp_path, agent)
    verb = "approve" if approve else "deny"
    done = baton(verb, "b", "-c", str(config), env=standin.env())
    assert done.status == 0, done.err
    assert "it left the screen" in done.out and "Traceback" not in done.err
    said = "approved" if approve else "denied"
    wait_for(lambda: _answers(standin) == [said], what=f"the stand-in {said}")
    wait_for(lambda: _went_on(tmux_server.capture(standin.pane), agent) == approve and (
        approve or "efused" in tmux_server.capture(standin.pane)), what=f"the agent after {verb}")
    # the second answer finds no prompt: nothing typed, and it says so
    again = baton(verb, "b", "-c", str(config), env=standin.env())
    again.one_line_error(1, "shows no permission prompt now", "nothing typed")
    keys = [r for r in read_log(standin.log) if "key" in r]
    assert len(_answers(standin)) == 1, keys
    rows = Journal(default_journal_path()).actions()
    assert [(r.kind, r.target, r.origin, r.outcome) for r in rows] == [
        (verb, "b", "cli", "done"), (verb, "b", "cli", "refused")]
