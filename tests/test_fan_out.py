"""Fan-out (``to: [b, c]``): one hand-off per target from the one source turn — its own journal row
(``route/target@turn``), its own readiness wait, its own ``max_per_hour``, ``match:`` and
``max_hops`` for each. Real ``baton run``, real tmux, the demo agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.engine.journal import Journal, default_journal_path
from tests.support.agents import messages, start_agent
from tests.support.cli import baton, json_lines
from tests.support.daemons import wait_followed, write_config
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow]


def rows() -> dict[str, tuple[str, str]]:
    """Each hand-off's key: (target, state)."""
    return {h.key: (h.target, h.state) for h in Journal(default_journal_path()).history()}


def three_agents(
    tmux_server: TmuxServer, tmp_path: Path, **work: float
) -> tuple[dict[str, str], dict[str, Path]]:
    logs = {name: tmp_path / f"{name}.jsonl" for name in ("coder", "security", "style")}
    panes = {name: start_agent(tmux_server, log, name, work_s=work.get(name, 0.1))
             for name, log in logs.items()}
    return panes, logs


def test_each_target_gets_its_own_hand_off_of_the_one_turn_once(
    tmux_server: TmuxServer, tmp_path: Path, daemon_factory
) -> None:
    # style works slowly: security's hand-off does not wait for it (each target has its own queue)
    panes, logs = three_agents(tmux_server, tmp_path, style=3.0)
    config = write_config(
        tmp_path / "routes.yaml", tmux_server.socket,
        {name: {"pane": pane, "agent": "demo"} for name, pane in panes.items()},
        [{"name": "review", "from": "coder", "to": ["security", "style"],
          "transform": {"type": "template", "template": "{target}, review: {response}"}}],
        max_hops=1,
    )
    daemon = daemon_factory(config)
    daemon.start()
    wait_followed(daemon, "coder")
    tmux_server.type(panes["style"], "busy with something else")  # style is working when the fan-out comes
    tmux_server.type(panes["coder"], "the change")
    wait_for(lambda: messages(logs["security"]) == ["security, review: the change"], what="security's")
    assert messages(logs["style"]) == ["busy with something else"]  # not typed into a busy agent
    wait_for(lambda: messages(logs["style"]) == ["busy with something else", "style, review: the change"],
             what="style's, once it is free", timeout=30)
    found = rows()
    turn = next(k for k in found if k.startswith("review/security@")).split("@", 1)[1]
    assert found == {f"review/security@{turn}": ("security", "delivered"),
                     f"review/style@{turn}": ("style", "delivered")}
    history = json_lines(baton("history", "--json", "--route", "review").out)
    assert sorted(h["key"] for h in history) == sorted(found)
    assert daemon.stop() == 0
    daemon.start()  # a restart types nothing again
    wait_followed(daemon, "coder")
    assert daemon.stop() == 0
    assert messages(logs["security"]) == ["security, review: the change"]
    assert messages(logs["style"]) == ["busy with something else", "style, review: the change"]


def test_max_per_hour_is_per_target_and_match_decides_for_each(
    tmux_server: TmuxServer, tmp_path: Path, daemon_factory
) -> None:
    panes, logs = three_agents(tmux_server, tmp_path)
    config = write_config(
        tmp_path / "routes.yaml", tmux_server.socket,
        {name: {"pane": pane, "agent": "demo"} for name, pane in panes.items()},
        [{"name": "review", "from": "coder", "to": ["security", "style"], "max_per_hour": 1,
          "match": "please"}],
        max_hops=1,
    )
    daemon = daemon_factory(config)
    daemon.start()
    wait_followed(daemon, "coder")
    tmux_server.type(panes["coder"], "one please")
    # a limit of 1 an hour for the route is 1 for each target: the fan-out's two hand-offs both go
    wait_for(lambda: [messages(logs["security"]), messages(logs["style"])] == [["one please"]] * 2,
             what="both targets' first hand-off")
    tmux_server.type(panes["coder"], "no match here")
    wait_for(lambda: sorted(s for _, s in rows().values()).count("skipped") == 2, what="both skipped")
    tmux_server.type(panes["coder"], "two please")
    wait_for(lambda: sorted(s for _, s in rows().values()).count("held") == 2, what="both held by the hour")
    assert messages(logs["security"]) == ["one please"] and messages(logs["style"]) == ["one please"]
    assert daemon.stop() == 0
    skipped = [h for h in json_lines(baton("history", "--json", "--outcome", "skipped").out)]
    assert {h["target"] for h in skipped} == {"security", "style"}
    assert all(h["note"] == "the answer does not match 'please'" for h in skipped)
