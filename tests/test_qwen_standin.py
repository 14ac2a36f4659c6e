"""The Qwen Code stand-in (tests/fakes/agent_tui.py) held to the real Qwen Code 0.24.4's recorded screens
(tests/fixtures/qwen-code-0.24.4/screens): what the adapter reads from each — the input (the placeholder of a
14-line and of a 1001-character paste, a 10-line paste inline), busy, the permission prompt it waits for,
and the keys ``baton approve`` / ``deny`` would type — is the same on the stand-in as on the real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.engine.config import Tile
from pipeline.engine.context import EngineContext
from pipeline.system.text import strip_ansi
from plugins.qwen.adapter import QwenAdapter
from plugins.qwen.screen import input_draft
from tests.fakes.agent_tui import agent_tui_command
from tests.support.paths import FIXTURES, REPO
from tests.support.polling import wait_for
from tests.support.standin_targets import say
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.anyio]

SCREENS = FIXTURES / "qwen-code-0.24.4" / "screens"
PASTES = {
    "paste-14-lines": "\n".join(f"line {i:02d}" for i in range(1, 15)),
    "paste-1001-chars": "x" * 1001,
    "paste-10-lines-inline": "\n".join(f"l{i}" for i in range(1, 11)),
}


def reading(screen: str) -> dict[str, object]:
    adapter = QwenAdapter(EngineContext(name="t", tile=Tile(pane="%0", agent="qwen"), tmux=None))  # type: ignore[arg-type]
    draft = input_draft(screen)
    return {"input": None if draft is None else "".join(draft.split()),
            "busy": adapter.is_busy(strip_ansi(screen)), "waiting": adapter.waiting_for(screen),
            "approve": adapter.answer_keys(screen, True), "deny": adapter.answer_keys(screen, False)}


def recorded(name: str) -> dict[str, object]:
    return reading((SCREENS / f"{name}.ansi").read_text())


async def test_the_qwen_stand_in_draws_what_the_real_qwen_code_drew(tmux_server: TmuxServer,
                                                                   tmp_path: Path) -> None:
    log = tmp_path / "standin.jsonl"
    pane = tmux_server.new_pane(agent_tui_command("qwen", log, work_s=3.0), cwd=tmp_path,
                                env={"QWEN_HOME": str(tmp_path / "home"), "PYTHONPATH": str(REPO)},
                                width=120, height=40)
    wait_for(lambda: "stand-in" in tmux_server.capture(pane), what="the qwen stand-in")

    def shown() -> dict[str, object]:
        return reading(tmux_server.run("capture-pane", "-p", "-e", "-t", pane))

    assert shown() == recorded("idle-empty")
    for name, text in PASTES.items():
        await tmux_server.tmux.paste(pane, text)
        wait_for(lambda: shown()["input"], what=f"{name} in the stand-in's input")
        assert shown() == recorded(name), name
        tmux_server.run("send-keys", "-t", pane, "C-u")
        wait_for(lambda: shown()["input"] == "", what="the input cleared")
    say(tmux_server, pane, "work on it")
    wait_for(lambda: shown()["busy"], what="the stand-in busy")
    assert shown() == recorded("busy")
    wait_for(lambda: not shown()["busy"], what="the stand-in done", timeout=10)
    say(tmux_server, pane, "NEEDS_APPROVAL: touch a file")
    wait_for(lambda: shown()["waiting"], what="the stand-in asking")
    assert shown() == recorded("permission")
    tmux_server.run("send-keys", "-t", pane, "Enter")
