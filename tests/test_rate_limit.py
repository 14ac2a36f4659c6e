"""``max_per_hour``: a route that already typed its hour's hand-offs holds the next one — kept in the journal
(``held``), logged once, still held after a restart, and typed once the hour allows it. Real ``baton run``,
real tmux, the demo agent."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from pipeline.engine.journal import Journal, default_journal_path
from tests.support.agents import messages, start_agent
from tests.support.cli import baton, json_lines
from tests.support.daemons import wait_followed, write_config
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow]


def states() -> list[tuple[str, str]]:
    return [(h.turn_id, h.state) for h in Journal(default_journal_path()).history()]


def test_a_route_over_max_per_hour_holds_the_hand_off_and_types_it_when_the_hour_allows(
    tmux_server: TmuxServer, tmp_path: Path, daemon_factory
) -> None:
    alog, blog = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a, b = start_agent(tmux_server, alog, "a", work_s=0.1), start_agent(tmux_server, blog, "b", work_s=0.1)
    config = write_config(
        tmp_path / "routes.yaml",
        tmux_server.socket,
        {"a": {"pane": a, "agent": "demo"}, "b": {"pane": b, "agent": "demo"}},
        [{"from": "a", "to": "b", "max_per_hour": 1}],
    )
    check = baton("check", "-c", str(config))
    assert check.status == 0 and "a->b at most 1 an hour" in check.out, check
    limits = json.loads(baton("check", "-c", str(config), "--json").out)["limits"]
    assert limits == {"max_hops": 6, "max_per_hour": {"a->b": 1}}

    daemon = daemon_factory(config)
    daemon.start()
    wait_followed(daemon, "a")
    tmux_server.type(a, "one")
    wait_for(lambda: messages(blog) == ["one"], what="the first hand-off")
    tmux_server.type(a, "two")
    wait_for(lambda: [s for _, s in states()] == ["delivered", "held"], what="the second hand-off held")
    held = json_lines(baton("history", "--json", "--outcome", "held").out)
    assert [h["prompt"] for h in held] == ["two"]
    assert "held by max_per_hour=1: route a->b typed 1 hand-off in the last hour" in held[0]["note"]
    assert daemon.stop() == 0
    assert messages(blog) == ["one"]  # not typed
    assert daemon.stderr().count("held        a->b@") == 1, daemon.stderr()  # logged once

    daemon.start()  # kept across a restart: still held, the hour is not over
    wait_for(lambda: daemon.stderr().count("held        a->b@") == 2, what="held again after the restart")
    assert daemon.stop() == 0
    assert messages(blog) == ["one"]

    hour_ago = time.time() - 3601  # the first hand-off's hour is over
    Journal(default_journal_path()).db.execute("UPDATE handoffs SET updated=? WHERE state='delivered'",
                                               (hour_ago,))
    daemon.start()
    wait_for(lambda: messages(blog) == ["one", "two"], what="the held hand-off typed")
    wait_for(lambda: [s for _, s in states()] == ["delivered", "delivered"], what="both delivered")
    assert daemon.stop() == 0
    assert "max_per_hour=1" in Journal(default_journal_path()).history()[-1].note  # why it waited
