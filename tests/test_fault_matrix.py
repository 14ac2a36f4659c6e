"""The fault matrix: `baton run` killed with SIGKILL around every turn end, for each adapter reading files —
as the source of the hand-offs, and as their target.

As a source: one test body, parametrized over the source agents of tests/support/fault_sources.py (Claude
Code, Codex, OpenCode, Gemini CLI, Copilot CLI, Qwen Code, pi and Cline stand-ins writing their files as the
recorded ones, and the demo agent). Each turn is begun, finished a random moment later, and the daemon is
killed at a random moment before, during or after that end, down for a while, and started again. What counts
is what reached the target (a demo agent's own log): every turn exactly once, and ``baton history`` has one
delivered hand-off for each. BATON_FAULT_TURNS (default 30) sets the turns, BATON_FAULT_SEED the seed
(printed, so that a failing run can be replayed).

As a target: the Claude Code, Codex, OpenCode, Gemini CLI, Copilot CLI, Qwen Code, pi and Cline stand-ins of
tests/fakes/agent_tui.py, which draw a long paste as their real agent's placeholder and keep it in their
input until Enter. Besides kills at random moments, the daemon dies in the window between a paste and
its Enter: started with ``BATON_CRASH_BEFORE_ENTER``, it kills itself once the paste shows in the input. What
counts is what the target took as prompts.
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.engine.crash_points import ENTER_ENV
from pipeline.engine.journal import Journal, default_journal_path
from tests.support.agents import messages, start_agent
from tests.support.daemons import wait_followed, write_config
from tests.support.exactly_once import each_once, history
from tests.support.fault_sources import SOURCES, DemoSource
from tests.support.polling import quiet_for, wait_for
from tests.support.standin_targets import StandinTarget
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow]


@pytest.mark.parametrize("kind", list(SOURCES))
def test_sigkill_around_each_turn_end_hands_every_turn_off_exactly_once(
    kind: str, tmux_server: TmuxServer, tmp_path: Path, daemon_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    turns = int(os.environ.get("BATON_FAULT_TURNS", "30"))
    seed = int(os.environ.get("BATON_FAULT_SEED") or random.randrange(1 << 32))
    print(f"{kind}: BATON_FAULT_SEED={seed}")
    rng = random.Random(seed)
    started = time.monotonic()
    source = SOURCES[kind](tmux_server, tmp_path)
    for key, value in source.env().items():
        monkeypatch.setenv(key, value)  # the daemon finds the source's files where it writes them
    blog = tmp_path / "b.jsonl"
    b = start_agent(tmux_server, blog, "b", work_s=0.05)
    config = write_config(
        tmp_path / "routes.yaml",
        tmux_server.socket,
        {"a": source.tile, "b": {"pane": b, "agent": "demo"}},
        [{"from": "a", "to": "b", "transform": {"type": "template", "template": "from a: {response}"}}],
    )
    daemon = daemon_factory(config)
    daemon.start()
    wait_followed(daemon, "a")  # the first run: what a did before is history, what it does next is news
    for i in range(turns):
        end = rng.uniform(0.05, 0.5)  # the answer lands this long after the prompt
        events = [(end, "finish")]
        if rng.random() < 0.6:  # killed before, during or after this turn's end
            events.append((max(0.0, end + rng.uniform(-0.5, 0.7)), "kill"))
        t0 = time.monotonic()
        source.begin(i)
        for at, what in sorted(events):
            time.sleep(max(0.0, t0 + at - time.monotonic()))  # shapes the scenario: the event's moment
            if what == "finish":
                source.finish(i)
            else:
                daemon.kill()
                time.sleep(rng.uniform(0.0, 0.8))  # shapes the scenario: down for a while, turns may finish
                daemon.start()
    expected = [f"from a: {answer}" for answer in source.expected(turns)]
    assert len(expected) == turns
    # every hand-off to arrive; if some never do, the report below says which (and the daemon's log)
    with contextlib.suppress(AssertionError):
        wait_for(lambda: len(messages(blog)) >= turns, timeout=60 + turns, what="every hand-off to arrive")
    quiet_for(1.5, "a repeated hand-off")
    assert daemon.stop() == 0
    report = each_once(f"fault matrix {kind}: turns={turns} kills={daemon.kills}", expected,
                       messages(blog), daemon, f"seed={seed} runtime={time.monotonic() - started:.0f}s")
    assert daemon.kills >= 3, f"the run should have been killed a few times: {report}"


@pytest.mark.parametrize("kind", list(SOURCES))
def test_a_turn_ended_while_down_is_handed_off_if_younger_than_catch_up_s_else_skipped(
    kind: str, tmux_server: TmuxServer, tmp_path: Path, daemon_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon started 10 s after a turn ended hands it off; a turn that ended more than ``catch_up_s``
    before the start is recorded as skipped, with the reason, in ``baton history``."""
    source = SOURCES[kind](tmux_server, tmp_path)
    for key, value in source.env().items():
        monkeypatch.setenv(key, value)  # the daemon finds the source's files where it writes them
    blog = tmp_path / "b.jsonl"
    b = start_agent(tmux_server, blog, "b", work_s=0.05)
    config = write_config(
        tmp_path / "routes.yaml",
        tmux_server.socket,
        {"a": source.tile, "b": {"pane": b, "agent": "demo"}},
        [{"from": "a", "to": "b"}],
        catch_up_s=15,
    )
    daemon = daemon_factory(config)
    daemon.start()
    wait_followed(daemon, "a")
    assert daemon.stop() == 0
    source.begin(0)
    source.finish(0)  # the old turn: it will be more than catch_up_s old when the daemon starts
    old_end = time.monotonic()
    time.sleep(6)  # shapes the scenario: the two turns end 6 s apart
    source.begin(1)
    source.finish(1)  # the recent one: 10 s old when the daemon starts
    time.sleep(max(0.0, old_end + 16 - time.monotonic()))  # shapes the scenario: the daemon starts 16 s on
    daemon.start()
    recent = source.expected(2)[1]
    wait_for(lambda: messages(blog), timeout=30, what="the catch-up hand-off")
    wait_for(lambda: len(Journal(default_journal_path()).history()) >= 2, what="the skipped turn recorded")
    quiet_for(1.0, "another hand-off (the old turn's)")
    assert daemon.stop() == 0
    assert messages(blog) == [recent]
    rows = [(h["state"], h["prompt"], h["note"]) for h in history()]
    assert [r[0] for r in rows] == ["skipped", "delivered"] and rows[1][1] == recent, rows
    assert "catch_up_s=15" in rows[0][2], rows
    shown = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "history"], capture_output=True, text=True
    ).stdout
    assert "skipped" in shown and "catch_up_s=15" in shown


#: the hand-off is long enough that every real agent draws it as a placeholder (docs/agent-versions.md)
PADDING = "\n".join(f"context {k}: what the reviewer should keep in mind about part {k} of the change"
                     for k in range(14))


def dies_at_paste(server: TmuxServer, pane: str, daemon, timeout: float = 15.0) -> bool:
    """Wait for ``daemon``, started with ``BATON_CRASH_BEFORE_ENTER``, to kill itself once a paste shows in
    the target's input, before its Enter (the Enter follows the paste's drawing within milliseconds: too soon
    for a kill from outside). True when it died so and the paste is on the screen (an agent's placeholder);
    False when it did not die within ``timeout`` (it is killed then)."""
    try:
        daemon.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        daemon.kill()
        return False
    daemon.kills += 1
    screen = server.capture(pane)
    # [Pasted …], Copilot's [Paste #K - N lines], pi's [paste #K …], Cline's [<its start>... Pasted +N lines]
    return "[Paste" in screen or "[paste #" in screen or "... Pasted +" in screen


def fault_schedule(rng: random.Random, turns: int) -> list[str]:
    """Each turn's fault, shuffled: about a third "paste" (killed between a paste and its Enter), a third
    "random" (killed around the turn's end), the rest "none". A fixed mix, not a draw per turn: with 30 draws
    a seed now and then gave only 2 kills at the paste, and the run proved less than it said."""
    third = round(turns * 0.35)
    schedule = ["paste"] * third + ["random"] * third + ["none"] * (turns - 2 * third)
    rng.shuffle(schedule)
    return schedule


@pytest.mark.parametrize("agent", ["claude", "codex", "opencode", "gemini", "copilot", "qwen", "pi", "cline"])
def test_sigkill_around_hand_offs_and_between_paste_and_enter_delivers_each_to_the_target_once(
    agent: str, tmux_server: TmuxServer, tmp_path: Path, daemon_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    turns = int(os.environ.get("BATON_FAULT_TURNS", "30"))
    seed = int(os.environ.get("BATON_FAULT_SEED") or random.randrange(1 << 32))
    print(f"target {agent}: BATON_FAULT_SEED={seed}")
    rng = random.Random(seed)
    started = time.monotonic()
    source = DemoSource(tmux_server, tmp_path)
    target = StandinTarget(tmux_server, tmp_path, agent, work_s=0.05)
    for key, value in target.env().items():
        monkeypatch.setenv(key, value)  # the daemon finds the target's files where the stand-in writes them
    template = "from a: {response}\n" + PADDING
    config = write_config(
        tmp_path / "routes.yaml",
        tmux_server.socket,
        {"a": source.tile, "b": target.tile},
        [{"from": "a", "to": "b", "transform": {"type": "template", "template": template}}],
    )
    daemon = daemon_factory(config)
    daemon.start()
    wait_followed(daemon, "a")
    at_paste = 0
    for i, fault in enumerate(fault_schedule(rng, turns)):
        source.begin(i)
        if fault == "paste":  # between the paste and its Enter: the daemon kills itself there
            daemon.kill()
            daemon.env = {ENTER_ENV: "1"}
            daemon.start()
            source.finish(i)
            at_paste += dies_at_paste(tmux_server, target.pane, daemon)
            daemon.env = {}
        elif fault == "random":  # at a random moment around the turn's end and its hand-off
            time.sleep(rng.uniform(0.0, 0.9))  # shapes the scenario: the moment of the kill
            daemon.kill()
            source.finish(i)
        else:
            source.finish(i)
            continue
        time.sleep(rng.uniform(0.0, 0.8))  # shapes the scenario: down for a while, turns may finish
        daemon.start()
    expected = [f"from a: {answer}\n{PADDING}" for answer in source.expected(turns)]
    assert len(expected) == turns
    with contextlib.suppress(AssertionError):
        wait_for(lambda: len(target.messages()) >= turns, timeout=60 + 2 * turns, what="every hand-off")
    quiet_for(1.5, "a repeated hand-off")
    assert daemon.stop() == 0
    head = f"fault matrix, target {agent}: turns={turns} kills={daemon.kills} at_paste={at_paste}"
    report = each_once(head, expected, target.messages(), daemon,
                       f"seed={seed} runtime={time.monotonic() - started:.0f}s")
    assert at_paste >= turns // 10, f"the run should have been killed between paste and Enter: {report}"
