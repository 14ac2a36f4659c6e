"""A starting OpenCode is not ready for a hand-off until it draws its input box.

OpenCode 1.18.33 shows nothing for seconds after it starts (tens of seconds on a loaded machine): first the
terminal as it was (the tty echoes what is typed), then a blank alternate screen with the cursor hidden;
everything typed then is dropped, up to a moment (0.25–3.3 s, recorded) before its input box shows. Its
process is there from the first moment, nothing on screen says busy and nothing is in its input, so the
board read it as idle and a hand-off was typed into it and lost (docs/agents.md, OpenCode). The rule: no
input box on the screen, no hand-off — held to the recorded start (tests/fixtures/opencode-1.18.33/screens/
start_*), to the stand-in that draws it, and through the real dispatcher.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from pipeline.engine.config import Config, Tile
from pipeline.engine.context import EngineContext
from pipeline.engine.runtime import Pipeline
from pipeline.plugin.events import Delivery, Prompt
from pipeline.plugin.manager import load_registries
from plugins.opencode.adapter import OpenCodeAdapter
from plugins.opencode.screen import input_box
from tests.fakes.agent_tui import agent_tui_command
from tests.support.agents import messages
from tests.support.paths import FIXTURES, REPO
from tests.support.polling import aquiet_for, until, wait_for
from tests.support.tmux import TmuxServer

RECORDED = FIXTURES / "opencode-1.18.33" / "screens"


def _adapter(pane: str = "%0", tmux: object = None) -> OpenCodeAdapter:
    return OpenCodeAdapter(EngineContext(name="oc", tile=Tile(pane=pane, agent="opencode"),
                                         tmux=tmux))  # type: ignore[arg-type]


@pytest.mark.parametrize(("screen", "state"), [
    ("start_cooked", "busy"), ("start_blank", "busy"), ("start_box", "ready"), ("paste_idle", "ready"),
    ("paste_line1_short", "draft"), ("paste_lines4", "draft"), ("paste_submitted_after_enter", "busy"),
    ("paste_submitted_done", "ready"),
])
def test_the_recorded_start_is_busy_until_the_input_box_shows(screen: str, state: str) -> None:
    assert _adapter().screen_state((RECORDED / f"{screen}.txt").read_text()) == state


def test_the_recording_shows_that_what_is_typed_once_the_box_shows_is_kept() -> None:
    """The rule's ground: in every recorded start, each token pasted before the first one OpenCode kept
    was dropped, none after it; the first kept was pasted before the box showed."""
    runs = json.loads((RECORDED / "start.json").read_text())["runs"]
    assert len(runs) >= 5
    for run in runs:
        pasted, kept = dict(run["pasted"]), run["kept"]
        assert kept == list(range(kept[0], len(pasted) + 1)), run["kept"]
        assert pasted[kept[0]] <= run["began_s"]["box"]
        assert input_box((RECORDED / "start_box.txt").read_text()) == ""


def _standin(tmux_server: TmuxServer, log: Path, **timing: float) -> str:
    """A pane running the OpenCode stand-in of tests/fakes/agent_tui.py, in the recordings' size."""
    return tmux_server.new_pane(agent_tui_command("opencode", log, **timing), cwd=log.parent,
                                env={"XDG_DATA_HOME": str(log.parent / "data"), "PYTHONPATH": str(REPO)},
                                width=160, height=45)


async def _hand_off(tmux_server: TmuxServer, pane: str, text: str) -> list[Delivery]:
    """A hand-off of ``text`` to the pane's OpenCode through the real dispatcher: its outcomes."""
    config = Config.model_validate({"version": 1, "tiles": {"oc": {"pane": pane, "agent": "opencode"}}})
    deliveries: list[Delivery] = []
    pipeline = Pipeline(config, load_registries(), tmux_server.tmux,
                        report=lambda e: deliveries.append(e) if isinstance(e, Delivery) else None)
    async with anyio.create_task_group() as tg:
        await tg.start(pipeline.run)
        await pipeline.submit(Prompt(route="r", source="src", target="oc", text=text, turn_id="t-1", hop=0))
        await until(lambda: deliveries, 60, "the hand-off's outcome")
        await aquiet_for(1.0, "a second hand-off")
        tg.cancel_scope.cancel()
    return deliveries


@pytest.mark.tmux
@pytest.mark.anyio
async def test_the_stand_in_starts_as_the_recorded_opencode_does(tmux_server: TmuxServer,
                                                                   tmp_path: Path) -> None:
    """Blank and busy while it starts, what is pasted then dropped; then its box, ready, as recorded."""
    log = tmp_path / "oc.jsonl"
    pane = _standin(tmux_server, log, start_s=2.0)
    adapter = _adapter(pane, tmux_server.tmux)
    blank = (RECORDED / "start_blank.txt").read_text()
    wait_for(lambda: tmux_server.run("display-message", "-p", "-t", pane, "#{alternate_on}").strip() == "1",
             what="the stand-in's blank screen")
    assert adapter.screen_state(tmux_server.capture(pane)) == adapter.screen_state(blank) == "busy"
    assert tmux_server.capture(pane).strip() == blank.strip() == ""
    await tmux_server.tmux.paste(pane, "typed while it starts")
    wait_for(lambda: input_box(tmux_server.capture(pane)) is not None, 10, what="the stand-in's box")
    assert await adapter.target_state() == "ready"
    assert messages(log) == []


@pytest.mark.tmux
@pytest.mark.anyio
async def test_a_hand_off_to_an_opencode_just_started_is_typed_once_it_is_ready_and_received_once(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    """The real dispatcher, a hand-off queued the moment the pane's OpenCode (its stand-in) runs: it waits
    out the blank start, then is typed, taken as a prompt once, and delivered."""
    log = tmp_path / "oc.jsonl"
    pane = _standin(tmux_server, log, start_s=2.0)
    text = "HANDOFF: review the change"
    assert [d.state for d in await _hand_off(tmux_server, pane, text)] == ["delivered"]
    assert messages(log) == [text]


@pytest.mark.tmux
@pytest.mark.anyio
async def test_a_hand_off_whose_paste_never_landed_is_typed_again_and_received_once(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    """The box shows, yet the paste and its Enter are dropped (a target that takes nothing for a while:
    the stand-in's ``deaf_s``): the turn never starts, the input stays empty and the store holds no such
    prompt. The dispatcher sees the paste was lost and types it again, once it is ready — delivered, taken
    once — instead of ending unconfirmed with the hand-off lost."""
    log = tmp_path / "oc.jsonl"
    pane = _standin(tmux_server, log, start_s=0.0, deaf_s=2.0)
    wait_for(lambda: input_box(tmux_server.capture(pane)) == "", what="the stand-in's box")
    text = "HANDOFF: the paste that was dropped"
    assert [d.state for d in await _hand_off(tmux_server, pane, text)] == ["delivered"]
    assert messages(log) == [text]
