"""``baton web`` draws the route graph (issue #40): the tiles in their state, a join's node, a model's choice
as a diamond, a gate's edge; on each edge what waits there — `1 queued`, `joining 1 of 2` — as it happens,
and a tile's card shows the join groups coming to it.

The real ``baton run`` and ``baton web`` over real tmux panes (demo agents: a coder whose answer fans out to
two reviewers, joined back into the coder), looked at in headless Chromium. Each reviewer asks a person first
(the demo agent's permission prompt, ``NEEDS_APPROVAL``): the test says when each one answers, so every
state the page must show lasts until the test moves on.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.support.agents import messages, start_agent
from tests.support.cli import baton
from tests.support.daemons import wait_followed, write_config
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer
from tests.support.web import start_web
from tests.support.web_board import tile

pytestmark = [pytest.mark.tmux, pytest.mark.slow]

#: how long the page may take to show what the journal says (a frame per change: well under a second)
SHOWN_S = 20_000


def _workflow(tmux_server: TmuxServer, tmp_path: Path) -> tuple[Path, dict[str, str], dict[str, Path]]:
    """coder -> [security, style] -> join -> coder on demo agents; a planner (no pane) choosing between two
    workers, and a gated route from it."""
    logs = {name: tmp_path / f"{name}.jsonl" for name in ("coder", "security", "style")}
    panes = {name: start_agent(tmux_server, log, name, work_s=0.2) for name, log in logs.items()}
    tiles: dict[str, Any] = {name: {"pane": pane, "agent": "demo"} for name, pane in panes.items()}
    tiles |= {name: {"pane": f"title:{name}-is-nowhere", "agent": "demo", "description": f"does {name}"}
              for name in ("planner", "backend", "docs")}
    config = write_config(tmp_path / "routes.yaml", tmux_server.socket, tiles, [
        {"name": "review", "from": "coder", "to": ["security", "style"],
         "transform": {"type": "template", "template": "NEEDS_APPROVAL review: {response}"}},
        {"name": "verdicts", "from": ["security", "style"], "to": "coder",
         "transform": {"type": "template", "template": "The reviews:\n\n{responses}"}},
        {"name": "dispatch", "from": "planner", "to": {"choose": ["backend", "docs"], "default": "backend"},
         "transform": {"type": "ai-routing", "instructions": "pick one"}},
        {"name": "release", "from": "planner", "to": "docs", "gate": "person"},
    ], max_hops=2)
    return config, panes, logs


def _edge(page: Any, route: str, source: str, target: str) -> Any:
    return page.locator(f'#graph g.edge[data-route="{route}"][data-from="{source}"][data-to="{target}"]')


def _node(page: Any, tile_name: str) -> Any:
    return page.locator(f'#graph g.node.tile[data-tile="{tile_name}"]')


def _classes(locator: Any) -> list[str]:
    return (locator.get_attribute("class") or "").split()


def _approve(tmux_server: TmuxServer, pane: str) -> None:
    """A person's ``y`` at the demo agent's permission prompt."""
    wait_for(lambda: "allow? [y/n]" in tmux_server.capture(pane), what="the permission prompt", timeout=30)
    tmux_server.run("send-keys", "-t", pane, "y")


def test_the_graph_shows_each_tile_state_and_what_waits_on_each_edge_live_and_the_tile_its_joins(
    tmux_server: TmuxServer, tmp_path: Path, daemon_factory: Any, browser: Any
) -> None:
    config, panes, logs = _workflow(tmux_server, tmp_path)
    assert baton("hold", "review", "-c", str(config)).status == 0  # the fan-out's hand-offs stay queued
    daemon = daemon_factory(config)
    daemon.start()
    for name in panes:
        wait_followed(daemon, name)
    web = start_web("-c", str(config), tmp=tmp_path)
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("console", lambda m: errors.extend([m.text] if m.type == "error" else []))
        page.goto(web.url)

        # the nodes: each tile in its state, the join's node, the choice's diamond
        _node(page, "coder").and_(page.locator('[data-kind="idle"]')).wait_for(timeout=SHOWN_S)
        assert "idle" in _classes(_node(page, "coder"))
        assert "gone" in _classes(_node(page, "planner"))
        assert sorted(n.get_attribute("data-tile") for n in page.locator("#graph g.node.tile").all()) == [
            "backend", "coder", "docs", "planner", "security", "style"]
        assert page.locator('#graph g.node.join[data-route="verdicts"] rect').count() == 1
        assert page.locator('#graph g.node.choice[data-route="dispatch"] polygon').count() == 1
        # the edges: the fan-out's two, the join's sources into its node and its node to the coder, the
        # choice's, the gate's
        for route, source, target in (
                ("review", "coder", "security"), ("review", "coder", "style"),
                ("verdicts", "security", "join:verdicts"), ("verdicts", "style", "join:verdicts"),
                ("verdicts", "join:verdicts", "coder"), ("dispatch", "planner", "choose:dispatch"),
                ("dispatch", "choose:dispatch", "backend"), ("dispatch", "choose:dispatch", "docs"),
                ("release", "planner", "docs")):
            assert _edge(page, route, source, target).locator("path").count() == 1, (route, source, target)
        assert page.locator("#graph g.edge").count() == 9
        assert "default" in _classes(_edge(page, "dispatch", "choose:dispatch", "backend"))
        assert "gate" in _classes(_edge(page, "release", "planner", "docs"))
        assert _edge(page, "release", "planner", "docs").locator(".route").text_content() == \
            "release · gate: person"

        # the coder answers: the held fan-out's two hand-offs are queued, one on each edge
        tmux_server.type(panes["coder"], "change X")
        for reviewer in ("security", "style"):
            _edge(page, "review", "coder", reviewer).locator(".count").filter(
                has_text="1 queued").wait_for(timeout=SHOWN_S)

        # let them go: typed, each reviewer asks a person (its node says waiting), nothing queued any more
        assert baton("resume", "review", "-c", str(config)).status == 0
        for reviewer in ("security", "style"):
            _node(page, reviewer).and_(page.locator('[data-kind="waiting"]')).wait_for(timeout=SHOWN_S)
            assert "waiting" in _classes(_node(page, reviewer))
            assert _edge(page, "review", "coder", reviewer).locator(".count").text_content() == ""

        # security answers: the group is joining, on the join's edge and on the coder's card
        _approve(tmux_server, panes["security"])
        into_coder = _edge(page, "verdicts", "join:verdicts", "coder").locator(".count")
        into_coder.filter(has_text="joining 1 of 2 (security)").wait_for(timeout=SHOWN_S)
        tile(page, "coder").locator(".joining").filter(
            has_text="joining verdicts: 1 of 2 (security)").wait_for(timeout=SHOWN_S)
        if os.environ.get("BATON_WEB_GRAPH_SCREENSHOT"):  # the graph as a person sees it, mid-join
            page.locator("#graph-box").screenshot(path=os.environ["BATON_WEB_GRAPH_SCREENSHOT"])

        # style answers: the coder gets one prompt with both verdicts; nothing waits on the edge any more
        _approve(tmux_server, panes["style"])
        wait_for(lambda: len(messages(logs["coder"])) == 2, timeout=30, what="the joined prompt")
        page.wait_for_function(
            "() => document.querySelector('#graph g.edge[data-route=\"verdicts\"][data-to=\"coder\"] .count')"
            ".textContent === ''", timeout=SHOWN_S)
        tile(page, "coder").locator(".joining:empty").wait_for(state="attached", timeout=SHOWN_S)
        assert errors == []
    finally:
        assert web.stop() == 0
        assert daemon.stop() == 0
