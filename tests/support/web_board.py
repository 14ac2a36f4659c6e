"""The scene the ``baton web`` page tests share (tests/test_web.py, tests/test_web_page.py): a Claude tile
whose last answer holds HTML, a shell tile, a tile whose pane is gone; and what they look up on the page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.claude import Scene, text
from tests.support.cli import write_routes
from tests.support.tmux import TmuxServer

__all__ = ["HOSTILE", "board", "colour", "tile"]

#: an answer that would run script if the page ever treated agent text as HTML
HOSTILE = ('Done. <script>window.pwned = "script"</script> <img src=x onerror="window.pwned = \'img\'"> '
           '<a href="javascript:window.pwned = \'link\'">details</a>')


def board(tmux_server: TmuxServer, tmp_path: Path) -> tuple[Scene, Path]:
    """A Claude tile (idle, its last answer HOSTILE), a shell tile, a tile whose pane is gone."""
    scene = Scene(tmux_server, tmp_path)
    scene.status("idle")
    tx = scene.transcript()
    tx.prompt("summarise the page")
    tx.write(tx.line({"type": "assistant", "message": {
        "id": "msg_1", "model": "claude-sonnet-4-5-20250929", "role": "assistant", "stop_reason": "end_turn",
        "content": [text(HOSTILE)], "usage": {"input_tokens": 1200, "output_tokens": 300}}}))
    tx.end()
    shell = tmux_server.new_pane()
    config = write_routes(tmp_path, tmux_server.socket, {
        "coder": {"pane": scene.pane, "agent": "claude"},
        "reviewer": {"pane": shell, "agent": "shell"},
        "ghost": {"pane": "%999", "agent": "claude"},
    }, [{"from": "coder", "to": "reviewer"}, {"name": "back", "from": "reviewer", "to": "coder"}])
    return scene, config


def tile(page: Any, name: str) -> Any:
    return page.locator(f'article[data-tile="{name}"]')


def colour(locator: Any) -> str:
    """The colour its text is drawn in (``rgb(…)``)."""
    return str(locator.evaluate("e => getComputedStyle(e).color"))
