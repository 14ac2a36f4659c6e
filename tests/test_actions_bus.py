"""An action on a tile of another host goes over a real nats-server to that host's daemon, is done there
once, and its outcome comes back (pipeline.bus.actions). Two ``baton run --host`` daemons on this machine
stand in for two machines, as in tests/test_bus.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.agents import read_log
from tests.support.bus import settle, two_hosts
from tests.support.cli import baton
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
