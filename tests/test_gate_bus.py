"""A gated hand-off to another host's tile awaits on that host (its daemon types it) and is passed or dropped
from any host's CLI, over a real nats-server, once. Two ``baton run --host`` daemons on this machine stand
in for two machines, as in tests/test_actions_bus.py; a third state folder with no daemon stands in for a
host that never saw the hand-off."""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.support.agents import messages
from tests.support.bus import settle, two_hosts
from tests.support.cli import baton
from tests.support.polling import wait_for
from tests.support.web import WebServer, request, start_web

pytestmark = [pytest.mark.tmux, pytest.mark.slow]


def _awaiting(web: WebServer) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{web.base}/api/board?token={web.token}", timeout=10) as resp:
        return list(json.loads(resp.read() or b"{}").get("awaiting") or [])


def test_a_gated_hand_off_to_another_hosts_tile_is_passed_or_dropped_from_any_host_once(
        tmp_path: Path, hosts) -> None:
    alpha, beta, _, blog = two_hosts(tmp_path, hosts, route={"name": "release", "gate": "person"})
    config = alpha.config
    alpha.start()
    beta.start()
    alpha.wait_running("a")
    beta.wait_running("b")
    alpha.type("a", "ship it")
    wait_for(lambda: [h.state for h in beta.history()] == ["awaiting"], timeout=30, what="awaiting on beta")
    key = beta.history()[0].key
    # alpha writes `published` once the bus acknowledged it, which may come after beta took it
    wait_for(lambda: [(h.key, h.state) for h in alpha.history()] == [(key, "published")], timeout=30,
             what="published on alpha")
    # passed from a host whose journal never saw it: the key says where its route goes
    gamma = {"XDG_STATE_HOME": str(tmp_path / "gamma"), "BATON_BUS_URL": alpha.bus_url}
    passed = baton("pass", key, "-c", str(config), env=gamma)
    assert passed.status == 0 and passed.out.startswith(f"on host beta: passed {key}: queued for b"), passed
    wait_for(lambda: messages(blog) == ["from a: ship it"], timeout=30, what="typed on beta")
    # again from alpha, where it is published: refused on beta, nothing typed
    on_alpha = {"XDG_STATE_HOME": str(alpha.state), "BATON_BUS_URL": alpha.bus_url}
    again = baton("pass", key, "-c", str(config), env=on_alpha)
    again.one_line_error(1, f"on host beta: hand-off {key} is", "not awaiting")
    # the next one dropped from alpha
    alpha.type("a", "and this")
    wait_for(lambda: [h.state for h in beta.history()].count("awaiting") == 1, timeout=30,
             what="the second awaiting on beta")
    second = next(h.key for h in beta.history() if h.state == "awaiting")
    dropped = baton("drop", second, "-c", str(config), env=on_alpha)
    assert dropped.status == 0 and dropped.out.startswith(f"on host beta: dropped {second}"), dropped
    wait_for(lambda: "dropped     " + second in beta.stderr(), timeout=30, what="out of beta's queue")
    # the next one passed from a page on a third host: listed from the bus (its prompt stays on beta)
    web = start_web("-c", str(config), tmp=tmp_path, env=gamma)
    try:
        alpha.type("a", "from the page")
        # the bus's board is a few seconds behind: the one just dropped may still be listed a moment
        listed = wait_for(lambda: [i for i in _awaiting(web) if i["key"] not in (key, second)], timeout=30,
                          what="beta's awaiting hand-off on the page")
        [item] = listed
        assert item["host"] == "beta" and item["prompt"] is None and item["target"] == "b", item
        mine = {"X-Baton-Token": web.token}
        status, _, body = request(f"{web.base}/api/action", method="POST", headers=mine,
                                  body={"kind": "pass", "target": item["key"]})
        answer = json.loads(body)
        assert status == 200 and answer["ok"], answer
        assert answer["message"].startswith(f"on host beta: passed {item['key']}"), answer
        wait_for(lambda: messages(blog) == ["from a: ship it", "from a: from the page"], timeout=30,
                 what="the page's pass typed on beta")
    finally:
        assert web.stop() == 0
    settle()
    assert alpha.stop() == 0 and beta.stop() == 0
    assert messages(blog) == ["from a: ship it", "from a: from the page"]
    assert {h.key: h.state for h in beta.history()} == {key: "delivered", second: "dropped",
                                                         item["key"]: "delivered"}
    here = os.uname().nodename
    assert [(r.kind, r.outcome, r.origin) for r in beta.journal().actions()] == [
        ("pass", "done", f"bus {here} (cli)"), ("pass", "refused", f"bus {here} (cli)"),
        ("drop", "done", f"bus {here} (cli)"), ("pass", "done", f"bus {here} (web 127.0.0.1)")]
