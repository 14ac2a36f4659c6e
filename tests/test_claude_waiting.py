"""A Claude Code tile that waits on a person (a permission prompt, the 2.1.332 auto-mode dialog): ``baton
status`` says so in the session file's own words, and a hand-off to it waits — it is not typed into the
dialog — until the session is idle again, then it is typed once."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.plugin.events import Delivery, Prompt
from pipeline.views.tile_status import tile_status
from plugins.claude_code.adapter import ClaudeCodeAdapter
from tests.support.claude import Scene
from tests.support.paths import FIXTURES
from tests.support.pipelines import REGISTRIES, make_config, running
from tests.support.polling import aquiet_for, until
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.anyio]
DONE_SCREEN = FIXTURES / "claude-code" / "screens" / "screen_done.txt"


@pytest.mark.parametrize("reason", ["permission prompt", "dialog open"])
async def test_a_tile_waiting_on_a_person_shows_why_and_gets_its_hand_off_only_once_idle(
        reason: str, tmux_server: TmuxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    submitted: list[str] = []
    original = ClaudeCodeAdapter.prompt_submitted

    def spy(self: ClaudeCodeAdapter, text: str, at: float) -> None:
        submitted.append(text)  # the dispatcher has pasted, looked at the target, and now presses Enter
        original(self, text, at)

    monkeypatch.setattr(ClaudeCodeAdapter, "prompt_submitted", spy)
    scene = Scene(tmux_server, tmp_path, screen=str(DONE_SCREEN))
    await until(lambda: "? for shortcuts" in tmux_server.capture(scene.pane), 10, "the recorded screen")
    scene.transcript().turn("earlier work", "done")
    scene.status("waiting", waitingFor=reason)
    config = make_config({"coder": {"pane": scene.pane, "agent": "claude"}}, [])
    [row] = await tile_status(config, REGISTRIES, tmux_server.tmux)  # what `baton status` prints
    assert row["state"] == f"waiting: {reason}"
    assert await scene.adapter.target_state() == "busy"
    deliveries: list[Delivery] = []
    text = "HANDOFF: the reviewer asks for a test of parse()"
    async with running(config, tmux_server, deliveries) as pipeline:
        await pipeline.submit(Prompt(route="r", source="reviewer", target="coder", text=text, turn_id="t1",
                                     hop=1))
        # the dispatcher looks at the target several times meanwhile, and never types into the dialog
        await aquiet_for(2.5, "a hand-off typed into the dialog")
        assert deliveries == [] and "HANDOFF" not in tmux_server.capture(scene.pane)
        scene.status("idle")
        await until(lambda: submitted, 15, "the hand-off, typed once idle")
        assert "HANDOFF" in tmux_server.capture(scene.pane)
        scene.status("busy")  # Claude Code takes the prompt: busy, and the prompt line in its transcript
        scene.transcript().prompt(text)
        await until(lambda: deliveries, 15, "the delivery")
    assert [(d.state, d.attempts) for d in deliveries] == [("delivered", 1)]
    assert submitted == [text] and tmux_server.capture(scene.pane).count("HANDOFF") == 1
