"""``baton web``'s page as a new user meets it (issue #39): where an action's outcome shows, the summary in
the header and the tab's title, the layout on a phone (390x844) and a desktop (1280 px), the recent
hand-offs (who to whom, the prompt's first line, every outcome in a colour, a refused send not offered for
retry), the page once the server stopped, the favicon.

The real command over real tmux panes (tests.test_web's board: a Claude tile, a shell, a pane that is gone;
here also a Claude tile whose pane runs a bare shell, which refuses a Send), looked at in headless Chromium.
Element boxes are measured, never times: a notice "goes away" within a generous timeout.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from pipeline.engine.journal import Journal
from pipeline.plugin.events import Completion, Prompt
from pipeline.web.app import PAGE_TERMS, in_page_terms
from tests.support.claude import Scene
from tests.support.cli import write_routes
from tests.support.tmux import TmuxServer
from tests.support.web import WebServer, request, start_web
from tests.support.web_board import board, colour, tile

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}


def _four_tiles(tmux_server: TmuxServer, tmp_path: Path) -> tuple[Scene, WebServer]:
    """tests.test_web's board and a fourth tile, ``bare``: a Claude tile whose pane runs only a shell."""
    scene, config = board(tmux_server, tmp_path)
    routes = json.loads(config.read_text())  # write_routes writes JSON (YAML's subset)
    routes["tiles"]["bare"] = {"pane": tmux_server.new_pane(), "agent": "claude"}
    config.write_text(json.dumps(routes))
    return scene, start_web("-c", str(config), tmp=tmp_path, env={"CLAUDE_CONFIG_DIR": str(scene.config)})


def _fail_a_handoff() -> None:
    """A hand-off from coder to reviewer, failed before it was typed, as the daemon journals one."""
    journal = Journal()
    completion = Completion(tile="coder", turn_id="claude:s:k1")
    journal.record_completion(completion)
    prompt = Prompt(route="coder->reviewer", source="coder", target="reviewer",
                    text="review the diff\nthen say what is wrong", turn_id="claude:s:k1", hop=1)
    journal.record_routing(completion, [(prompt, "coder->reviewer", "reviewer", "transformed", "")])
    journal.set_state("coder->reviewer@claude:s:k1", "failed", error="the pane was gone")
    journal.close()


def _box(locator: Any) -> dict[str, float]:
    box = locator.bounding_box()
    assert box is not None, "not drawn"
    return dict(box)


@pytest.mark.tmux
def test_on_a_phone_the_outcome_shows_by_its_button_and_the_refused_send_is_not_a_failed_handoff(
    tmux_server: TmuxServer, tmp_path: Path, browser: Any
) -> None:
    scene, web = _four_tiles(tmux_server, tmp_path)
    try:
        page = browser.new_page(viewport=PHONE, device_scale_factor=2)
        bad: list[str] = []
        page.on("response", lambda r: bad.extend([f"{r.status} {r.url}"] if r.status >= 400 else []))
        page.on("console", lambda m: bad.extend([m.text] if m.type == "error" else []))
        page.goto(web.url)
        for name, kind in (("coder", "idle"), ("reviewer", "idle"), ("ghost", "gone"), ("bare", "absent")):
            tile(page, name).and_(page.locator(f'[data-kind="{kind}"]')).wait_for(timeout=20_000)
        tile(page, "coder").locator(".answer").filter(has_text="<script>").wait_for(timeout=20_000)

        # item 6: four compact tiles, each send box folded behind a button; the routes on the first screen
        assert page.locator("article .send").count() == 4
        assert all(not form.is_visible() for form in page.locator("article .send").all())
        assert _box(page.locator("#routes-box"))["y"] < PHONE["height"], "the routes are off the first screen"

        # item 4: Send into a pane with no agent: refused; said by the button and at the foot of the screen,
        # in the page's terms (no --force), and gone after a while
        bare = tile(page, "bare")
        bare.locator("button.open-send").click()
        assert bare.locator(".send").is_visible()
        bare.locator("input[name=text]").fill("hello")
        button = bare.locator(".send button")
        pressed = _box(button)
        button.click()
        said = bare.locator(".said.fail")
        said.wait_for(timeout=20_000)
        near = _box(said)
        assert 0 <= near["y"] - (pressed["y"] + pressed["height"]) < 120, (pressed, near)
        toast = page.locator("#outcome.fail")
        assert toast.text_content() == said.text_content()
        message = said.text_content() or ""
        print(f"the page said: {message}")
        assert message.startswith("Send bare: ") and "nothing was typed" in message
        assert "--" not in message and "start the agent in its pane" in message
        box = _box(toast)
        assert 0 <= box["y"] and box["y"] + box["height"] <= PHONE["height"], "the notice is out of view"
        page.mouse.wheel(0, 2000)  # scrolled: still in view
        box = _box(toast)
        assert 0 <= box["y"] and box["y"] + box["height"] <= PHONE["height"], "the notice scrolled away"
        toast.wait_for(state="hidden", timeout=60_000)
        said.wait_for(state="hidden", timeout=60_000)

        # item 7: a failed hand-off: who to whom, the prompt's first line, red, Retry; the refused send
        # (nothing typed) never a red failed hand-off with Retry: listed as refused, in grey, or (where the
        # journal keeps it as an action's outcome only) not listed. The failed one is journaled after it: the
        # frame that shows it holds the send too, if the journal has it as a hand-off
        _fail_a_handoff()
        failed = page.locator('#recent li[data-word="failed"]')
        failed.wait_for(timeout=20_000)
        assert failed.locator(".what").text_content() == "coder → reviewer"
        assert failed.locator(".prompt").text_content() == "review the diff"
        assert failed.locator("button").all_text_contents() == ["Retry"]
        plain = (colour(page.locator("body")), colour(failed.locator(".when")))
        assert colour(failed.locator(".st")) not in plain
        tile(page, "reviewer").locator(".handoff").filter(has_text="←coder failed").wait_for(timeout=20_000)
        sends = page.locator("#recent li").filter(has_text="send → bare")
        for refused in sends.all():
            assert refused.get_attribute("data-word") == "refused" and refused.locator("button").count() == 0
            assert refused.locator(".prompt").text_content() == "hello"
            assert colour(refused.locator(".st")) == colour(tile(page, "ghost").locator(".state"))  # grey
            assert "refused" in (tile(page, "bare").locator(".handoff").text_content() or "")
        print(f"the refused send: {sends.all_text_contents()}")

        # item 5: the summary and the tab's title with a tile waiting
        scene.status("waiting", waitingFor="permission prompt")
        tile(page, "coder").and_(page.locator('[data-kind="waiting"]')).wait_for(timeout=20_000)
        page.locator("#summary").filter(has_text="1 waiting · 1 failed").wait_for(timeout=20_000)
        assert page.locator("#summary").text_content() == "1 waiting · 1 failed · 1 idle · 1 absent · 1 gone"
        assert page.title() == "(1) batonpass"
        assert tile(page, "coder").locator(".asks").text_content() == "permission prompt"
        if os.environ.get("BATON_WEB_SCREENSHOT"):  # docs/web-board.png is this scene
            page.mouse.wheel(0, -5000)
            page.screenshot(path=os.environ["BATON_WEB_SCREENSHOT"], full_page=True)

        # item 9: the favicon (no 404 anywhere on the way)
        icon = page.locator('link[rel="icon"]').get_attribute("href")
        assert icon and request(f"{web.base}{icon}")[0] == 200
        status, head, body = request(f"{web.base}/favicon.ico")
        assert status == 200 and head["content-type"].startswith("image/svg+xml") and b"<svg" in body
        assert bad == []

        # item 8: the server stops: tiles greyed, "as of HH:MM:SS", the header still one line
        header = page.locator("header")
        live_height = _box(header)["height"]
        assert web.stop() == 0
        page.locator("body.stale").wait_for(timeout=20_000)
        link = page.locator("#link").text_content() or ""
        assert re.search(r"as of \d\d:\d\d:\d\d$", link), link
        assert float(page.locator("#tiles").evaluate("e => getComputedStyle(e).opacity")) < 1
        assert "grayscale" in page.locator("#tiles").evaluate("e => getComputedStyle(e).filter")
        assert _box(header)["height"] == live_height
        tops = {round(_box(child)["y"]) for child in header.locator("> :visible").all()}
        assert max(tops) - min(tops) < 12, f"the header wraps: {tops}"
        page.close()
    finally:
        assert web.stop() == 0
    assert "Traceback" not in web.err.read_text()


@pytest.mark.tmux
def test_on_a_desktop_the_page_uses_the_width(tmux_server: TmuxServer, tmp_path: Path, browser: Any) -> None:
    """At 1280 px: tiles in columns, the routes beside the recent hand-offs, a route's state next to its
    name (not at the far edge of the screen)."""
    panes = {name: {"pane": tmux_server.new_pane(), "agent": "shell"} for name in ("a", "b", "c", "d")}
    config = write_routes(tmp_path, tmux_server.socket, panes, [{"from": "a", "to": "b"}])
    web = start_web("-c", str(config), tmp=tmp_path)
    try:
        page = browser.new_page(viewport=DESKTOP)
        page.goto(web.url)
        page.locator('article[data-kind="idle"]').nth(3).wait_for(timeout=20_000)
        page.locator('#routes li[data-route="a->b"] button', has_text="Hold").click()
        page.locator('#routes li[data-held="true"]').wait_for(timeout=20_000)
        tops = [_box(t)["y"] for t in page.locator("article").all()]
        assert len(set(tops)) < len(tops), "one tile per row"
        routes, recent = _box(page.locator("#routes-box")), _box(page.locator("#recent-box"))
        assert routes["x"] + routes["width"] <= recent["x"] and abs(routes["y"] - recent["y"]) < 2
        held = page.locator('#routes li[data-route="a->b"]')
        what, state = _box(held.locator(".what")), _box(held.locator(".st"))
        assert state["x"] - (what["x"] + what["width"]) < 40, "the route's state is far from its name"
        assert routes["width"] < DESKTOP["width"] / 2
        page.close()
    finally:
        assert web.stop() == 0


def test_an_actions_answer_says_what_to_do_on_the_page() -> None:
    """Every option or command an action's answer names has the page's words for it."""
    refused = ("not typing into %3 (tile b): the claude agent is busy with a turn; nothing was typed; "
               "--wait SECONDS waits for it")
    assert in_page_terms(refused).endswith("nothing was typed; Send again once it is idle")
    for terminal, page in PAGE_TERMS:
        said = in_page_terms(f"it said{terminal} here")
        assert terminal not in said and page in said
        assert "--" not in page and "baton " not in page
