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
from tests.support.web import WebServer, request, start_web

pytestmark = [pytest.mark.tmux]


def _frame(base: str, token: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{base}/api/board?token={token}", timeout=10) as resp:
        return json.loads(resp.read() or b"{}")


def _scene(tmux_server: TmuxServer, tmp_path: Path,
           daemon_factory: Any) -> tuple[dict[str, str], Path, Any, WebServer]:
    """Demo agents a and b, a gated route a->b (within 1d), ``baton run`` following a, and ``baton web``."""
    panes = {n: start_agent(tmux_server, tmp_path / f"{n}.jsonl", n, work_s=0.1) for n in ("a", "b")}
    config = write_config(tmp_path / "routes.yaml", tmux_server.socket,
                          {n: {"pane": p, "agent": "demo"} for n, p in panes.items()},
                          [{"name": "release", "from": "a", "to": "b", "gate": "person", "within": "1d"}])
    daemon = daemon_factory(config)
    daemon.start()
    wait_followed(daemon, "a")
    return panes, tmp_path / "b.jsonl", daemon, start_web("-c", str(config), tmp=tmp_path)


def test_the_page_gets_each_awaiting_prompt_whole_and_passes_an_edit_or_drops_it(
        tmux_server: TmuxServer, tmp_path: Path, daemon_factory) -> None:
    panes, blog, daemon, web = _scene(tmux_server, tmp_path, daemon_factory)
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


def test_the_page_shows_each_awaiting_prompt_to_edit_and_its_pass_and_drop_buttons(
        tmux_server: TmuxServer, tmp_path: Path, daemon_factory, browser: Any) -> None:
    """In a real Chromium: the whole prompt in a box (agent text as text), edited and passed; the next one
    dropped; each card leaves the page once decided, and a new frame never overwrites a box being edited."""
    panes, blog, daemon, web = _scene(tmux_server, tmp_path, daemon_factory)
    try:
        page = browser.new_page(viewport={"width": 390, "height": 844})
        errors: list[str] = []
        page.on("console", lambda m: errors.extend([m.text] if m.type == "error" else []))
        page.goto(web.url)
        hostile = "deploy <script>window.pwned = 1</script> now"
        tmux_server.type(panes["a"], hostile)
        page.locator("#awaiting li.gated").wait_for(timeout=20_000)
        key = page.locator("#awaiting li.gated").get_attribute("data-key")
        card = page.locator(f'#awaiting li[data-key="{key}"]')
        box = card.locator("textarea")
        assert box.input_value() == hostile
        assert "release: a → b" in (card.locator(".what").text_content() or "")
        assert "expires in 23h" in (card.locator(".when").text_content() or "")
        assert page.locator("#summary .awaiting").text_content() == "1 awaiting"
        box.fill("deploy it, edited on the page")
        tmux_server.type(panes["a"], "and this")  # a new frame while the box is being edited
        page.locator("#awaiting li.gated").nth(1).wait_for(timeout=20_000)
        assert box.input_value() == "deploy it, edited on the page"
        card.locator("button.pass").click()
        page.locator("#outcome.ok").filter(has_text="Pass release@").wait_for(timeout=20_000)
        wait_for(lambda: messages(blog) == ["deploy it, edited on the page"], what="the edit typed")
        card.wait_for(state="detached", timeout=20_000)
        assert page.locator("#awaiting li.gated").count() == 1
        page.locator("#awaiting li.gated button.drop").click()
        page.locator("#outcome.ok").filter(has_text="Drop release@").wait_for(timeout=20_000)
        page.locator("#awaiting-box").wait_for(state="hidden", timeout=20_000)
        assert page.evaluate("window.pwned") is None and errors == []
        page.close()
    finally:
        assert web.stop() == 0
    assert daemon.stop() == 0
    assert messages(blog) == ["deploy it, edited on the page"]
    rows = [r for r in json_lines(baton("history", "--json").out) if "kind" not in r]
    assert [(r["state"], r["gate"]["decision"], r["gate"]["decided_by"]) for r in rows] == [
        ("delivered", "passed", "web 127.0.0.1"), ("dropped", "dropped", "web 127.0.0.1")]
    assert rows[0]["gate"]["original"] == hostile
