"""A hand-off a crash left ``delivering``: its outcome is checked on the target before anything is typed.

Each test writes the journal as a killed run would have left it, arranges the target the way the crash
left it, starts a pipeline, and counts what the target agent received — for every target: the demo agent
and the Claude Code, Codex, OpenCode, Gemini CLI, Copilot CLI, Qwen Code and pi stand-ins
(tests/fakes/agent_tui.py), which draw a long paste as their real agent's placeholder, with a short prompt
(drawn inline) and a long one (a placeholder).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import pytest

from pipeline.engine.config import Config
from pipeline.engine.journal import Journal
from pipeline.engine.runtime import Pipeline
from pipeline.plugin.events import Completion, Delivery, Prompt
from pipeline.plugin.manager import load_registries
from pipeline.system import proc
from tests.support.pipelines import first_look
from tests.support.polling import aquiet_for, until, wait_for
from tests.support.standin_targets import TARGETS, StandinTarget, press_enter, say
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.anyio]
SHORT = "review the change in src/app.py\nthen run the tests"
LONG = "\n".join(
    f"line {i}: the reviewer should look at module {i} and its tests, twice over" for i in range(16)
)
TEXTS = {"short": SHORT, "long": LONG}


@pytest.fixture(params=TARGETS)
def target(
    request, tmux_server: TmuxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> StandinTarget:
    standin = StandinTarget(tmux_server, tmp_path, request.param)
    for key, value in standin.env().items():
        monkeypatch.setenv(key, value)
    return standin


def crashed_journal(path: Path, text: str) -> Journal:
    journal = Journal(path)
    c = Completion(tile="a", turn_id="t1")
    journal.record_completion(c)
    prompt = Prompt(route="a->b", source="a", target="b", text=text, turn_id="t1", hop=1)
    journal.record_routing(c, [(prompt, "a->b", "b", "transformed", "")])
    journal.set_state("a->b@t1", "delivering", attempt=True)
    return journal


def pipeline_for(
    server: TmuxServer, target: StandinTarget, journal: Journal | None, deliveries: list[Delivery]
) -> Pipeline:
    source = server.new_pane()
    wait_for(lambda: "$" in server.capture(source))
    config = Config.model_validate(
        {
            "version": 1,
            "tiles": {"a": {"pane": source, "agent": "shell"}, "b": target.tile},
            "routes": [{"from": "a", "to": "b"}],
        }
    )
    return Pipeline(
        config,
        load_registries(),
        server.tmux,
        journal=journal,
        report=lambda e: deliveries.append(e) if isinstance(e, Delivery) else None,
    )


async def recover(server: TmuxServer, journal: Journal, target: StandinTarget) -> list[Delivery]:
    deliveries: list[Delivery] = []
    pipeline = pipeline_for(server, target, journal, deliveries)
    async with anyio.create_task_group() as tg:
        await tg.start(pipeline.run)
        await until(lambda: deliveries, timeout=20, what="the recovered hand-off to settle")
        await aquiet_for(1.0, "anything else typed")
        tg.cancel_scope.cancel()
    return deliveries


def shown(server: TmuxServer, target: StandinTarget, text: str) -> bool:
    """The paste is in the target's input: its last line, or its agent's placeholder."""
    screen = server.capture(target.pane)
    # [Pasted …], Copilot's [Paste #K - N lines], pi's [paste #K +N lines], Cline's [… Pasted +N lines]
    marks = ("[Paste", "[paste #", "... Pasted +")
    return text.split("\n")[-1] in screen or any(mark in screen for mark in marks)


@pytest.mark.parametrize("size", TEXTS)
async def test_already_received_is_marked_delivered_without_typing(
    size: str, target: StandinTarget, tmux_server: TmuxServer, tmp_path: Path
) -> None:
    text = TEXTS[size]
    await tmux_server.tmux.paste(target.pane, text)  # the crash came after Enter
    wait_for(lambda: shown(tmux_server, target, text), what="the paste")
    press_enter(tmux_server, target.pane)
    wait_for(lambda: target.messages() == [text], what="the prompt taken")
    journal = crashed_journal(tmp_path / "j.sqlite3", text)
    (delivery,) = await recover(tmux_server, journal, target)
    assert delivery.state == "delivered" and "after a restart" in delivery.note
    assert target.messages() == [text]
    assert journal.handoff("a->b@t1").state == "delivered"


@pytest.mark.parametrize("size", TEXTS)
async def test_a_paste_left_unsubmitted_is_submitted_not_pasted_again(
    size: str, target: StandinTarget, tmux_server: TmuxServer, tmp_path: Path
) -> None:
    text = TEXTS[size]
    await tmux_server.tmux.paste(target.pane, text)  # the crash came between the paste and Enter
    wait_for(lambda: shown(tmux_server, target, text), what="the paste")
    journal = crashed_journal(tmp_path / "j.sqlite3", text)
    (delivery,) = await recover(tmux_server, journal, target)
    assert delivery.state == "delivered" and "paste left by a crash" in delivery.note, delivery
    assert target.messages() == [text]


async def test_nothing_on_the_target_is_typed_once(
    target: StandinTarget, tmux_server: TmuxServer, tmp_path: Path
) -> None:
    journal = crashed_journal(tmp_path / "j.sqlite3", SHORT)  # the crash came before the paste
    (delivery,) = await recover(tmux_server, journal, target)
    assert delivery.state == "delivered" and delivery.note == ""
    assert target.messages() == [SHORT]
    assert journal.handoff("a->b@t1").attempts == 2


async def behind_a_draft(server: TmuxServer, target: StandinTarget, journal: Journal | None,
                         hand_off: Callable[[Pipeline], Awaitable[None]] | None = None) -> list[str]:
    """A person's half-typed text in the target; a pipeline runs (``hand_off`` makes a hand-off happen):
    nothing is typed into the draft; once the person sends it, the hand-off follows. The target's
    messages."""
    server.type(target.pane, "my own half-written", enter=False)
    wait_for(lambda: "my own half-written" in server.capture(target.pane))
    deliveries: list[Delivery] = []
    pipeline = pipeline_for(server, target, journal, deliveries)
    async with anyio.create_task_group() as tg:
        await tg.start(pipeline.run)
        if hand_off is not None:
            await hand_off(pipeline)
        await aquiet_for(2.0, "a prompt typed into the person's draft")
        assert deliveries == [] and target.messages() == []  # waiting behind the draft
        say(server, target.pane, " and finished")  # the person sends their own message
        await until(lambda: deliveries, timeout=20, what="the hand-off after the draft")
        await until(lambda: len(target.messages()) == 2, what="both messages")
        tg.cancel_scope.cancel()
    return target.messages()


async def test_a_persons_draft_after_a_crash_is_kept_and_the_hand_off_typed_once_it_is_sent(
    target: StandinTarget, tmux_server: TmuxServer, tmp_path: Path
) -> None:
    """Not this hand-off in the input: somebody's draft. Never pasted over; typed after the draft is sent."""
    journal = crashed_journal(tmp_path / "j.sqlite3", LONG)
    assert await behind_a_draft(tmux_server, target, journal) == ["my own half-written and finished", LONG]


async def test_a_draft_in_the_target_is_waited_for(
    target: StandinTarget, tmux_server: TmuxServer, tmp_path: Path
) -> None:
    """A person's half-typed text in the target is never interleaved with a prompt."""

    async def echo(pipeline: Pipeline) -> None:
        await until(lambda: first_look(pipeline, "a"), what="the shell tile watched")
        tmux_server.type(pipeline.tiles["a"].ctx.tile.pane, "echo handed over")

    messages = await behind_a_draft(tmux_server, target, None, echo)
    assert messages == ["my own half-written and finished", "handed over"]


async def test_an_enter_taken_for_a_newline_is_pressed_again_while_the_input_holds_the_prompt(
    tmux_server: TmuxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Gemini CLI too busy to read its input at once reads the paste and the Enter together and takes the
    Enter for a newline (as the real 0.61.0 did, stopped while the hand-off was typed): the hand-off is not
    lost in its input — the dispatcher sees its paste still there and presses Enter again."""
    target = StandinTarget(tmux_server, tmp_path, "gemini", under_shell=True)
    for key, value in target.env().items():
        monkeypatch.setenv(key, value)
    (pid,) = [p.pid for p in proc.subtree(tmux_server.pane_pid(target.pane)) if p.comm == "gemini"]
    journal = crashed_journal(tmp_path / "j.sqlite3", SHORT)  # typed again as soon as the pipeline starts
    deliveries: list[Delivery] = []
    pipeline = pipeline_for(tmux_server, target, journal, deliveries)
    os.kill(pid, signal.SIGSTOP)
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(pipeline.run)
            await until(lambda: journal.handoff("a->b@t1").attempts == 2, what="the hand-off typed")
            await anyio.sleep(1.0)  # shapes the scenario: pasted, Enter sent, the target still stopped
            os.kill(pid, signal.SIGCONT)
            await until(lambda: deliveries, timeout=20, what="the hand-off to settle")
            tg.cancel_scope.cancel()
    finally:
        os.kill(pid, signal.SIGCONT)
    (delivery,) = deliveries
    assert delivery.state == "delivered", delivery
    assert target.messages() == [SHORT]
