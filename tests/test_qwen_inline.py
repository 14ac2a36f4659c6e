"""A long paste that Qwen Code 0.24.4 draws inline — at most 10 lines and 1000 characters, so no ``[Pasted
Content N chars]``, but more rows than its input box's 10 — held to the real CLI's screens
(tests/record_qwen_inline.py: 120×40 and 80×24). Qwen draws such a paste first from its first row, then,
a render later, scrolled to its end. Each recorded screen is replayed into a real pane of its size and
read by the adapter as the dispatcher reads a target:

* the Enter may go at either view (``paste_landed``): Qwen has the whole paste once it draws its first row;
* a crash recovery takes the scrolled view for the paste (its end shows: ``input_holds`` says ``prompt``,
  Enter once), and neither view for a paste of another text — a person's draft or another hand-off from the
  same template shares the first rows, so the first view is never taken for the paste there;
* the draft check reads both views as a draft (text in the input), never as an empty input or a suggestion.

The Qwen stand-in (tests/fakes/agent_tui.py) draws both views as recorded: its two renders, and in a real
pane the view it settles on.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from pipeline.engine.config import Tile
from pipeline.engine.context import EngineContext
from pipeline.system.text import sanitize
from plugins.qwen.adapter import QwenAdapter
from plugins.qwen.screen import input_draft
from tests.fakes.agent_tui import QwenLook, agent_tui_command
from tests.support.paths import FIXTURES, REPO
from tests.support.polling import wait_for
from tests.support.standin_targets import StandinTarget
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.anyio]

SCREENS = FIXTURES / "qwen-code-0.24.4" / "screens"
FACTS = json.loads((SCREENS / "inline_cases.json").read_text(encoding="utf-8"))
SHOTS = [(size, case) for size in FACTS["sizes"] for case in FACTS["cases"]]


def recorded(size: str, case: str, view: str) -> str:
    return (SCREENS / f"inline_{size}_{case}{'_first' if view == 'first' else ''}.ansi.txt").read_text()


def replayed(server: TmuxServer, size: str, case: str, view: str) -> tuple[QwenAdapter, str]:
    """A real pane of the recorded size showing the recorded screen (``view``: ``first`` or ``scrolled``),
    and a Qwen adapter on it; with the screen as the adapter's capture reads it."""
    name = f"inline_{size}_{case}{'_first' if view == 'first' else ''}.ansi.txt"
    width, height = (FACTS["sizes"][size][k] for k in ("width", "height"))
    path = SCREENS / name
    show = f'printf %s "$(cat {shlex.quote(str(path))})"; exec sleep 300'
    pane = server.new_pane(shlex.join(["sh", "-c", show]), width=width, height=height)
    last = [ln for ln in path.read_text(encoding="utf-8").split("\n") if ln.strip()][-1]
    wait_for(lambda: last.split("\x1b")[-1][-8:] in server.run("capture-pane", "-p", "-e", "-t", pane),
             what=f"{name} in the pane")
    ctx = EngineContext(name="qw", tile=Tile(pane=pane, agent="qwen"), tmux=server.tmux)
    return QwenAdapter(ctx), server.run("capture-pane", "-p", "-e", "-t", pane)


def box(server: TmuxServer, pane: str) -> str | None:
    return input_draft(server.run("capture-pane", "-p", "-e", "-t", pane))


def pasted(case: str) -> str:
    return str(FACTS["cases"][case]["pasted"])


@pytest.mark.parametrize(("size", "case"), SHOTS)
@pytest.mark.parametrize("view", ["first", "scrolled"])
async def test_the_enter_goes_once_either_view_of_a_long_inline_paste_shows(
        size: str, case: str, view: str, tmux_server: TmuxServer) -> None:
    adapter, _ = replayed(tmux_server, size, case, view)
    assert await adapter.paste_landed(pasted(case))
    other = pasted(case)[:200] + " and then something else entirely, which no recording shows"
    assert not await adapter.paste_landed(other)


@pytest.mark.parametrize(("size", "case"), SHOTS)
async def test_a_crash_recovery_takes_the_scrolled_view_for_the_paste_and_the_first_for_no_paste(
        size: str, case: str, tmux_server: TmuxServer) -> None:
    text = pasted(case)
    adapter, _ = replayed(tmux_server, size, case, "scrolled")
    assert await adapter.input_holds(text) == "prompt"
    assert await adapter.input_holds(text[:200] + " and then something else entirely") == "other"
    first, screen = replayed(tmux_server, size, case, "first")
    fits = "".join(text.split()) == "".join((input_draft(screen) or "").split())  # 10 rows, not scrolled
    assert await first.input_holds(text) == ("prompt" if fits else "other")


@pytest.mark.parametrize(("size", "case"), SHOTS)
@pytest.mark.parametrize("view", ["first", "scrolled"])
async def test_the_draft_check_reads_either_view_as_a_draft(size: str, case: str, view: str,
                                                            tmux_server: TmuxServer) -> None:
    adapter, screen = replayed(tmux_server, size, case, view)
    draft = await adapter.current_draft()
    assert draft and draft == adapter.draft(screen)
    assert len(draft.split("\n")) == 10  # the box's rows, all of them the paste's
    assert "".join(draft.split()) in "".join(pasted(case).split())


def test_the_recordings_are_of_inline_pastes_longer_than_the_box() -> None:
    for case, facts in FACTS["cases"].items():
        assert facts["lines"] <= 10 and facts["chars"] <= 1000, case
    assert {s: len(FACTS["sizes"][s]["ms_to_view"]["line1000"]) for s in FACTS["sizes"]} == {
        "120x40": 5, "80x24": 5}


@pytest.mark.parametrize(("size", "case"), SHOTS)
def test_the_stand_in_draws_the_first_view_then_the_scrolled_one_as_recorded(size: str, case: str) -> None:
    look = QwenLook(FACTS["sizes"][size]["width"])
    draft = pasted(case).split("\n")
    for view in ("first", "scrolled"):
        drawn = "\n".join(look.input(draft, busy=False))
        assert input_draft(drawn) == input_draft(recorded(size, case, view)), view
    assert not look.moved  # settled: no third render


@pytest.mark.parametrize("size", list(FACTS["sizes"]))
async def test_the_stand_in_in_a_pane_settles_on_the_scrolled_view_as_recorded(
        size: str, tmux_server: TmuxServer, tmp_path: Path) -> None:
    width, height = (FACTS["sizes"][size][k] for k in ("width", "height"))
    env = {**StandinTarget.home_env("qwen", tmp_path / "home"), "PYTHONPATH": str(REPO)}
    pane = tmux_server.new_pane(agent_tui_command("qwen", tmp_path / "log.jsonl"), cwd=tmp_path, env=env,
                                width=width, height=height)
    ctx = EngineContext(name="qw", tile=Tile(pane=pane, agent="qwen"), tmux=tmux_server.tmux)
    adapter = QwenAdapter(ctx)
    wait_for(lambda: "stand-in" in tmux_server.capture(pane), what="the Qwen stand-in")
    for case in FACTS["cases"]:
        want = input_draft(recorded(size, case, "scrolled"))
        await tmux_server.tmux.paste(pane, sanitize(pasted(case)))
        wait_for(lambda want=want: box(tmux_server, pane) == want, what=f"{case} scrolled in its box")
        assert await adapter.input_holds(pasted(case)) == "prompt"
        tmux_server.run("send-keys", "-t", pane, "C-u")
        wait_for(lambda: box(tmux_server, pane) == "", what="the input cleared")
