"""End to end with the REAL Codex CLI (``@openai/codex`` from npm, cached) against a fake Responses API.

One CODEX_HOME serves the whole test session (the first TUI start copies a 315 MB binary into it and
starts the shared app-server daemon: docs/agents.md, Codex); the daemon is stopped by PID at the end. Each
test runs Codex in its own tmux server, in daemon mode (the default), with ``baton hooks install --codex``'s
notify chained to a notify program that was there before, and the real pipeline routing between the panes.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from pipeline.cli import main as baton
from pipeline.engine.actions import Action, perform
from pipeline.engine.config import Config
from pipeline.engine.runtime import Pipeline
from pipeline.plugin.events import Completion, Delivery, Prompt
from pipeline.plugin.manager import load_registries
from pipeline.spool import spool_dir
from pipeline.views.tile_status import tile_status
from plugins.codex.adapter import CodexAdapter
from plugins.codex.screen import composer_draft
from tests.fakes.openai_responses import Reply
from tests.fakes.webhook import WebhookReceiver
from tests.support import codex_cli
from tests.support.agents import demo_agent_command, messages, read_log
from tests.support.codex_cli import CodexWorld, start_codex
from tests.support.crash_at_paste import LONG_TEMPLATE, SHORT_TEMPLATE, crash_at_paste
from tests.support.polling import aquiet_for, until, wait_for
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow, pytest.mark.anyio]
#: the session's Codex home and fake API (a fixture, shared with tests/test_workflow_e2e.py)
codex_world = codex_cli.codex_world

def start_peer(server: TmuxServer, log: Path) -> str:
    pane = server.new_pane(demo_agent_command("peer", log=log, work_s=0.1))
    wait_for(lambda: "demo❯" in server.capture(pane), what="the demo agent's prompt")
    return pane


@asynccontextmanager
async def running(config: Config, server: TmuxServer, events: list,
                  seen_at: dict[str, float] | None = None) -> AsyncIterator[Pipeline]:
    def report(event: Completion | Delivery) -> None:
        events.append(event)
        if seen_at is not None and isinstance(event, Completion):
            seen_at[event.turn_id] = time.time()

    pipeline = Pipeline(config, load_registries(), server.tmux, report=report)
    async with anyio.create_task_group() as tg:
        await tg.start(pipeline.run)
        yield pipeline
        tg.cancel_scope.cancel()




def rollout_events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def deliveries(events: list, route: str) -> list[Delivery]:
    return [e for e in events if isinstance(e, Delivery) and e.prompt.route == route]


async def test_codex_turns_reach_the_peer_once_and_prompts_start_codex_turns(
        codex_world: CodexWorld, tmux_server: TmuxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    world = codex_world
    monkeypatch.setenv("XDG_STATE_HOME", str(world.state))  # where the daemon's notify spools its records
    [codex] = start_codex(tmux_server, world)
    peer_log = tmp_path / "peer.jsonl"
    peer = start_peer(tmux_server, peer_log)
    config = Config.model_validate({"version": 1, "tiles": {"codex": {"pane": codex, "agent": "codex"},
                                                            "peer": {"pane": peer, "agent": "demo"}},
                                    "routes": [{"name": "review", "from": "codex", "to": "peer"}]})
    first = "FIRST_ANSWER Here is the plan:\n\n```python\nprint('ok')\n```\n\n- `src/app.py` done."
    second = "SECOND_ANSWER — typed by a person, handed on all the same: ✓"
    world.api.script(first, Reply(second))
    events: list = []
    seen_at: dict[str, float] = {}
    async with running(config, tmux_server, events, seen_at) as pipeline:
        # (b) a prompt handed to Codex starts a turn: confirmed by task_started in its rollout
        await pipeline.submit(Prompt(route="seed", source="test", target="codex", turn_id="seed-1", hop=0,
                                     text="Plan the change.\nKeep it short."))
        await until(lambda: deliveries(events, "seed"), what="the seed prompt's delivery")
        assert deliveries(events, "seed")[0].state == "delivered"
        adapter = pipeline.tiles["codex"].adapter
        assert isinstance(adapter, CodexAdapter) and adapter.rollout is not None
        lines = rollout_events(adapter.rollout)
        started = [r for r in lines if r["payload"].get("type") == "task_started"]
        typed = [r["payload"]["item"] for r in lines if r["payload"].get("type") == "item_completed"
                 and r["payload"]["item"]["type"] == "UserMessage"]
        assert started and typed[0]["content"][0]["text"] == "Plan the change.\nKeep it short."

        # (a) Codex's answer reaches the peer exactly once, exactly
        await until(lambda: messages(peer_log) == [first], what="the first answer in the peer")
        # a turn typed by a person in the Codex pane is handed on too
        tmux_server.run("send-keys", "-t", codex, "-l", "What next?")
        await until(lambda: composer_draft(tmux_server.run("capture-pane", "-p", "-e", "-J", "-t", codex))
                    == "What next?", what="the typed prompt in Codex's input line")
        # shapes the scenario (the input): an Enter sooner than this after typing is taken as pasted
        await anyio.sleep(CodexAdapter.submit_delay_s)
        tmux_server.run("send-keys", "-t", codex, "Enter")
        await until(lambda: messages(peer_log) == [first, second], what="the second answer in the peer")
        # both signals fired for both turns (notify chained to the program that was there before) ...
        thread = adapter.state.thread_id
        await until(lambda: len([n for n in world.notified() if n["thread-id"] == thread]) == 2,
                    what="the previous notify program to run for both turns")
        await until(
            lambda: not list(spool_dir().glob("*.json")), what="the daemon to take the spooled records"
        )
        await aquiet_for(0.5, "a turn handed on twice (once per signal)")
        # ... and each turn was handed on once, under the rollout's turn id
        assert messages(peer_log) == [first, second]
        completions = [e for e in events if isinstance(e, Completion) and e.tile == "codex"]
        turn_ids = [r["payload"]["turn_id"] for r in rollout_events(adapter.rollout)
                    if r["payload"].get("type") == "task_complete"]
        assert [c.turn_id for c in completions] == turn_ids
        assert {n["turn-id"] for n in world.notified() if n["thread-id"] == thread} == set(turn_ids)
        assert [d.state for d in deliveries(events, "review")] == ["delivered", "delivered"]

        # the time from task_complete on disk (the line's own timestamp, which Completion.at carries) to
        # the paste arriving in the peer: printed for the record, never asserted
        received = [r["t"] for r in read_log(peer_log) if "message" in r]
        with capsys.disabled():
            for completion, got in zip(completions, received, strict=True):
                print(
                    f"\ncodex turn {completion.turn_id}: task_complete -> completion seen "
                    f"{(seen_at[completion.turn_id] - completion.at) * 1000:.0f} ms (via "
                    f"{completion.signal}), "
                    f"-> prompt submitted in the peer {(got - completion.at) * 1000:.0f} ms"
                )

    # baton resolve names the rollout and the rule that found it
    capsys.readouterr()
    assert await anyio.to_thread.run_sync(baton, ["resolve", "-L", tmux_server.socket, codex, "--json"]) == 0
    steps = {s["step"]: s for s in json.loads(capsys.readouterr().out)["steps"]}
    assert steps["rollout"]["value"] == str(adapter.rollout)
    assert "(rule: start time + cwd)" in steps["rollout"]["detail"]
    assert await anyio.to_thread.run_sync(baton, ["extract", "--agent", "codex", str(adapter.rollout)]) == 0
    assert capsys.readouterr().out == second + "\n"


async def test_two_codex_panes_in_one_folder_keep_their_own_turns(
    codex_world: CodexWorld, tmux_server: TmuxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started at the same moment, in the same cwd: the prompt batonpass typed tells the rollouts apart."""
    world = codex_world
    monkeypatch.setenv("XDG_STATE_HOME", str(world.state))
    left, right = start_codex(tmux_server, world, 2)
    peer_log = tmp_path / "peer.jsonl"
    peer = start_peer(tmux_server, peer_log)
    config = Config.model_validate(
        {
            "version": 1,
            "tiles": {
                "left": {"pane": left, "agent": "codex"},
                "right": {"pane": right, "agent": "codex"},
                "peer": {"pane": peer, "agent": "demo"},
            },
            "routes": [
                {
                    "from": t,
                    "to": "peer",
                    "transform": {"type": "template", "template": "{source}: {response}"},
                }
                for t in ("left", "right")
            ],
        }
    )
    world.api.script("RIGHT_ANSWER from the right pane", "LEFT_ANSWER from the left pane")
    events: list = []
    async with running(config, tmux_server, events) as pipeline:
        await pipeline.submit(Prompt(route="seed-right", source="test", target="right", turn_id="s-r", hop=0,
                                     text="Right pane, your turn."))
        await until(
            lambda: messages(peer_log) == ["right: RIGHT_ANSWER from the right pane"], what="right's answer"
        )
        assert pipeline.tiles["left"].adapter.rollout is None  # no prompt yet: not the neighbour's rollout
        await pipeline.submit(Prompt(route="seed-left", source="test", target="left", turn_id="s-l", hop=0,
                                     text="Left pane, now you."))
        await until(lambda: len(messages(peer_log)) == 2, what="left's answer")
        await aquiet_for(0.5, "a third hand-off")
        assert messages(peer_log) == [
            "right: RIGHT_ANSWER from the right pane",
            "left: LEFT_ANSWER from the left pane",
        ]
        rollouts = {name: pipeline.tiles[name].adapter.rollout for name in ("left", "right")}
        assert rollouts["left"] != rollouts["right"] and None not in rollouts.values()
        assert [d.state for d in events if isinstance(d, Delivery)] == ["delivered"] * 4


async def test_codex_at_an_approval_prompt_is_waiting_told_once_and_gets_its_hand_off_after(
        codex_world: CodexWorld, tmux_server: TmuxServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The real approval dialog: ``-a on-request``, and the model asks to run a command unsandboxed.
    Codex 0.171.0 writes nothing to the rollout for the request (its last line stays the ``function_call``
    until a person answers), so the adapter reads it from the screen: ``baton status`` says waiting, the
    person is told once, and a hand-off queued meanwhile is typed only after the approval, once the turn
    ended — never into the dialog (a ``y`` or Enter there would answer it)."""
    world = codex_world
    monkeypatch.setenv("XDG_STATE_HOME", str(world.state))
    [codex] = start_codex(tmux_server, world, args="-a on-request -s workspace-write")
    marker = world.project / f"APPROVAL_E2E_{tmp_path.name}.txt"
    escalated = {"cmd": f"touch {marker.name} && echo E2E_TOOL_OK",
                 "sandbox_permissions": "require_escalated",
                 "justification": "Create the marker file the user asked for"}
    world.api.script(Reply(call=("exec_command", escalated)), "APPROVED_ANSWER the marker is there.",
                     "HANDOFF_ANSWER read the hand-off.")
    webhook = WebhookReceiver().start()
    config = Config.model_validate({"version": 1, "tiles": {"codex": {"pane": codex, "agent": "codex"}},
                                    "settings": {"notify": [{"kind": "webhook", "url": f"{webhook.url}/h"}]}})
    registries = load_registries()
    events: list = []
    handoff = "HANDOFF from the reviewer: check the marker file"
    try:
        async with running(config, tmux_server, events) as pipeline:
            await pipeline.submit(Prompt(route="seed", source="test", target="codex", turn_id="seed-1", hop=0,
                                         text="Create the marker file."))
            await until(lambda: webhook.events("waiting"), 60, "the notice of Codex's approval prompt")
            [row] = await tile_status(config, registries, tmux_server.tmux)
            assert row["state"] == "waiting: permission prompt"
            assert row["waiting_for"].startswith("Would you like to run the following command?\n$ "), row
            adapter = pipeline.tiles["codex"].adapter
            assert isinstance(adapter, CodexAdapter) and adapter.rollout is not None
            last = rollout_events(adapter.rollout)[-2:]  # the function_call, then its token usage record
            assert last[0]["payload"]["type"] == "function_call" and not marker.exists()
            await pipeline.submit(Prompt(route="handoff", source="reviewer", target="codex", turn_id="h-1",
                                         hop=1, text=handoff))
            await aquiet_for(2.0, "the hand-off typed into the approval dialog")
            assert deliveries(events, "handoff") == [] and "HANDOFF" not in tmux_server.capture(codex)
            assert len(webhook.events("waiting")) == 1  # one episode, however many looks
            routes = tmp_path / "routes.yaml"
            routes.write_text(json.dumps({"version": 1, "tiles": {"codex": {"pane": codex,
                                                                            "agent": "codex"}}}))
            approved = await perform(Action("approve", "codex"), config_path=routes, tmux=tmux_server.tmux)
            assert approved.ok and "(keys Enter)" in approved.message, approved  # the person approves
            await until(lambda: deliveries(events, "handoff"), 60, "the hand-off, typed after the turn")
            assert [d.state for d in deliveries(events, "handoff")] == ["delivered"]
            assert marker.exists()
            await until(lambda: any(r.prompt == handoff for r in world.api.answers()), 30,
                        "the hand-off reaching the model as a prompt of its own")
            assert "approved" in tmux_server.capture(codex)
    finally:
        webhook.stop()
        marker.unlink(missing_ok=True)
    assert [e["message"] for e in webhook.events("waiting")] == ["codex is waiting: permission prompt"]


@pytest.mark.parametrize("size", ["short", "long"])
def test_real_codex_as_target_killed_between_paste_and_enter_takes_the_prompt_once(
        size: str, codex_world: CodexWorld, tmux_server: TmuxServer, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``baton run`` killed the moment the real Codex shows the hand-off in its composer — inline (short)
    or as ``[Pasted Content N chars]`` (over 1000 characters) — then started again: it recognises its own
    paste, presses Enter once, and the rollout holds the prompt exactly once
    (tests/support/crash_at_paste.py)."""
    world = codex_world
    monkeypatch.setenv("CODEX_HOME", str(world.home))  # where the daemon finds the rollouts
    [codex] = start_codex(tmux_server, world)
    marker = f"CODEX-{size.upper()}-{os.getpid()}"

    def draft() -> str:
        return composer_draft(tmux_server.run("capture-pane", "-p", "-e", "-J", "-t", codex)) or ""

    def holds_paste() -> bool:
        return draft().startswith("[Pasted Content") if size == "long" else marker in draft()

    def prompts() -> list[str]:
        return [item["content"][0]["text"] for path in world.home.glob("sessions/*/*/*/rollout-*.jsonl")
                for r in rollout_events(path) if r["payload"].get("type") == "item_completed"
                and (item := r["payload"]["item"])["type"] == "UserMessage"]

    note = crash_at_paste(tmux_server, tmp_path, {"pane": codex, "agent": "codex"},
                          LONG_TEMPLATE if size == "long" else SHORT_TEMPLATE, holds_paste, prompts, marker)
    assert note == "submitted a paste left by a crash"
