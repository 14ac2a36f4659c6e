"""``baton web``: the real command over real tmux panes, asked over plain HTTP and looked at in a headless
Chromium (Debian's, driven by Playwright).

The Claude tile is a pane whose process is named claude (tests.support.claude.Scene): the test writes its
session file (busy, waiting on a permission prompt) and its transcript (an answer holding HTML), and the
page must follow — within a generous timeout, never a wall-clock assertion (bench/bench_web.py measures).
"""

from __future__ import annotations

import json
import stat
import threading
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest

from pipeline.bus.link import subject_token
from pipeline.engine.hosts import local_host
from pipeline.engine.journal import Journal, default_journal_path
from pipeline.plugin.events import Completion, Prompt
from tests.support.agents import read_log
from tests.support.bus import NatsServer
from tests.support.claude import Scene
from tests.support.cli import baton, write_routes
from tests.support.polling import wait_for
from tests.support.standin_targets import StandinTarget
from tests.support.tmux import TmuxServer
from tests.support.web import WebServer, request, start_web
from tests.support.web_board import HOSTILE, board, colour, tile


def _web(tmux_server: TmuxServer, tmp_path: Path, config: Path, scene: Scene | None = None) -> WebServer:
    env = {"CLAUDE_CONFIG_DIR": str(scene.config)} if scene else {}
    return start_web("-c", str(config), tmp=tmp_path, env=env)


@pytest.mark.tmux
def test_the_token_guards_page_stream_and_actions_and_other_sites_are_refused(
    tmux_server: TmuxServer, tmp_path: Path, private_state: Path
) -> None:
    shell = {"pane": tmux_server.new_pane(), "agent": "shell"}
    config = write_routes(tmp_path, tmux_server.socket, {"a": shell})
    web = _web(tmux_server, tmp_path, config)
    try:
        base, token = web.base, web.token
        assert web.url.startswith("http://127.0.0.1:")
        for url in (f"{base}/", f"{base}/?token=wrong", f"{base}/api/events", f"{base}/api/board?token="):
            assert request(url)[0] == 401, url
        status, head, body = request(f"{base}/?token={token}")
        assert status == 200 and b'<script src="/static/board.js"' in body and b"<script>" not in body
        csp = head["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
        assert head["x-content-type-options"] == "nosniff" and head["referrer-policy"] == "no-referrer"
        assert "set-cookie" not in head
        status, head, body = request(f"{base}/api/events?token={token}")
        assert status == 200 and head["content-type"].startswith("text/event-stream")
        act = {"kind": "hold", "target": "a->a"}
        # the token in the URL, or no token: not enough for an action
        assert request(f"{base}/api/action?token={token}", method="POST", body=act)[0] == 401
        assert request(f"{base}/api/action", method="POST", body=act,
                       headers={"X-Baton-Token": "nope"})[0] == 401
        # another site, even holding the token (or a page served under another name: DNS rebinding)
        mine = {"X-Baton-Token": token}
        assert request(f"{base}/api/action", method="POST", body=act,
                       headers={**mine, "Origin": "http://evil.example"})[0] == 403
        assert request(f"{base}/api/action", method="POST", body=act,
                       headers={**mine, "Sec-Fetch-Site": "cross-site"})[0] == 403
        assert request(f"{base}/?token={token}", headers={"Host": "evil.example"})[0] == 403
        assert request(f"{base}/api/action", method="POST", body={"kind": "rm -rf", "target": "a"},
                       headers=mine)[0] == 400
    finally:
        assert web.stop() == 0
    assert "Traceback" not in web.err.read_text()
    token_file = private_state / "batonpass" / "web-token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600 and token_file.read_text().strip() == token
    # the same token next time (a bookmark keeps working); --public says to put TLS in front
    again = start_web("-c", str(config), tmp=tmp_path, options=("--public",))
    try:
        assert again.token == token
        wait_for(lambda: "TLS" in again.out.read_text(), what="the word about TLS")
    finally:
        assert again.stop() == 0
    refused = baton("-c", str(config), "web", "--host", "0.0.0.0")
    refused.one_line_error(2, "--public", "TLS")


@pytest.mark.tmux
def test_the_page_follows_the_tiles_and_shows_agent_text_as_text(
    tmux_server: TmuxServer, tmp_path: Path, browser: Any
) -> None:
    scene, config = board(tmux_server, tmp_path)
    web = _web(tmux_server, tmp_path, config, scene)
    try:
        page = browser.new_page(viewport={"width": 390, "height": 844})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(web.url)
        for name, kind in (("coder", "idle"), ("reviewer", "idle"), ("ghost", "gone")):
            tile(page, name).and_(page.locator(f'[data-kind="{kind}"]')).wait_for(timeout=20_000)
        answer = tile(page, "coder").locator(".answer")
        answer.filter(has_text="<script>").wait_for(timeout=20_000)
        assert answer.text_content() == HOSTILE
        assert page.evaluate("window.pwned") is None  # nothing ran
        assert page.locator("main script, main img, main a, main iframe").count() == 0
        # a page's CSP forbids eval: Playwright waits with locators, not wait_for_function
        tile(page, "coder").locator(".usage").filter(has_text="1.5k tokens · $0.01").wait_for(timeout=20_000)
        assert tile(page, "coder").locator(".ask").is_hidden()
        assert page.locator("#routes li").all_text_contents()[1].startswith("back (reviewer → coder)")

        for status, kind in (("busy", "working"), ("waiting", "waiting"), ("idle", "idle")):
            scene.status(status, **({"waitingFor": "permission prompt"} if status == "waiting" else {}))
            tile(page, "coder").and_(page.locator(f'[data-kind="{kind}"]')).wait_for(timeout=10_000)
            if kind == "waiting":
                assert tile(page, "coder").locator(".state").text_content() == "waiting: permission prompt"
                assert tile(page, "coder").locator(".ask button").all_text_contents() == ["Approve", "Deny"]
                shot = tmp_path / "web-board-390x844.png"
                page.screenshot(path=str(shot), full_page=True)
                print(f"screenshot at phone width: {shot}")
        assert page.evaluate("window.pwned") is None and errors == []

        # a hand-off that failed: listed with a Retry button, whose outcome the page shows
        journal = Journal()
        completion = Completion(tile="coder", turn_id="claude:s:k1")
        journal.record_completion(completion)
        prompt = Prompt(route="coder->reviewer", source="coder", target="reviewer", text="echo retried",
                        turn_id="claude:s:k1", hop=1)
        journal.record_routing(completion, [(prompt, "coder->reviewer", "reviewer", "transformed", "")])
        journal.set_state("coder->reviewer@claude:s:k1", "failed", error="the pane was gone")
        journal.close()
        failed = page.locator('#recent li[data-state="failed"]')
        failed.filter(has_text="the pane was gone").wait_for(timeout=20_000)
        assert failed.get_attribute("data-key") == "coder->reviewer@claude:s:k1"
        tile(page, "coder").locator(".handoff").filter(has_text="→reviewer failed").wait_for(timeout=20_000)
        failed.locator("button", has_text="Retry").click()
        said = page.locator("#outcome").filter(has_text="Retry coder->reviewer@claude:s:k1:")
        said.wait_for(timeout=20_000)
        print(f"the page said: {said.text_content()}")
        page.close()
    finally:
        assert web.stop() == 0
    assert "Traceback" not in web.err.read_text()


@pytest.mark.tmux
def test_approve_send_and_hold_from_the_page(tmux_server: TmuxServer, tmp_path: Path, browser: Any) -> None:
    """The Claude Code stand-in asks for a permission; Approve on the page answers it with the adapter's
    keys and the agent goes on; Send types a prompt; Hold and Resume flip a route — each journaled as
    from the web."""
    standin = StandinTarget(tmux_server, tmp_path, "claude", work_s=0.1)
    other = {"pane": tmux_server.new_pane(), "agent": "shell"}
    config = write_routes(tmp_path, tmux_server.socket, {"b": standin.tile, "sh": other},
                          [{"from": "b", "to": "sh"}])
    web = start_web("-c", str(config), tmp=tmp_path, env=standin.env())
    try:
        page = browser.new_page(viewport={"width": 390, "height": 844})
        page.goto(web.url)
        tile(page, "b").and_(page.locator('[data-kind="idle"]')).wait_for(timeout=20_000)
        tmux_server.type(standin.pane, "NEEDS_APPROVAL: touch a file")
        tile(page, "b").and_(page.locator('[data-kind="waiting"]')).wait_for(timeout=20_000)
        # what it asks, next to Approve and Deny: the frame's waiting_for, as text
        # the file may say "waiting" a moment before the dialog is drawn: the words come with the dialog
        def asks() -> str | None:
            tiles = json.loads(request(f"{web.base}/api/board?token={web.token}")[2])["tiles"]
            words = [t["waiting_for"] or "" for t in tiles]
            return next((w for w in words if "Do you want to proceed?" in w), None)

        asked = wait_for(asks, what="the dialog's words")
        assert "touch" in asked, asked
        page.locator(".ask .asks").filter(has_text="Do you want to proceed?").wait_for(timeout=20_000)
        assert tile(page, "b").locator(".ask .asks").text_content() == asked
        tile(page, "b").locator("button.approve").click()
        page.locator("#outcome.ok").filter(has_text="Approve b:").wait_for(timeout=20_000)
        wait_for(lambda: [r["approval"] for r in read_log(standin.log) if "approval" in r] == ["approved"],
                 what="the stand-in approved")
        wait_for(lambda: "answer to: NEEDS_APPROVAL" in tmux_server.capture(standin.pane), what="it went on")
        went_on = tile(page, "b").locator(".answer").filter(has_text="answer to: NEEDS_APPROVAL")
        went_on.wait_for(timeout=20_000)
        tile(page, "b").and_(page.locator('[data-kind="idle"]')).wait_for(timeout=20_000)

        tile(page, "b").locator("button.open-send").click()
        tile(page, "b").locator("input[name=text]").fill("hello from the page")
        tile(page, "b").locator(".send button").click()
        page.locator("#outcome.ok").filter(has_text="Send b:").wait_for(timeout=20_000)
        wait_for(lambda: "hello from the page" in standin.messages(), what="the prompt typed")
        assert tile(page, "b").locator(".send").is_hidden()  # folded again once sent
        # the list says who to whom, the prompt's first line, and the outcome in its colour
        sent = page.locator('#recent li[data-word="delivered"]').filter(has_text="send → b")
        sent.wait_for(timeout=20_000)
        assert sent.locator(".prompt").text_content() == "hello from the page"
        idle = tile(page, "b").and_(page.locator('[data-kind="idle"]')).locator(".state")
        assert colour(sent.locator(".st")) == colour(idle)  # delivered: the idle tile's green

        route = page.locator('#routes li[data-route="b->sh"]')
        route.locator("button", has_text="Hold").click()
        page.locator('#routes li[data-route="b->sh"][data-held="true"]').wait_for(timeout=20_000)
        route.locator("button", has_text="Resume").click()
        page.locator('#routes li[data-route="b->sh"][data-held="false"]').wait_for(timeout=20_000)
        page.close()
    finally:
        assert web.stop() == 0
    rows = Journal(default_journal_path()).actions()
    assert [(r.kind, r.target, r.outcome) for r in rows] == [
        ("approve", "b", "done"), ("send", "b", "done"), ("hold", "b->sh", "done"),
        ("resume", "b->sh", "done")]
    assert all(r.origin == "web 127.0.0.1" for r in rows)


def _put(url: str, key: str, rows: list[dict]) -> None:
    """Put ``key`` into the bus's board bucket, as a host's ``baton run`` does."""
    from pipeline.bus.board import _bucket
    from pipeline.bus.link import BusLink
    from pipeline.engine.hosts import BusSettings

    async def put() -> None:
        link = BusLink(BusSettings(servers=[url]))
        await link.connect()
        try:
            await (await _bucket(link)).put(key, orjson.dumps(rows))
        finally:
            await link.close()

    _in_a_thread(put)


@pytest.mark.tmux
def test_with_a_bus_the_page_holds_every_hosts_tiles(tmux_server: TmuxServer, tmp_path: Path,
                                                       nats: NatsServer) -> None:
    """This host's tiles from their own files, every other host's from the bus (``--all-hosts``'s data):
    this host's own keys on the bus are not shown twice."""
    here = local_host()
    config = tmp_path / "routes.yaml"
    config.write_text(f'version: 1\ntmux: {{socket_name: "{tmux_server.socket}"}}\ntiles:\n'
                      f'  mine: {{pane: "{tmux_server.new_pane()}", agent: shell}}\n'
                      '  far: {pane: "%4", agent: codex, host: beta}\n'
                      "routes:\n  - {from: mine, to: far}\n")
    _put(nats.url, f"tiles.{subject_token(here)}", [{"host": here, "tile": "mine", "agent": "shell",
                                                      "state": "busy", "pane": "%0"}])
    _put(nats.url, "tiles.beta", [{"host": "beta", "tile": "far", "agent": "codex", "state": "busy",
                                   "pane": "%4"}])
    web = start_web("-c", str(config), tmp=tmp_path, env={"BATON_BUS_URL": nats.url})
    try:
        def tiles() -> dict[str, dict]:
            body = request(f"{web.base}/api/board?token={web.token}")[2]
            return {t["tile"]: t for t in json.loads(body or b"{}").get("tiles", [])}

        shown = wait_for(lambda: (t := tiles()).get("far", {}).get("kind") == "working" and t, 20,
                         what="beta's tile from the bus")
        assert list(shown) == ["mine", "far"] and shown["mine"]["local"] and not shown["far"]["local"]
        assert shown["far"]["host"] == "beta" and shown["mine"]["kind"] == "idle"  # its pane, not the bus
        _put(nats.url, "tiles.beta", [{"host": "beta", "tile": "far", "agent": "codex",
                                       "state": "waiting (permission prompt)", "pane": "%4"}])
        wait_for(lambda: tiles()["far"]["kind"] == "waiting", 20, what="beta's tile waiting")
    finally:
        assert web.stop() == 0
    assert "Traceback" not in web.err.read_text()


def test_a_slow_page_gets_the_newest_frame_never_a_backlog() -> None:
    from pipeline.web.feed import Listener

    async def scene() -> None:
        listener = Listener()
        for n in range(3):
            listener.put(b'{"n":%d}' % n)
        assert await listener.next(5) == b'{"n":2}'
        assert await listener.next(0.05) is None  # nothing new: the stream writes a keep-alive
        listener.close()
        assert await listener.next(5) is None and listener.closed

    _in_a_thread(scene)


def _in_a_thread(scene: Any) -> None:
    """``anyio.run(scene)`` in a thread of its own: this module's browser (Playwright's sync API) holds the
    main thread's event loop; an exception there fails the test here."""
    failed: list[BaseException] = []

    def run() -> None:
        try:
            anyio.run(scene)
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the scene did not end"
    if failed:
        raise failed[0]
