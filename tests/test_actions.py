"""The actions people take from outside a pane (pipeline.engine.actions): ``baton approve``/``deny`` on real
panes running stand-ins of each agent (tests/fakes/agent_tui.py and the demo agent) that draw the agent's
permission prompt and log every key they get; hold, resume and retry against a real daemon and journal."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.engine.journal import Journal, default_journal_path
from tests.support.agents import demo_agent_command, messages, read_log, start_agent
from tests.support.cli import baton, json_lines, shell_ready, start_baton, write_routes
from tests.support.daemons import wait_followed, write_config
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


def test_hold_keeps_a_routes_hand_offs_queued_and_resume_delivers_them_once(
        tmux_server: TmuxServer, tmp_path: Path, daemon_factory) -> None:
    a, b = start_agent(tmux_server, tmp_path / "a.jsonl", "a", work_s=0.1), tmp_path / "b.jsonl"
    b_pane = start_agent(tmux_server, b, "b", work_s=0.1)
    config = write_config(tmp_path / "routes.yaml", tmux_server.socket,
                          {"a": {"pane": a, "agent": "demo"}, "b": {"pane": b_pane, "agent": "demo"}},
                          [{"name": "ab", "from": "a", "to": "b"}])
    daemon = daemon_factory(config)
    daemon.start()
    wait_followed(daemon, "a")
    held = baton("hold", "ab", "-c", str(config))
    assert held.status == 0 and "route ab held" in held.out, held
    baton("hold", "a->b", "-c", str(config)).one_line_error(1, "route ab is held already", "by cli")
    tmux_server.type(a, "one")
    wait_for(lambda: _states() == ["held"], what="the hand-off held")
    shown = json_lines(baton("history", "--json", "--outcome", "held").out)
    assert [h["prompt"] for h in shown] == ["one"] and "held by cli" in shown[0]["note"], shown
    assert messages(b) == []
    resumed = baton("resume", "ab", "-c", str(config))
    assert resumed.status == 0 and "route ab resumed" in resumed.out, resumed
    wait_for(lambda: _states() == ["delivered"], what="the hand-off delivered")
    assert messages(b) == ["one"]
    baton("resume", "ab", "-c", str(config)).one_line_error(1, "route ab is not held")
    tmux_server.type(a, "two")  # not held any more: it goes at once
    wait_for(lambda: _states() == ["delivered", "delivered"], what="the next hand-off delivered")
    assert daemon.stop() == 0
    assert messages(b) == ["one", "two"]
    actions = [r for r in json_lines(baton("history", "--json").out) if r.get("kind") == "action"]
    assert [(r["route"], r["state"], r["origin"]) for r in actions] == [
        ("hold", "done", "cli"), ("hold", "refused", "cli"), ("resume", "done", "cli"),
        ("resume", "refused", "cli")]
    table = baton("history").out
    assert "hold" in table and "ab from cli: route ab held" in table, table


def test_retry_types_a_failed_hand_off_again_once(tmux_server: TmuxServer, tmp_path: Path,
                                                  daemon_factory) -> None:
    a = start_agent(tmux_server, tmp_path / "a.jsonl", "a", work_s=0.1)
    b = shell_ready(tmux_server)  # no agent yet: the hand-off fails
    config = write_config(tmp_path / "routes.yaml", tmux_server.socket,
                          {"a": {"pane": a, "agent": "demo"}, "b": {"pane": b, "agent": "demo"}},
                          [{"from": "a", "to": "b"}], give_up_s=0.5)
    daemon = daemon_factory(config)
    daemon.start()
    wait_followed(daemon, "a")
    tmux_server.type(a, "again")
    wait_for(lambda: _states() == ["failed"], what="the hand-off failed")
    assert daemon.stop() == 0
    key = Journal(default_journal_path()).history()[0].key
    blog = tmp_path / "b.jsonl"
    tmux_server.type(b, "exec " + demo_agent_command("b", work_s=0.1, log=blog))
    wait_for(lambda: "demo❯" in tmux_server.capture(b), what="the demo agent in b's pane")
    both = [start_baton("retry", key, "-c", str(config), stderr=tmp_path / f"retry{i}.err") for i in (1, 2)]
    statuses = sorted(p.wait(timeout=60) for p in both)
    assert statuses == [0, 1], [(tmp_path / f"retry{i}.err").read_text() for i in (1, 2)]
    wait_for(lambda: messages(blog) == ["again"], what="the retried hand-off typed")
    assert _states() == ["delivered"]
    record = Journal(default_journal_path()).handoff(key)
    assert record is not None and record.attempts >= 1
    late = baton("retry", key, "-c", str(config))
    late.one_line_error(1, f"hand-off {key} is delivered, not failed")
    baton("retry", "nope@1", "-c", str(config)).one_line_error(1, "no hand-off 'nope@1'")
    assert messages(blog) == ["again"]


def _states() -> list[str]:
    return [h.state for h in Journal(default_journal_path()).history()]
