"""A hand-off a crash left ``delivering``: its outcome is checked on the target before anything is typed.

Each test writes the journal as a killed run would have left it, arranges the target the way the crash
left it, starts a pipeline, and counts what the target agent received.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from pipeline.engine.config import Config
from pipeline.engine.journal import Journal
from pipeline.engine.runtime import Pipeline
from pipeline.plugin.events import Completion, Delivery, Prompt
from pipeline.plugin.manager import load_registries
from tests.conftest import TmuxServer, aquiet_for, demo_agent_command, messages, until, wait_for

pytestmark = [pytest.mark.tmux, pytest.mark.anyio]
TEXT = "review the change in src/app.py\nthen run the tests"


def crashed_journal(path: Path) -> Journal:
    journal = Journal(path)
    c = Completion(tile="a", turn_id="t1")
    journal.record_completion(c)
    prompt = Prompt(route="a->b", source="a", target="b", text=TEXT, turn_id="t1", hop=1)
    journal.record_routing(c, [(prompt, "a->b", "b", "transformed", "")])
    journal.set_state("a->b@t1", "delivering", attempt=True)
    return journal


async def recover(server: TmuxServer, journal: Journal, target: str) -> list[Delivery]:
    source = server.new_pane()
    config = Config.model_validate({"version": 1, "tiles": {"a": {"pane": source, "agent": "shell"},
                                                            "b": {"pane": target, "agent": "demo"}},
                                    "routes": [{"from": "a", "to": "b"}]})
    deliveries: list[Delivery] = []
    pipeline = Pipeline(config, load_registries(), server.tmux, journal=journal,
                        report=lambda e: deliveries.append(e) if isinstance(e, Delivery) else None)
    async with anyio.create_task_group() as tg:
        await tg.start(pipeline.run)
        await until(lambda: deliveries, what="the recovered hand-off to settle")
        await aquiet_for(1.0, "anything else typed")
        tg.cancel_scope.cancel()
    return deliveries


def start_target(server: TmuxServer, log: Path) -> str:
    pane = server.new_pane(demo_agent_command("b", work_s=0.1, log=log))
    wait_for(lambda: "demo❯" in server.capture(pane))
    return pane


async def test_already_received_is_marked_delivered_without_typing(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    log = tmp_path / "b.jsonl"
    target = start_target(tmux_server, log)
    await tmux_server.tmux.paste(target, TEXT)  # the crash came after Enter
    tmux_server.run("send-keys", "-t", target, "Enter")
    wait_for(lambda: messages(log) == [TEXT])
    journal = crashed_journal(tmp_path / "j.sqlite3")
    (delivery,) = await recover(tmux_server, journal, target)
    assert delivery.state == "delivered" and "after a restart" in delivery.note
    assert messages(log) == [TEXT]
    assert journal.handoff("a->b@t1").state == "delivered"


async def test_a_paste_left_unsubmitted_is_submitted_not_pasted_again(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    log = tmp_path / "b.jsonl"
    target = start_target(tmux_server, log)
    await tmux_server.tmux.paste(target, TEXT)  # the crash came between the paste and Enter
    wait_for(lambda: "then run the tests" in tmux_server.capture(target))
    journal = crashed_journal(tmp_path / "j.sqlite3")
    (delivery,) = await recover(tmux_server, journal, target)
    assert delivery.state == "delivered" and "paste left by a crash" in delivery.note
    assert messages(log) == [TEXT]


async def test_nothing_on_the_target_is_typed_once(tmux_server: TmuxServer, tmp_path: Path) -> None:
    log = tmp_path / "b.jsonl"
    target = start_target(tmux_server, log)  # the crash came before the paste
    journal = crashed_journal(tmp_path / "j.sqlite3")
    (delivery,) = await recover(tmux_server, journal, target)
    assert delivery.state == "delivered" and delivery.note == ""
    assert messages(log) == [TEXT]
    assert journal.handoff("a->b@t1").attempts == 2


async def test_a_draft_in_the_target_is_waited_for(tmux_server: TmuxServer, tmp_path: Path) -> None:
    """A person's half-typed text in the target is never interleaved with a prompt."""
    log = tmp_path / "b.jsonl"
    target = start_target(tmux_server, log)
    tmux_server.type(target, "my own half-written", enter=False)
    wait_for(lambda: "my own half-written" in tmux_server.capture(target))
    source = tmux_server.new_pane()
    wait_for(lambda: "$" in tmux_server.capture(source))
    config = Config.model_validate({"version": 1, "tiles": {"a": {"pane": source, "agent": "shell"},
                                                            "b": {"pane": target, "agent": "demo"}},
                                    "routes": [{"from": "a", "to": "b"}]})
    deliveries: list[Delivery] = []
    pipeline = Pipeline(config, load_registries(), tmux_server.tmux,
                        report=lambda e: deliveries.append(e) if isinstance(e, Delivery) else None)
    async with anyio.create_task_group() as tg:
        await tg.start(pipeline.run)
        await until(lambda: pipeline.tiles["a"].adapter._mark is not None, what="the shell tile watched")
        tmux_server.type(source, "echo handed over")
        await aquiet_for(2.0, "a prompt typed into the person's draft")
        assert deliveries == [] and messages(log) == []  # waiting behind the draft
        tmux_server.type(target, " and finished")  # the person sends their own message
        await until(lambda: deliveries, what="the hand-off after the draft")
        await until(lambda: len(messages(log)) == 2, what="both messages")
        tg.cancel_scope.cancel()
    assert messages(log) == ["my own half-written and finished", "handed over"]
