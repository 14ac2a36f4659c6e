"""The Cline stand-in (tests/fakes/agent_tui.py) held to the real Cline 3.0.65's recorded screens
(tests/fixtures/cline-3.0.65/screens): what the adapter reads from each — the input (the placeholder of a
14-line paste, a two-line paste inline), busy, the permission prompt it waits for, and the keys ``baton
approve`` / ``deny`` would type — is the same on the stand-in as on the real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from plugins.cline.adapter import ClineAdapter
from plugins.cline.screen import input_draft
from tests.fakes.agent_tui import agent_tui_command
from tests.support.paths import FIXTURES, REPO
from tests.support.polling import wait_for
from tests.support.standin_targets import say
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.anyio]

SCREENS = FIXTURES / "cline-3.0.65" / "screens"
PASTES = {
    "placeholder_14_lines": "\n".join(f"line {i} of the long paste" for i in range(1, 15)),
    "draft": "a short draft\nof two lines",
}


def reading(screen: str) -> dict[str, object]:
    adapter = object.__new__(ClineAdapter)  # reads the screen it is given, nothing of a tile
    draft = input_draft(screen)
    return {"input": None if draft is None else "".join(draft.split()), "busy": adapter.is_busy(screen),
            "waiting": adapter.waiting_for(screen), "approve": adapter.answer_keys(screen, True),
            "deny": adapter.answer_keys(screen, False)}


def recorded(name: str) -> dict[str, object]:
    return reading((SCREENS / f"{name}.ans").read_text())


async def test_the_cline_stand_in_draws_what_the_real_cline_drew(tmux_server: TmuxServer,
                                                                 tmp_path: Path) -> None:
    log = tmp_path / "standin.jsonl"
    pane = tmux_server.new_pane(agent_tui_command("cline", log, work_s=3.0), cwd=tmp_path,
                                env={"CLINE_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(REPO)},
                                width=120, height=40)
    wait_for(lambda: "stand-in" in tmux_server.capture(pane), what="the cline stand-in")

    def shown() -> dict[str, object]:
        return reading(tmux_server.run("capture-pane", "-p", "-e", "-t", pane))

    assert shown() == recorded("idle")
    for name, text in PASTES.items():
        await tmux_server.tmux.paste(pane, text)
        wait_for(lambda: shown()["input"], what=f"{name} in the stand-in's input")
        assert shown() == recorded(name), name
        tmux_server.run("send-keys", "-t", pane, "C-u")
        wait_for(lambda: shown()["input"] == "", what="the input cleared")
    say(tmux_server, pane, "work on it")
    wait_for(lambda: shown()["busy"], what="the stand-in busy")
    assert shown() == recorded("thinking")
    wait_for(lambda: not shown()["busy"], what="the stand-in done", timeout=10)
    say(tmux_server, pane, "NEEDS_APPROVAL: touch a file")
    wait_for(lambda: shown()["waiting"], what="the stand-in asking")
    assert shown() == recorded("approval")
    tmux_server.run("send-keys", "-t", pane, "y")
