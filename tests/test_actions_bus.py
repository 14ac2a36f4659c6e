"""An action on a tile of another host goes over a real nats-server to that host's daemon, is done there
once, and its outcome comes back (pipeline.bus.actions). Two ``baton run --host`` daemons on this machine
stand in for two machines, as in tests/test_bus.py."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import orjson
import pytest

from pipeline.bus.actions import STALE_S, outcome_subject
from pipeline.bus.link import BusLink
from pipeline.engine.config import Config, load_config
from tests.support.agents import demo_agent_command, messages, read_log
from tests.support.bus import settle, two_hosts, write_routes
from tests.support.cli import baton, shell_ready
from tests.support.polling import wait_for

pytestmark = [pytest.mark.tmux, pytest.mark.slow]


def test_an_approve_for_a_tile_of_another_host_is_done_there_once_and_its_outcome_comes_back(
        tmp_path: Path, hosts) -> None:
    alpha, beta, _, blog = two_hosts(tmp_path, hosts)
    alpha.start()
    beta.start()
    alpha.wait_running("a")
    beta.wait_running("b")
    beta.type("b", "NEEDS_APPROVAL: touch a file")
    wait_for(lambda: "allow? [y/n]" in beta.tmux.capture(beta.panes["b"]), what="b asking on beta")
    env = {"XDG_STATE_HOME": str(alpha.state), "BATON_BUS_URL": alpha.bus_url}
    done = baton("approve", "b", "-c", str(alpha.config), env=env)
    assert done.status == 0, done.err
    assert done.out.startswith("on host beta: approved the permission prompt of tile b"), done.out
    approvals = [r for r in read_log(blog) if r.get("event") == "approval"]
    assert [r["answer"] for r in approvals] == ["approved"]
    again = baton("approve", "b", "-c", str(alpha.config), env=env)
    again.one_line_error(1, "on host beta: tile b", "shows no permission prompt now")
    settle()
    assert alpha.stop() == 0 and beta.stop() == 0
    there = beta.journal().actions()
    assert [(r.kind, r.outcome, r.origin) for r in there] == [
        ("approve", "done", f"bus {os.uname().nodename} (cli)"),
        ("approve", "refused", f"bus {os.uname().nodename} (cli)")]
    here = alpha.journal().actions()
    assert [(r.id, r.outcome) for r in here] == [(r.id, r.outcome) for r in there]
    assert [r["answer"] for r in read_log(blog) if r.get("event") == "approval"] == ["approved"]


def test_the_same_action_arriving_again_is_answered_from_the_journal_not_done_twice(
        tmp_path: Path, hosts, monkeypatch: pytest.MonkeyPatch) -> None:
    """A redelivery (a lost acknowledgement, a daemon restarted before it acknowledged) carries the same
    action id under another message: the daemon answers with the outcome it journaled and types nothing."""
    alpha, beta, _, blog = two_hosts(tmp_path, hosts)
    beta.start()
    beta.wait_running("b")
    beta.type("b", "NEEDS_APPROVAL: touch a file")
    wait_for(lambda: "allow? [y/n]" in beta.tmux.capture(beta.panes["b"]), what="b asking on beta")
    monkeypatch.setenv("BATON_BUS_URL", alpha.bus_url)
    config = load_config(alpha.config)[0]
    body = {"v": 1, "id": "a1b2c3", "source_host": "alpha", "sent": time.time(),
            "action": {"kind": "approve", "target": "b", "text": None, "origin": "cli"}}
    first = anyio.run(_publish, config, body, "first")
    again = anyio.run(_publish, config, body, "redelivered")
    assert first["ok"] and "approved the permission prompt of tile b" in first["message"], first
    assert again == first
    stale = {**body, "id": "d4e5f6", "sent": time.time() - STALE_S - 60}
    late = anyio.run(_publish, config, stale, "late")
    assert not late["ok"] and "after it was sent" in late["message"] and "nothing typed" in late["message"]
    assert beta.stop() == 0
    assert [r["answer"] for r in read_log(blog) if r.get("event") == "approval"] == ["approved"]
    outcomes = [(r.id, r.outcome) for r in beta.journal().actions()]
    assert outcomes == [("a1b2c3", "done"), ("d4e5f6", "refused")]


def test_hold_and_resume_of_a_route_into_another_host_are_done_by_that_hosts_daemon(
        tmp_path: Path, hosts) -> None:
    alpha, beta, _, blog = two_hosts(tmp_path, hosts)
    alpha.start()
    beta.start()
    alpha.wait_running("a")
    beta.wait_running("b")
    env = {"XDG_STATE_HOME": str(alpha.state), "BATON_BUS_URL": alpha.bus_url}
    held = baton("hold", "a->b", "-c", str(alpha.config), env=env)
    assert held.status == 0 and held.out.startswith("on host beta: route a->b held"), held
    alpha.type("a", "one")
    wait_for(lambda: [h.state for h in beta.history()] == ["held"], timeout=30, what="held on beta")
    assert messages(blog) == []
    resumed = baton("resume", "a->b", "-c", str(alpha.config), env=env)
    assert resumed.status == 0 and "route a->b resumed" in resumed.out, resumed
    wait_for(lambda: messages(blog) == ["from a: one"], timeout=30, what="the hand-off typed on beta")
    settle()
    assert alpha.stop() == 0 and beta.stop() == 0
    assert messages(blog) == ["from a: one"]
    assert [(r.kind, r.outcome) for r in beta.journal().actions()] == [("hold", "done"), ("resume", "done")]


def test_a_retry_of_a_hand_off_that_failed_on_another_host_is_done_by_that_hosts_daemon(
        tmp_path: Path, hosts) -> None:
    """a->b went from alpha to beta (``published`` on alpha) and failed on beta (b's pane held a bare
    shell); ``baton retry KEY`` on alpha goes to beta, whose journal holds the failure, and is typed there
    once — alpha's journal is not where that hand-off can be retried."""
    tiles = {"a": {"pane": "title:a", "agent": "demo", "host": "alpha"},
             "b": {"pane": "title:b", "agent": "demo", "host": "beta"}}
    config = write_routes(tmp_path / "routes.yaml", tiles, [{"from": "a", "to": "b"}], give_up_s=0.5)
    alpha, beta = hosts("alpha", config), hosts("beta", config)
    alpha.agent("a")
    b = shell_ready(beta.tmux)  # no agent in b yet: the hand-off fails there
    beta.tmux.run("select-pane", "-t", b, "-T", "b")
    alpha.start()
    beta.start()
    alpha.wait_running("a")
    beta.wait_running()
    alpha.type("a", "again")
    wait_for(lambda: [h.state for h in beta.history()] == ["failed"], timeout=30, what="failed on beta")
    key = beta.history()[0].key
    assert [(h.key, h.state) for h in alpha.history()] == [(key, "published")]
    blog = tmp_path / "b.jsonl"
    beta.tmux.type(b, "exec " + demo_agent_command("b", work_s=0.1, log=blog))
    wait_for(lambda: "demo❯" in beta.tmux.capture(b), what="the demo agent in b's pane")
    env = {"XDG_STATE_HOME": str(alpha.state), "BATON_BUS_URL": alpha.bus_url}
    done = baton("retry", key, "-c", str(config), env=env)
    assert done.status == 0 and done.out.startswith(f"on host beta: retry of {key}: sent"), done
    wait_for(lambda: messages(blog) == ["again"], what="the retried hand-off typed on beta")
    again = baton("retry", key, "-c", str(config), env=env)
    again.one_line_error(1, f"on host beta: hand-off {key} is", "not failed")
    settle()
    assert alpha.stop() == 0 and beta.stop() == 0
    assert messages(blog) == ["again"]
    outcomes = [(r.kind, r.outcome) for r in beta.journal().actions()]
    assert outcomes == [("retry", "done"), ("retry", "refused")], outcomes
    assert [h.state for h in alpha.history()] == ["published"]


async def _publish(config: Config, body: dict, msg_id: str) -> dict:
    """Publish an action message as pipeline.bus.actions does, under ``msg_id``; its outcome."""
    link = BusLink(config.settings.bus, quiet=True)
    await link.connect()
    try:
        sub = await link.nc.subscribe(outcome_subject(body["id"]))
        await link.js.publish(link.subject("beta", "b"), orjson.dumps(body), headers={"Nats-Msg-Id": msg_id})
        return orjson.loads((await sub.next_msg(timeout=30)).data)
    finally:
        await link.close()
