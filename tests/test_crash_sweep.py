"""The crash-point sweep (issue #40): every journal write of a hand-off's life is a crash point.

``baton run`` with ``BATON_CRASH_AFTER_WRITES=N`` kills itself (SIGKILL, from inside) right after its Nth
committed journal write (:mod:`pipeline.engine.crash_points`). For each scenario — one routes.yaml between
demo agents and one expectation — a clean run counts the writes W, then the scenario runs once per N in
1..W: the daemon dies at write N, is started again without the switch, and once everything settled each tile
must have taken each prompt meant for it exactly once and nothing else (tests/support/crash_sweep.py).

CI sweeps every N of the fan-out, and of the scenarios whose engine code is on main (a join, a gate, a
choice); ``BATON_SWEEP_ALL=1`` sweeps the small scenarios (a single route) too, and ``BATON_SWEEP_ROUNDS=K``
runs each crash point K times (the order of two targets' writes varies from run to run).
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

from pipeline.engine.crash_points import COUNT_ENV, CRASH_ENV
from pipeline.engine.journal import STATES
from plugins.transforms.choose import TOOL
from tests.fakes.anthropic_api import Reply
from tests.support.crash_sweep import TASK, Run, Scenario, Sweep
from tests.support.exactly_once import Holding, Want
from tests.support.tmux import TmuxServer

pytestmark = [pytest.mark.tmux, pytest.mark.slow]


def answer(answers: Mapping[str, list[str]], tile: str, k: int = 0) -> str:
    """``tile``'s answer ``k``, or a text no prompt holds while it has not answered yet."""
    got = answers.get(tile, [])
    return got[k] if len(got) > k else f"({tile} has not answered {k} yet)"


#: each target's prompt names the target: a prompt typed into the wrong tile is stray there
PER_TARGET = {"type": "template", "template": "to {target}: {response}"}
#: only the person's task fans out (the coder's answer to the joined reviews does not start another round)
FROM_TASK = f'answering "{TASK}'


def route_expect(answers: Mapping[str, list[str]]) -> dict[str, list[Want]]:
    return {"a": [TASK], "b": [f"to b: {answer(answers, 'a')}"]}


def fan_out_expect(answers: Mapping[str, list[str]]) -> dict[str, list[Want]]:
    a = answer(answers, "a")
    return {"a": [TASK], "b": [f"to b: {a}"], "c": [f"to c: {a}"]}


def join_expect(answers: Mapping[str, list[str]]) -> dict[str, list[Want]]:
    joined = Holding(("The reviews:", answer(answers, "b"), answer(answers, "c")))
    return {**fan_out_expect(answers), "a": [TASK, joined]}


def pass_when_awaiting(run: Run) -> None:
    """The person: once the gated hand-off awaits (in the journal, whether the daemon lives or not),
    ``baton pass KEY``."""
    key = str(run.until(lambda: next((h.key for h in run.journal.history() if h.state == "awaiting"), None),
                        what="the hand-off awaiting a person"))
    env = {**os.environ, "XDG_STATE_HOME": str(run.state)}
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", "pass", key, "-c",
                           str(run.folder / "routes.yaml")], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr


#: the prompt the (fake) model writes for the tile it picks, c
PICKED = "c: review the change for its security, please."


def has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


REVIEWERS = {"a": "writer", "b": "reviewer", "c": "reviewer"}
SCENARIOS = {
    "route": Scenario("route", {"a": "writer", "b": "reviewer"},
                      [{"name": "review", "from": "a", "to": "b", "transform": PER_TARGET}], route_expect),
    "fan-out": Scenario("fan-out", REVIEWERS,
                        [{"name": "review", "from": "a", "to": ["b", "c"], "transform": PER_TARGET}],
                        fan_out_expect),
    "fan-out+join": Scenario("fan-out+join", REVIEWERS, [
        {"name": "review", "from": "a", "to": ["b", "c"], "match": FROM_TASK, "transform": PER_TARGET},
        {"name": "verdicts", "from": ["b", "c"], "join": "all", "to": "a",
         "transform": {"type": "template", "template": "The reviews:\n\n{responses}"}}], join_expect),
    "choose": Scenario("choose", REVIEWERS, [
        {"name": "dispatch", "from": "a", "to": {"choose": ["b", "c"], "default": "b"},
         "transform": {"type": "ai-routing", "instructions": "Send each task to the reviewer that fits."}}],
        lambda answers: {"a": [TASK], "b": [], "c": [PICKED]},
        settings={"llm": {"model": "claude-sweep", "timeout_s": 20}}),
    "gate": Scenario("gate", {"a": "writer", "b": "reviewer"},
                     [{"name": "review", "from": "a", "to": "b", "gate": "person", "transform": PER_TARGET}],
                     route_expect, person=pass_when_awaiting),
}
#: what each scenario needs on main, and whether it is there
NEEDS = {
    "fan-out+join": ("the join on main (branch wf-join)", has_module("pipeline.engine.stages.join")),
    "gate": ("the gate on main (branch wf-gate: the awaiting state, baton pass)", "awaiting" in STATES),
}
#: swept in CI; the rest with BATON_SWEEP_ALL=1 (what they cover, the fan-out covers twice over)
SMALL = {"route"}
#: the scenarios whose sweep in CI starts at write 1: the daemon's start-up writes (the journal's pruning,
#: the tiles' marks) are the same in every scenario, so the others start at their first hand-off write
START_UP = {"fan-out"}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_a_crash_after_any_journal_write_still_hands_each_prompt_over_exactly_once(
    name: str, tmux_server: TmuxServer, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    need, there = NEEDS.get(name, ("", True))
    if not there:
        pytest.skip(f"needs {need}")
    every = bool(os.environ.get("BATON_SWEEP_ALL"))
    if name in SMALL and not every:
        pytest.skip("a small scenario: BATON_SWEEP_ALL=1 sweeps it")
    if name == "choose":  # the fake Messages API picks c, by the forced tool call, every time it is asked
        request.getfixturevalue("anthropic_api").default = Reply(
            tool={"name": TOOL, "input": {"target": "c", "prompt": PICKED, "why": "it is security work"}})
    sweep = Sweep(tmux_server, tmp_path, SCENARIOS[name])
    writes, start_up = sweep.crash_points()
    first = 1 if every or name in START_UP else start_up + 1
    rounds = int(os.environ.get("BATON_SWEEP_ROUNDS", "1"))
    failures = sweep.sweep([n for n in range(first, writes + 1) for _ in range(rounds)])
    per_run = sum(sweep.seconds) / len(sweep.seconds)
    report = (f"crash sweep {name}: writes {first}..{writes} ({start_up} at start-up) x {rounds}, "
              f"{len(failures)} failed; {per_run:.1f}s per run, {sum(sweep.seconds):.0f}s in all")
    print(report)
    assert not failures, "\n".join([report, *failures])


def test_the_switch_kills_the_process_right_after_its_nth_journal_write(tmp_path: Path) -> None:
    """Three writes asked for, the switch at two: the process dies by SIGKILL, the journal holds the first
    two writes and not the third, and the count names each write."""
    script = (
        "from pipeline.engine.journal import Journal\n"
        f"j = Journal({str(tmp_path / 'j.sqlite3')!r})\n"
        "j.push_hop('a', 1)\n"
        "j.mark_followed(['a', 'b'], 5.0)\n"
        "j.push_hop('c', 3)\n"
    )
    env = {**os.environ, CRASH_ENV: "2", COUNT_ENV: str(tmp_path / "writes.tsv")}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert (tmp_path / "writes.tsv").read_text().splitlines() == [
        "1\tinsert hops a", "2\tinsert tiles a + insert tiles b"]
    from pipeline.engine.journal import Journal

    journal = Journal(tmp_path / "j.sqlite3")
    assert journal.followed_until("b") == 5.0
    assert journal.pop_hop("a") == 1 and journal.pop_hop("c") is None
