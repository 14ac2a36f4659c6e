"""Hand-offs into real tmux panes: one message per prompt, never into a busy agent or a bare shell."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.engine.config import Tile
from pipeline.engine.context import (
    EngineContext,
    look_again,
    make_adapter,
    pane_lookups_shared,
    readiness_check,
)
from pipeline.engine.stages.dispatch import target_state
from pipeline.engine.stages.submit import type_prompt
from pipeline.plugin.events import Delivery, Prompt
from tests.support.agents import demo_agent_command, messages, read_log, start_agent
from tests.support.pipelines import REGISTRIES, first_look, make_config, running
from tests.support.polling import aquiet_for, until, wait_for
from tests.support.tmux import TmuxServer, each_write

pytestmark = [pytest.mark.tmux, pytest.mark.anyio]


async def test_multiline_prompt_arrives_as_one_message(tmux_server: TmuxServer, tmp_path: Path) -> None:
    log = tmp_path / "agent.jsonl"
    pane = start_agent(tmux_server, log)
    adapter = REGISTRIES.agents.get("demo")(
        EngineContext(name="t", tile=Tile(pane=pane, agent="demo"), tmux=tmux_server.tmux)
    )
    hostile = "first line\nsecond line\x1b[201~\n\x1b[31mthird\x1b[0m line\x07\x9b\x00\n\n"
    confirmed, pane_id = await type_prompt(adapter, hostile)
    assert confirmed and pane_id == pane
    await until(lambda: messages(log), what="the message")
    await aquiet_for(0.5, "a second message, if the prompt were split")
    assert messages(log) == ["first line\nsecond line\nthird line"]


async def test_resolve_targets_by_id_address_and_title(tmux_server: TmuxServer) -> None:
    pane = tmux_server.new_pane()
    tmux_server.run("select-pane", "-t", pane, "-T", "builder")
    tmux = tmux_server.tmux
    for target in (pane, "s1:0.0", "title:builder"):
        assert (await tmux.resolve(target)).pane_id == pane


async def test_busy_target_gets_the_prompt_only_once_idle(tmux_server: TmuxServer, tmp_path: Path) -> None:
    log = tmp_path / "target.jsonl"
    target = start_agent(tmux_server, log, work_s=2.0)
    config = make_config({"b": {"pane": target, "agent": "demo"}}, [])
    deliveries: list[Delivery] = []
    async with running(config, tmux_server, deliveries) as pipeline:
        for i in (1, 2, 3):
            await pipeline.submit(
                Prompt(route="test", source="you", target="b", text=f"prompt {i}", turn_id=f"t{i}", hop=0)
            )
        await until(lambda: len(deliveries) == 3, timeout=30, what="three deliveries")
    assert [d.state for d in deliveries] == ["delivered"] * 3
    assert messages(log) == ["prompt 1", "prompt 2", "prompt 3"]  # in order, each once
    assert [r for r in read_log(log) if r.get("event") == "input-while-busy"] == []


async def test_a_hand_off_queued_twice_or_again_once_delivered_is_typed_once(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    """Two recoveries of one hand-off after a crash (the crash-point sweep found a join's) queue its key
    twice: the target takes it once; queued again once delivered (the journal says so), it is not typed."""
    log = tmp_path / "target.jsonl"
    target = start_agent(tmux_server, log, work_s=0.05)
    config = make_config({"b": {"pane": target, "agent": "demo"}}, [])
    deliveries: list[Delivery] = []
    prompt = Prompt(route="r", source="a", target="b", text="the one hand-off", turn_id="t1", hop=1)
    async with running(config, tmux_server, deliveries) as pipeline:
        assert pipeline.journal.record_incoming(prompt)  # journaled, as a recovered hand-off is
        await pipeline.submit(prompt)
        await pipeline.submit(prompt)
        await until(lambda: deliveries, what="the delivery")
        await until(lambda: pipeline.journal.handoff(prompt.key).state == "delivered", what="it journaled")
        await pipeline.submit(prompt)
        await aquiet_for(1.0, "a second or third copy")
    assert messages(log) == ["the one hand-off"]
    assert [d.state for d in deliveries] == ["delivered"]


async def test_shell_tile_output_is_handed_to_another_pane(tmux_server: TmuxServer, tmp_path: Path) -> None:
    log = tmp_path / "target.jsonl"
    shell = tmux_server.new_pane()
    wait_for(lambda: "$" in tmux_server.capture(shell), what="the shell prompt")
    target = start_agent(tmux_server, log)
    config = make_config(
        {"sh": {"pane": shell, "agent": "shell"}, "agent": {"pane": target, "agent": "demo"}},
        [
            {
                "from": "sh",
                "to": "agent",
                "transform": {"type": "template", "template": "Output of {source}:\n{response}"},
            }
        ],
    )
    deliveries: list[Delivery] = []
    async with running(config, tmux_server, deliveries) as pipeline:
        await until(lambda: first_look(pipeline, "sh"), what="the shell tile to learn its prompt")
        tmux_server.type(shell, "printf 'alpha\\nbeta gamma\\n'")
        await until(lambda: deliveries, what="the hand-off")
        await aquiet_for(1.0, "a second hand-off")
    assert messages(log) == ["Output of sh:\nalpha\nbeta gamma"]
    assert len(deliveries) == 1 and deliveries[0].state == "delivered"


async def test_failed_command_and_quick_commands_are_turns_too(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    log = tmp_path / "target.jsonl"
    shell = tmux_server.new_pane()
    wait_for(lambda: "$" in tmux_server.capture(shell), what="the shell prompt")
    target = start_agent(tmux_server, log, work_s=0.1)
    config = make_config(
        {"sh": {"pane": shell, "agent": "shell"}, "agent": {"pane": target, "agent": "demo"}},
        [{"from": "sh", "to": "agent"}],
    )
    async with running(config, tmux_server) as pipeline:
        await until(lambda: first_look(pipeline, "sh"), what="the shell tile to learn its prompt")
        tmux_server.type(shell, "echo one")
        await until(lambda: len(messages(log)) == 1, what="first hand-off")
        tmux_server.type(shell, "ls /nonexistent-dir-for-test")
        await until(lambda: len(messages(log)) == 2, what="second hand-off")
        tmux_server.type(shell, "sleep 0.6; echo slow")
        await until(lambda: len(messages(log)) == 3, what="third hand-off")
    got = messages(log)
    assert got[0] == "one"
    assert "nonexistent-dir-for-test" in got[1] and "No such file" in got[1]
    assert got[2] == "slow"


async def test_bare_shell_where_agent_declared_gets_nothing_and_handoff_is_kept(
        tmux_server: TmuxServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = tmp_path / "target.jsonl"
    shell = tmux_server.new_pane()
    bare = tmux_server.new_pane()  # declared as a demo agent, but only bash runs there
    wait_for(lambda: "$" in tmux_server.capture(shell) and "$" in tmux_server.capture(bare), what="prompts")
    config = make_config({"sh": {"pane": shell, "agent": "shell"}, "agent": {"pane": bare, "agent": "demo"}},
                         [{"from": "sh", "to": "agent"}], give_up_s=120)
    deliveries: list[Delivery] = []
    caplog.set_level("INFO", logger="batonpass")
    async with running(config, tmux_server, deliveries) as pipeline:
        await until(lambda: first_look(pipeline, "sh"), what="the shell tile to learn its prompt")
        tmux_server.type(shell, "echo 'rm -rf important'")
        await until(lambda: "shows no demo agent" in caplog.text, what="the hand-off to be reported as kept")
        await aquiet_for(1.5, "a prompt typed into the bare shell")
        screen = tmux_server.capture(bare)
        assert "important" not in screen, "a prompt was typed into a bare shell"
        assert deliveries == []
        # the agent comes back: the kept hand-off is delivered, once
        tmux_server.type(bare, demo_agent_command(log=log))
        await until(lambda: deliveries, timeout=40, what="the kept hand-off to be delivered")
        await aquiet_for(0.5, "the kept hand-off typed twice")
    assert messages(log) == ["rm -rf important"]
    assert deliveries[0].state == "delivered" and deliveries[0].attempts >= 2
    assert "kept" in caplog.text


async def test_gone_pane_gives_up_as_failed_with_reason(tmux_server: TmuxServer, tmp_path: Path) -> None:
    shell = tmux_server.new_pane()
    wait_for(lambda: "$" in tmux_server.capture(shell))
    config = make_config(
        {"sh": {"pane": shell, "agent": "shell"}, "agent": {"pane": "%999", "agent": "demo"}},
        [{"from": "sh", "to": "agent"}],
        give_up_s=1.5,
    )
    deliveries: list[Delivery] = []
    async with running(config, tmux_server, deliveries) as pipeline:
        await until(lambda: first_look(pipeline, "sh"), what="the shell tile to learn its prompt")
        tmux_server.type(shell, "echo hello")
        await until(lambda: deliveries, what="the failed delivery")
    assert deliveries[0].state == "failed"
    assert "%999" in deliveries[0].error and "gone" in deliveries[0].error


def test_send_command_refuses_a_bare_shell(tmux_server: TmuxServer, tmp_path: Path) -> None:
    import subprocess
    import sys

    bare = tmux_server.new_pane()
    wait_for(lambda: "$" in tmux_server.capture(bare))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline.cli",
            "send",
            "-L",
            tmux_server.socket,
            "--agent",
            "demo",
            bare,
            "echo PWNED",
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1 and "no demo agent runs there" in result.stderr, result.stderr
    assert "PWNED" not in tmux_server.capture(bare)
    log = tmp_path / "a.jsonl"
    agent = start_agent(tmux_server, log)
    result = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "send", "-L", tmux_server.socket, agent, "-"],
        input="from\nstdin\x1b[201~",
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    wait_for(lambda: messages(log), what="the sent message")
    assert messages(log) == ["from\nstdin"]
    assert json.loads(log.read_text().splitlines()[0])["turn"] == 1


async def test_the_first_readiness_check_of_a_resolved_pane_brings_the_screen_its_adapter_reads(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    """The first hand-off to a tile asks for the pane and the screen in one write too: the adapter says
    which screen its readiness check reads (``readiness_screen``); before, that first check learnt it by
    asking, a second round trip on the way to the paste."""
    pane = start_agent(tmux_server, tmp_path / "agent.jsonl")
    ctx = EngineContext(name="t", tile=Tile(pane=pane, agent="demo"), tmux=tmux_server.tmux)
    adapter = make_adapter(REGISTRIES.agents.get("demo"), ctx)  # as the engine makes it
    await ctx.pane()  # resolved, as a follower does it long before the first hand-off
    writes: list[list[str]] = []
    each_write(tmux_server, writes.append)
    with pane_lookups_shared(), readiness_check():
        assert await target_state(adapter) == "ready"
    assert writes == [["display-message", "capture-pane"]]
    assert REGISTRIES.agents.get("codex").readiness_screen == (True, None, None)  # Codex reads the colours


async def test_a_readiness_check_asks_tmux_for_pane_and_screen_in_one_round_trip(
    tmux_server: TmuxServer, tmp_path: Path
) -> None:
    """The screen a target's readiness check reads comes in the pane lookup's round trip (one control-mode
    write instead of two between an answer and its paste), and is of that look: a draft typed after one
    check is seen by the next."""
    pane = start_agent(tmux_server, tmp_path / "agent.jsonl")
    ctx = EngineContext(name="t", tile=Tile(pane=pane, agent="demo"), tmux=tmux_server.tmux)
    adapter = REGISTRIES.agents.get("demo")(ctx)
    writes: list[list[str]] = []
    each_write(tmux_server, writes.append)

    async def look() -> str:
        look_again()
        writes.clear()
        with readiness_check():
            return await target_state(adapter)

    with pane_lookups_shared():
        assert await look() == "ready"  # the first look resolves the pane, then learns what it captures
        assert await look() == "ready"
        assert writes == [["display-message", "capture-pane"]]
        tmux_server.run("send-keys", "-t", pane, "-l", "half a thought")
        await until(lambda: "half a thought" in tmux_server.capture(pane), what="the typed draft")
        assert await look() == "draft"
        assert len(writes) == 1
    writes.clear()
    assert await target_state(adapter) == "draft"  # outside a hand-off: nothing shared between the asks,
    # but a capture brings its pane's lookup in its round trip
    assert ["display-message", "capture-pane"] in writes and ["capture-pane"] not in writes
