"""amp, found by its process name and read from its screen. amp cannot run offline here, so a stand-in
named ``amp`` (a real raw-mode program whose /proc comm is ``amp``) shows amp's busy marker and prompt.
Also what any screen-read tile costs tmux: its looks, and the presence check of ``baton run``."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from pipeline.engine.config import Config, Tile
from pipeline.engine.context import EngineContext
from pipeline.engine.presence import presence
from pipeline.engine.runtime import Pipeline
from pipeline.engine.tiles import build_tiles, identify_agent
from pipeline.plugin.events import Completion, Delivery
from pipeline.plugin.manager import load_registries
from plugins.terminal.adapter import AmpAdapter, ShellAdapter
from tests.fakes.standin_tui import standin_command
from tests.support.agents import demo_agent_command, messages
from tests.support.paths import REPO
from tests.support.pipelines import first_look
from tests.support.polling import aquiet_for, until, wait_for
from tests.support.tmux import TmuxServer, each_write

REGISTRIES = load_registries()
BUSY = "⠋ Thinking… (Esc to cancel)"
ANSWER = "Amp answer {n}:\n- {message}: done\n- next: run the tests"


def amp_tile(tmux_server: TmuxServer) -> tuple[str, AmpAdapter]:
    """A new pane running the amp stand-in, and an adapter for it (not following yet)."""
    pane = tmux_server.new_pane(standin_command("amp", prompt="> ", busy=BUSY, answer=ANSWER, work_s=0.6),
                                env={"PYTHONPATH": str(REPO)})
    wait_for(lambda: "amp stand-in" in tmux_server.capture(pane), what="the amp stand-in")
    adapter = AmpAdapter(EngineContext(name="amp", tile=Tile(pane=pane, agent="amp"), tmux=tmux_server.tmux))
    return pane, adapter


def test_amp_is_busy_on_its_marker_and_idle_only_at_its_prompt() -> None:
    amp = AmpAdapter.__new__(AmpAdapter)
    amp._seen_prompt = False
    assert not amp.is_busy("amp starting…")  # before its prompt was ever seen: markers only
    assert not amp.is_busy("Welcome to Amp\n\n> ")
    assert amp.is_busy(f"> fix it\n{BUSY}")
    assert amp.is_busy("> fix it\nhalf of the answer, being redrawn")  # no prompt: not idle
    assert not amp.is_busy("> fix it\nthe answer\n\n> ")
    assert not amp.is_busy("the answer\n╭──────────╮\n│ >        │\n╰──────────╯\n")  # its boxed input


@pytest.mark.tmux
@pytest.mark.anyio
async def test_an_amp_pane_is_identified_and_its_turn_handed_off_once(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    amp_pane = tmux_server.new_pane(standin_command("amp", prompt="> ", busy=BUSY, answer=ANSWER, work_s=0.6),
                                    env={"PYTHONPATH": str(REPO)})
    wait_for(lambda: "amp stand-in" in tmux_server.capture(amp_pane), what="the amp stand-in")
    assert identify_agent(tmux_server.pane_pid(amp_pane), REGISTRIES.agents) == "amp"
    log = tmp_path / "target.jsonl"
    target = tmux_server.new_pane(demo_agent_command("target", log=log))
    wait_for(lambda: "demo❯" in tmux_server.capture(target), what="the demo agent")
    config = Config.model_validate({"version": 1, "tiles": {"amp": {"pane": amp_pane}, "t": {"pane": target}},
                                    "routes": [{"from": "amp", "to": "t"}]})
    deliveries: list[Delivery] = []
    pipeline = Pipeline(config, REGISTRIES, tmux_server.tmux,
                        report=lambda e: deliveries.append(e) if isinstance(e, Delivery) else None)
    async with anyio.create_task_group() as tg:
        await tg.start(pipeline.run)
        assert pipeline.tiles["amp"].adapter.name == "amp"  # agent: auto
        await until(lambda: first_look(pipeline, "amp"), what="the amp tile's first look at its screen")
        tmux_server.type(amp_pane, "fix the flaky test")  # a person's prompt
        await until(lambda: messages(log), 20, "Amp's answer in the target")
        await aquiet_for(2.0, "a second hand-off: one turn, one hand-off")
        tg.cancel_scope.cancel()
    assert messages(log) == ["Amp answer 1:\n- fix the flaky test: done\n- next: run the tests"]
    assert [d.state for d in deliveries] == ["delivered"]


@pytest.mark.tmux
@pytest.mark.anyio
async def test_amp_as_a_target_waits_while_busy(tmux_server: TmuxServer) -> None:
    pane = tmux_server.new_pane(standin_command("amp", prompt="> ", busy=BUSY, answer=ANSWER, work_s=1.5),
                                env={"PYTHONPATH": str(REPO)})
    wait_for(lambda: "amp stand-in" in tmux_server.capture(pane), what="the amp stand-in")
    amp = AmpAdapter(EngineContext(name="amp", tile=Tile(pane=pane, agent="amp"), tmux=tmux_server.tmux))
    assert await amp.target_state() == "ready"
    tmux_server.type(pane, "first")
    wait_for(lambda: BUSY in tmux_server.capture(pane), what="amp's busy marker")
    assert await amp.target_state() == "busy"
    wait_for(lambda: "Amp answer 1" in tmux_server.capture(pane), what="the answer")
    assert await amp.target_state() == "ready"


@pytest.mark.tmux
@pytest.mark.anyio
async def test_a_screen_read_follower_takes_its_pane_and_screen_in_one_round_trip(
        tmux_server: TmuxServer) -> None:
    """A follower that reads the screen looks 5 times a second per tile: the pane and its screen come in
    one control-mode write, not two (50 idle screen-read tiles: one tmux round trip 250 times a second)."""
    _, adapter = amp_tile(tmux_server)
    writes: list[list[str]] = []
    each_write(tmux_server, writes.append)

    async def emit(completion: object) -> None:
        pass

    async with anyio.create_task_group() as tg:
        tg.start_soon(adapter.follow, emit)
        await until(lambda: len(writes) >= 8, what="several looks")
        tg.cancel_scope.cancel()
    looks = writes[-6:]  # the first look resolves the pane
    assert looks == [["display-message", "capture-pane"]] * 6, writes


@pytest.mark.tmux
@pytest.mark.anyio
async def test_an_idle_screen_is_looked_at_less_often_until_it_moves_or_a_prompt_is_typed(
        tmux_server: TmuxServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """While no turn runs and the screen stays the same, a screen-read follower looks once per
    ``idle_tick_s``, not 5 times a second, and captures the screen only when tmux says its window printed
    since the last look (or ``idle_capture_s`` passed); a prompt batonpass submits makes it capture at once,
    and a screen that moves brings back the quick beat — and the turn is still handed off."""
    monkeypatch.setattr(AmpAdapter, "idle_after_s", 0.5)
    monkeypatch.setattr(AmpAdapter, "idle_tick_s", 0.6)
    pane, adapter = amp_tile(tmux_server)
    looks: list[float] = []
    lists: list[float] = []

    def look(names: list[str]) -> None:
        if names == ["display-message", "capture-pane"]:
            looks.append(time.monotonic())
        elif names == ["list-panes"]:
            lists.append(time.monotonic())

    each_write(tmux_server, look)
    emitted: list[Completion] = []

    async def emit(completion: Completion) -> None:
        emitted.append(completion)

    async with anyio.create_task_group() as tg:
        tg.start_soon(adapter.follow, emit)
        # shapes the scenario: a quick beat, then idle (a look in the second of the last output: once more)
        await anyio.sleep(2.0)
        looks.clear()
        lists.clear()
        await anyio.sleep(1.8)  # shapes the scenario: the window the looks are counted in
        assert 2 <= len(lists) <= 4, lists  # 9 looks at 0.2 s
        assert looks == []  # nothing printed: no capture
        await until(lambda: lists, what="an idle look")  # the next is due in 0.6 s: the prompt comes first
        asked = time.monotonic()
        adapter.prompt_submitted("a prompt", time.time())
        await until(lambda: looks, what="a capture after the prompt")
        assert looks[0] - asked < 0.3
        tmux_server.type(pane, "fix the flaky test")  # the turn: the screen moves
        await until(lambda: emitted, what="the turn's end")
        tg.cancel_scope.cancel()
    assert emitted[0].signal == "screen"


@pytest.mark.tmux
@pytest.mark.anyio
async def test_an_idle_screen_that_prints_is_captured_at_the_next_beat_and_a_quiet_one_now_and_then(
        tmux_server: TmuxServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Output with no turn (a clock, a notice) moves an idle screen: tmux's window activity says so and
    the next idle look captures it. A screen that stays quiet is captured every ``idle_capture_s`` anyway:
    tmux counts activity in wall-clock seconds, and the clock can be set back."""
    monkeypatch.setattr(AmpAdapter, "idle_after_s", 0.3)
    monkeypatch.setattr(AmpAdapter, "idle_tick_s", 0.3)
    monkeypatch.setattr(AmpAdapter, "idle_capture_s", 1.0)
    pane, adapter = amp_tile(tmux_server)
    looks: list[float] = []
    each_write(tmux_server, lambda names: looks.append(time.monotonic()) if "capture-pane" in names else None)

    async def emit(completion: Completion) -> None:
        pass

    async with anyio.create_task_group() as tg:
        tg.start_soon(adapter.follow, emit)
        await anyio.sleep(1.5)  # shapes the scenario: past the first looks
        looks.clear()
        await anyio.sleep(2.4)  # shapes the scenario: the window the looks are counted in
        assert 1 <= len(looks) <= 4, looks  # every 1.0 s, not every 0.3 s
        monkeypatch.setattr(AmpAdapter, "idle_capture_s", 60.0)
        await anyio.sleep(1.5)  # shapes the scenario: the new setting taken, the looks so far over
        looks.clear()
        tty = tmux_server.run("display-message", "-p", "-t", pane, "#{pane_tty}").strip()
        Path(tty).write_text("a notice")  # no turn: a background job prints into the pane
        await until(lambda: looks, what="the capture of what was printed")
        tg.cancel_scope.cancel()


@pytest.mark.tmux
@pytest.mark.anyio
async def test_the_presence_check_of_a_screen_read_tile_takes_no_capture(tmux_server: TmuxServer) -> None:
    """``baton run`` asks every second whether each tile is there; a ``terminal`` tile (no process to look
    for) is there while its pane is, so the check reads no screen. A pane that is gone is still said so."""
    pane = tmux_server.new_pane("cat")
    config = Config.model_validate({"version": 1, "tiles": {"t": {"pane": pane, "agent": "terminal"},
                                                            "g": {"pane": "%999", "agent": "terminal"}}})
    tiles = await build_tiles(config, REGISTRIES.agents, tmux_server.tmux)
    sent: list[str] = []
    each_write(tmux_server, sent.extend)
    for _ in range(3):
        states = {p.tile: p.state for p in await presence(tiles)}
        assert states == {"t": "present", "g": "gone"}
    assert sent and "capture-pane" not in sent, sent


@pytest.mark.tmux
@pytest.mark.anyio
async def test_a_shell_left_at_its_prompt_is_looked_at_on_the_idle_beat_and_its_next_command_is_a_turn(
        tmux_server: TmuxServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A shell tile checks its shell 20 times a second and its cursor every 0.4 s; left at its prompt it
    asks only whether its window printed, on the idle beat. A command typed there is echoed, so it is
    seen — and handed on as a turn."""
    monkeypatch.setattr(ShellAdapter, "idle_after_s", 0.5)
    monkeypatch.setattr(ShellAdapter, "idle_tick_s", 0.3)
    pane = tmux_server.new_pane()
    wait_for(lambda: "$" in tmux_server.capture(pane), what="the shell prompt")
    ctx = EngineContext(name="sh", tile=Tile(pane=pane, agent="shell"), tmux=tmux_server.tmux)
    adapter = ShellAdapter(ctx)
    sent: list[str] = []
    each_write(tmux_server, sent.extend)
    emitted: list[Completion] = []

    async def emit(completion: Completion) -> None:
        emitted.append(completion)

    async with anyio.create_task_group() as tg:
        tg.start_soon(adapter.follow, emit)
        await anyio.sleep(1.5)  # shapes the scenario: its prompt learnt, then idle
        sent.clear()
        await anyio.sleep(1.5)  # shapes the scenario: the window the writes are counted in
        assert sent and set(sent) == {"list-panes"}, sent  # no pane lookup every 0.4 s, no capture
        tmux_server.type(pane, "echo after-a-while")
        await until(lambda: emitted, what="the command's turn")
        tg.cancel_scope.cancel()
    assert emitted[0].detail == "echo after-a-while"
    assert (await adapter.response(emitted[0])).text == "after-a-while"
