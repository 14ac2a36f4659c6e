"""``baton web``'s side of a person's gate: the frame carries each awaiting hand-off with its full prompt,
and ``POST /api/action`` passes (with the prompt as edited on the page) or drops it, journaled as from the
web; the daemon types what was passed. A real ``baton run`` and ``baton web``, demo agents on a real tmux
server, plain HTTP."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from pipeline.engine.journal import Journal, default_journal_path
from tests.support.agents import messages, start_agent
from tests.support.cli import baton, json_lines
from tests.support.daemons import wait_followed, write_config
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer
from tests.support.web import request, start_web

pytestmark = [pytest.mark.tmux]


def _frame(base: str, token: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{base}/api/board?token={token}", timeout=10) as resp:
        return json.loads(resp.read() or b"{}")


def test_the_page_gets_each_awaiting_prompt_whole_and_passes_an_edit_or_drops_it(
        tmux_server: TmuxServer, tmp_path: Path, daemon_factory) -> None:
    panes = {n: start_agent(tmux_server, tmp_path / f"{n}.jsonl", n, work_s=0.1) for n in ("a", "b")}
    blog = tmp_path / "b.jsonl"
    config = write_config(tmp_path / "routes.yaml", tmux_server.socket,
                          {n: {"pane": p, "agent": "demo"} for n, p in panes.items()},
                          [{"name": "release", "from": "a", "to": "b", "gate": "person", "within": "1d"}])
    daemon = daemon_factory(config)
    daemon.start()
    wait_followed(daemon, "a")
    web = start_web("-c", str(config), tmp=tmp_path)
    try:
        long = "deploy " + "x" * 3000  # the whole prompt, not a preview
        tmux_server.type(panes["a"], long)
        shown = wait_for(lambda: _frame(web.base, web.token).get("awaiting"), 20, what="the awaiting prompt")
        [item] = shown
        assert item["prompt"] == long and item["target"] == "b" and item["route"] == "release", item
        assert item["expires"] == pytest.approx(item["created"] + 86400)
        mine = {"X-Baton-Token": web.token}
        bad = request(f"{web.base}/api/action", method="POST", headers=mine,
                      body={"kind": "pass", "target": item["key"], "text": 7})
        assert bad[0] == 400 and b"edited prompt" in bad[2], bad
        status, _, body = request(f"{web.base}/api/action", method="POST", headers=mine,
                                  body={"kind": "pass", "target": item["key"], "text": "deploy, edited"})
        answer = json.loads(body)
        assert status == 200 and answer["ok"] and "queued for b" in answer["message"], answer
        wait_for(lambda: messages(blog) == ["deploy, edited"], what="the edited prompt typed")
        wait_for(lambda: _frame(web.base, web.token).get("awaiting") == [], 20, what="off the page")
        tmux_server.type(panes["a"], "and this")
        [second] = wait_for(lambda: _frame(web.base, web.token).get("awaiting"), 20, what="the next one")
        status, _, body = request(f"{web.base}/api/action", method="POST", headers=mine,
                                  body={"kind": "drop", "target": second["key"]})
        assert status == 200 and json.loads(body)["ok"], body
        status, _, body = request(f"{web.base}/api/action", method="POST", headers=mine,
                                  body={"kind": "drop", "target": second["key"]})
        assert status == 200 and not json.loads(body)["ok"] and "not awaiting" in json.loads(body)["message"]
    finally:
        assert web.stop() == 0
    assert daemon.stop() == 0
    assert messages(blog) == ["deploy, edited"]
    actions = Journal(default_journal_path()).actions()
    assert [(r.kind, r.outcome) for r in actions] == [("pass", "done"), ("drop", "done"), ("drop", "refused")]
    assert {r.origin for r in actions} == {"web 127.0.0.1"}
    rows = {r["key"]: r for r in json_lines(baton("history", "--json").out) if "kind" not in r}
    assert rows[item["key"]]["gate"]["decided_by"] == "web 127.0.0.1"
    assert rows[item["key"]]["gate"]["original"] == long
    assert rows[second["key"]]["state"] == "dropped"
