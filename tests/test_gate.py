"""A person's gate (``gate: person`` on a route): the hand-off is journaled ``awaiting`` and waits — across
restarts — until ``baton pass`` (typed by the daemon's dispatcher, with its checks) or ``baton drop``; a
route's ``within:`` expires it; ``settings.notify`` tells the person once. Real ``baton run`` daemons, demo
agents on a real tmux server, a webhook the test owns on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pipeline.engine.gate_journal import decide, gates_of
from pipeline.engine.journal import MEMORY, Journal, default_journal_path
from pipeline.plugin.events import Prompt
from tests.fakes.webhook import WebhookReceiver
from tests.support.agents import messages, start_agent
from tests.support.cli import baton, json_lines, start_baton
from tests.support.daemons import Daemon, wait_followed, write_config
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

ASK = "allow? [y/n]"


def _rows() -> list[dict[str, Any]]:
    return [r for r in json_lines(baton("history", "--json").out) if "kind" not in r]


def _states() -> list[str]:
    return [h.state for h in Journal(default_journal_path()).history()]


def _agents(tmux_server: TmuxServer, tmp_path: Path, *names: str) -> dict[str, str]:
    return {name: start_agent(tmux_server, tmp_path / f"{name}.jsonl", name, work_s=0.1) for name in names}


def _config(tmux_server: TmuxServer, tmp_path: Path, panes: dict[str, str], routes: list[dict],
            **settings: object) -> Path:
    tiles = {name: {"pane": pane, "agent": "demo"} for name, pane in panes.items()}
    return write_config(tmp_path / "routes.yaml", tmux_server.socket, tiles, routes, **settings)


def _running(daemon_factory: Any, config: Path, *tiles: str) -> Daemon:
    """``baton run`` on ``config``, once it has followed ``tiles`` (before that, their turns are history)."""
    daemon = daemon_factory(config)
    daemon.start()
    for tile in tiles:
        wait_followed(daemon, tile)
    return daemon


def test_an_awaiting_hand_off_waits_across_a_restart_and_pass_types_it_once_when_its_tile_is_ready(
        tmux_server: TmuxServer, tmp_path: Path, daemon_factory) -> None:
    panes = _agents(tmux_server, tmp_path, "a", "b")
    blog = tmp_path / "b.jsonl"
    webhook = WebhookReceiver().start()
    try:
        config = _config(tmux_server, tmp_path, panes, [{"name": "release", "from": "a", "to": "b",
                                                         "gate": "person"}],
                         notify=[{"kind": "webhook", "url": f"{webhook.url}/hook"}])
        daemon = _running(daemon_factory, config, "a")
        tmux_server.type(panes["a"], "deploy it")
        wait_for(lambda: _states() == ["awaiting"], what="the hand-off awaiting a person")
        row = _rows()[0]
        key = row["key"]
        assert row["state"] == "awaiting" and row["prompt"] == "deploy it", row
        assert row["gate"]["decision"] is None and row["gate"]["decided_by"] is None, row
        wait_for(lambda: webhook.events("awaiting"), what="the awaiting notice")
        notice = webhook.events("awaiting")[0]
        assert notice["handoff"] == key and notice["tile"] == "b" and f"baton pass {key}" in notice["message"]
        assert "awaiting    " + key in daemon.stderr()
        status = baton("status", "-c", str(config)).out
        assert f"hand-off {key} -> b awaits a person since" in status, status
        assert f"baton pass {key}" in status
        # across a restart it still waits, and is not told again; the gate taken off the route in between
        # lets no hand-off that was awaiting go undecided
        assert daemon.stop() == 0
        _config(tmux_server, tmp_path, panes, [{"name": "release", "from": "a", "to": "b"}],
                notify=[{"kind": "webhook", "url": f"{webhook.url}/hook"}])
        daemon.start()
        wait_for(lambda: daemon.stderr().count("awaiting    " + key) == 2, what="the restart's look at it")
        assert _states() == ["awaiting"] and messages(blog) == []
        # b busy (asking a person): the pass is queued, not typed, until b is ready
        tmux_server.type(panes["b"], "NEEDS_APPROVAL: touch a file")
        wait_for(lambda: ASK in tmux_server.capture(panes["b"]), what="b asking")
        passed = baton("pass", key, "-c", str(config))
        assert passed.status == 0, passed.err
        assert passed.out.startswith(f"passed {key}: queued for b"), passed.out
        wait_for(lambda: f"hand-off {key} is kept and typed once it is free" in daemon.stderr(),
                 what="the dispatcher waiting for b")
        assert messages(blog) == ["NEEDS_APPROVAL: touch a file"]
        assert baton("approve", "b", "-c", str(config)).status == 0
        wait_for(lambda: _states() == ["delivered"], what="the passed hand-off delivered")
        assert messages(blog) == ["NEEDS_APPROVAL: touch a file", "deploy it"]
        # a second pass, or a drop, of a key no longer awaiting: exit 1, nothing changed
        baton("pass", key, "-c", str(config)).one_line_error(1, f"hand-off {key} is delivered, not awaiting")
        baton("drop", key, "-c", str(config)).one_line_error(1, f"hand-off {key} is delivered, not awaiting")
        assert daemon.stop() == 0
    finally:
        webhook.stop()
    assert messages(blog) == ["NEEDS_APPROVAL: touch a file", "deploy it"]
    assert len(webhook.events("awaiting")) == 1
    row = _rows()[0]
    assert row["state"] == "delivered" and row["prompt"] == "deploy it", row
    assert {k: row["gate"][k] for k in ("decision", "decided_by", "original")} == {
        "decision": "passed", "decided_by": "cli", "original": None}, row
    assert row["gate"]["notified"] is not None
    shown = json_lines(baton("history", "--json", "--refused").out)
    actions = [(r["route"], r["state"]) for r in shown if r.get("kind") == "action"]
    assert actions == [("pass", "done"), ("approve", "done"), ("pass", "refused"), ("drop", "refused")]


def test_pass_with_an_edited_prompt_drop_and_racing_passes_while_other_hand_offs_go_on(
        tmux_server: TmuxServer, tmp_path: Path, daemon_factory) -> None:
    panes = _agents(tmux_server, tmp_path, "a", "b", "c")
    blog = tmp_path / "b.jsonl"
    config = _config(tmux_server, tmp_path, panes, [
        {"name": "release", "from": "a", "to": "b", "gate": "person"},
        {"name": "cb", "from": "c", "to": "b"}])
    daemon = _running(daemon_factory, config, "a", "c")
    tmux_server.type(panes["a"], "one")
    wait_for(lambda: _states() == ["awaiting"], what="a's hand-off awaiting")
    first = _rows()[0]["key"]
    # another route to the same tile goes on meanwhile
    tmux_server.type(panes["c"], "c one")
    wait_for(lambda: messages(blog) == ["c one"], what="c's hand-off past the awaiting one")
    # passed with an edited prompt (from standard input): that is what is typed, and the journal keeps both
    passed = baton("pass", first, "--text", "-", "-c", str(config), input="one, but edited")
    assert passed.status == 0 and "(the edited prompt, 15 characters)" in passed.out, passed
    wait_for(lambda: messages(blog) == ["c one", "one, but edited"], what="the edited prompt typed")
    row = next(r for r in _rows() if r["key"] == first)
    assert row["prompt"] == "one, but edited" and row["gate"]["original"] == "one", row
    assert "passed by cli (the prompt edited)" in row["note"]
    # two passes racing for one hand-off: one wins, it is typed once
    tmux_server.type(panes["a"], "two")
    wait_for(lambda: [r["state"] for r in _rows()].count("awaiting") == 1, what="a's second hand-off")
    second = next(r["key"] for r in _rows() if r["state"] == "awaiting")
    both = [start_baton("pass", second, "-c", str(config), stderr=tmp_path / f"pass{i}.err") for i in (1, 2)]
    statuses = sorted(p.wait(timeout=60) for p in both)
    assert statuses == [0, 1], [(tmp_path / f"pass{i}.err").read_text() for i in (1, 2)]
    assert "not awaiting" in "".join((tmp_path / f"pass{i}.err").read_text() for i in (1, 2))
    wait_for(lambda: messages(blog) == ["c one", "one, but edited", "two"], what="the second typed once")
    # dropped: never typed; a pass after it is refused
    tmux_server.type(panes["a"], "three")
    wait_for(lambda: [r["state"] for r in _rows()].count("awaiting") == 1, what="a's third hand-off")
    third = next(r["key"] for r in _rows() if r["state"] == "awaiting")
    dropped = baton("drop", third, "-c", str(config))
    assert dropped.status == 0 and dropped.out.startswith(f"dropped {third}: nothing is typed"), dropped
    baton("pass", third, "-c", str(config)).one_line_error(1, f"hand-off {third} is dropped, not awaiting")
    baton("drop", third, "-c", str(config)).one_line_error(1, f"hand-off {third} is dropped, not awaiting")
    baton("pass", "nope@1", "-c", str(config)).one_line_error(1, "no hand-off 'nope@1'", "nothing changed")
    tmux_server.type(panes["c"], "c two")  # the queue still goes on past the dropped one
    wait_for(lambda: messages(blog)[-1:] == ["c two"], what="c's second hand-off")
    wait_for(lambda: "dropped     " + third in daemon.stderr(), what="the dropped one out of the queue")
    assert daemon.stop() == 0
    assert messages(blog) == ["c one", "one, but edited", "two", "c two"]
    row = next(r for r in _rows() if r["key"] == third)
    assert row["state"] == "dropped" and row["gate"]["decision"] == "dropped", row
    assert row["gate"]["decided_by"] == "cli"


def test_a_decision_is_made_once_and_forgotten_with_its_hand_off() -> None:
    journal = Journal(MEMORY)
    prompt = Prompt(route="release", source="a", target="b", text="ship", turn_id="t1", hop=1)
    assert journal.record_incoming(prompt, "from alpha", "awaiting")
    assert decide(journal, prompt.key, "dropped", "cli")
    assert not decide(journal, prompt.key, "passed", "web 127.0.0.1", "ship it")  # not awaiting any more
    record = journal.handoff(prompt.key)
    assert record is not None and (record.state, record.prompt) == ("dropped", "ship")
    assert gates_of(journal, [prompt.key])[prompt.key].decided_by == "cli"
    journal.prune(older_than_s=-1)
    assert journal.handoff(prompt.key) is None and gates_of(journal, [prompt.key]) == {}


def test_the_workflows_pages_gate_example_is_a_valid_routes_yaml(tmp_path: Path) -> None:
    page = (Path(__file__).parents[1] / "docs" / "workflows.md").read_text()
    section = page.split("## A gate before a risky agent", 1)[1].split("\n## ", 1)[0]
    routes = tmp_path / "routes.yaml"
    routes.write_text(section.split("```yaml\n", 1)[1].split("```", 1)[0])
    checked = json.loads(baton("check", "-c", str(routes), "--json").out)
    assert checked["ok"] and checked["problems"] == [], checked
    assert "gate: person" in section and "within: 2h" in section


def test_within_expires_an_awaiting_hand_off_and_a_pass_after_it_is_refused(
        tmux_server: TmuxServer, tmp_path: Path, daemon_factory) -> None:
    panes = _agents(tmux_server, tmp_path, "a", "b")
    blog = tmp_path / "b.jsonl"
    config = _config(tmux_server, tmp_path, panes, [
        {"name": "release", "from": "a", "to": "b", "gate": "person", "within": "1s"}])
    daemon = _running(daemon_factory, config, "a")
    tmux_server.type(panes["a"], "too late")
    wait_for(lambda: _states() == ["expired"], what="the hand-off expired")
    row = _rows()[0]
    assert row["gate"]["decision"] == "expired" and row["gate"]["decided_by"] == "within 1s", row
    baton("pass", row["key"], "-c", str(config)).one_line_error(1, "is expired, not awaiting")
    assert json_lines(baton("history", "--json", "--outcome", "expired").out)[0]["key"] == row["key"]
    assert daemon.stop() == 0
    assert messages(blog) == []
