"""A fan-out to 10 targets and a join of 10 answers, end to end, against a plain hand-off in the same run.

The issue's claim (issue #40): both stay within the per-hand-off figures x1.3. Measured as
bench/bench_handoff.py measures a hand-off — real tmux panes running the demo agent (its transcript's
answer lines carry their time), the real pipeline, from the answer on disk to the prompt in the target
agent's own log — for three routes.yaml, one after the other in one process:

1. plain: ``s -> t``; each hand-off's time;
2. fan-out: ``s -> [t0 … t9]``; each of the 10 hand-offs' time (the source's answer to each target's
   prompt), and the last of each turn's 10;
3. join: ``[s0 … s9] -> t`` (``join: all``); all ten sources are given a prompt at once, and the hand-off's
   time runs from the last of the ten answers (the one that completes the group) to the joined prompt.

Prints the medians and their ratios to the plain one. Run: ``.venv/bin/python bench/bench_workflow.py
[TURNS]`` (~1 min with 8 turns; needs tmux; its own socket and temp dirs).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_handoff import _count, agent_cmd  # noqa: E402

from pipeline.engine.config import Config  # noqa: E402
from pipeline.engine.runtime import Pipeline  # noqa: E402
from pipeline.plugin.manager import load_registries  # noqa: E402
from pipeline.system.tmux import Tmux  # noqa: E402

WIDE = 10


def answers_at(home: Path) -> dict[str, float]:
    """Every answer the demo agents wrote, its text -> when it landed on disk (the first, if twice)."""
    answers: dict[str, float] = {}
    for f in home.glob("*.jsonl"):
        for line in f.read_text().splitlines():
            r = json.loads(line)
            if r["type"] == "answer":
                answers[r["text"]] = min(r["at"], answers.get(r["text"], r["at"]))
    return answers


def received(log: Path) -> list[tuple[str, float]]:
    """(message, when it arrived) of every prompt a demo agent took."""
    if not log.exists():
        return []
    return [(r["message"], r["t"]) for r in map(json.loads, log.read_text().splitlines()) if "message" in r]


class Scene:
    """Demo agents in panes of a private tmux server, the pipeline over ``routes``."""

    def __init__(self, name: str, tmp: Path) -> None:
        self.tmp, self.home = tmp / name, tmp / name / "home"
        self.home.mkdir(parents=True)
        os.environ["BATON_DEMO_HOME"] = str(self.home)
        self.tmux = Tmux(socket_name=f"baton-bench-{os.getpid()}-{name}", config_file="/dev/null")
        self.panes: dict[str, str] = {}

    def log(self, tile: str) -> Path:
        return self.tmp / f"{tile}.jsonl"

    async def agents(self, *names: str) -> None:
        for name in names:
            pane = await self.tmux.new_session(name, agent_cmd(name, self.log(name), self.home), width=120,
                                               height=30)
            self.panes[name] = pane.pane_id
        await anyio.sleep(1.5)

    async def run(self, routes: list[dict[str, Any]], turns: int, sources: list[str],
                  targets: list[str]) -> None:
        """``turns`` rounds: each source given a prompt at once; the next round once every target took
        this round's."""
        tiles = {name: {"pane": pane, "agent": "demo"} for name, pane in self.panes.items()}
        config = Config.model_validate({"version": 1, "routes": routes, "settings": {"max_hops": 1},
                                        "tiles": tiles})
        pipeline = Pipeline(config, load_registries(), self.tmux)
        async with anyio.create_task_group() as tg:
            await tg.start(pipeline.run)
            await anyio.sleep(1.0)
            for turn in range(turns):
                for source in sources:
                    await self.tmux.paste(self.panes[source], f"turn {turn} from {source}")
                    await self.tmux.send_keys(self.panes[source], "Enter")
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline and any(_count(self.log(t)) <= turn for t in targets):
                    await anyio.sleep(0.05)
                await anyio.sleep(0.3)
            tg.cancel_scope.cancel()

    async def close(self) -> None:
        await self.tmux.kill_server()


async def plain(tmp: Path, turns: int) -> list[float]:
    scene = Scene("plain", tmp)
    try:
        await scene.agents("s", "t")
        await scene.run([{"from": "s", "to": "t"}], turns, ["s"], ["t"])
        answers = answers_at(scene.home)
        return [(at - answers[m]) * 1000 for m, at in received(scene.log("t")) if m in answers]
    finally:
        await scene.close()


async def fan_out(tmp: Path, turns: int) -> tuple[list[float], list[float]]:
    """(every hand-off's time, the last target's per turn)."""
    scene = Scene("fanout", tmp)
    targets = [f"t{i}" for i in range(WIDE)]
    try:
        await scene.agents("s", *targets)
        await scene.run([{"name": "wide", "from": "s", "to": targets}], turns, ["s"], targets)
        answers = answers_at(scene.home)
        each: list[float] = []
        last: dict[str, float] = {}
        for t in targets:
            for m, at in received(scene.log(t)):
                if m in answers:
                    each.append((at - answers[m]) * 1000)
                    last[m] = max(last.get(m, 0.0), each[-1])
        return each, list(last.values())
    finally:
        await scene.close()


async def join(tmp: Path, turns: int) -> list[float]:
    scene = Scene("join", tmp)
    sources = [f"s{i}" for i in range(WIDE)]
    try:
        await scene.agents(*sources, "t")
        await scene.run([{"name": "all", "from": sources, "to": "t", "join": "all", "transform": "raw"}],
                        turns, sources, ["t"])
        answers = answers_at(scene.home)
        times = []
        for message, at in received(scene.log("t")):
            # the sources' answers it holds (not the target's own echo of an earlier joined prompt)
            group = [when for text, when in answers.items() if text.startswith("turn ") and text in message]
            if len(group) == WIDE:
                times.append((at - max(group)) * 1000)
        return times
    finally:
        await scene.close()


def line(what: str, times: list[float], base: float | None = None) -> str:
    median = statistics.median(times)
    ratio = f", x{median / base:.2f} the plain hand-off" if base else ""
    return f"{what} ({len(times)} hand-offs): median {median:.0f} ms, max {max(times):.0f} ms{ratio}"


async def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    with tempfile.TemporaryDirectory() as tmp:
        base = await plain(Path(tmp), turns)
        each, last = await fan_out(Path(tmp), turns)
        joined = await join(Path(tmp), turns)
    b = statistics.median(base)
    print("answer on disk -> prompt in the target's agent, demo agents on real tmux")
    print(line("plain s -> t", base))
    print(line(f"fan-out s -> {WIDE} targets, each", each, b))
    print(line(f"fan-out s -> {WIDE} targets, the last of each turn", last, b))
    print(line(f"join of {WIDE}, the last answer -> the joined prompt", joined, b))


if __name__ == "__main__":
    anyio.run(main)
