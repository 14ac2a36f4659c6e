"""Hand-off latency through the whole pipeline, and how it scales with the number of panes.

Measures, on real tmux panes running the demo agent (which keeps a transcript like Claude Code), the time
from the source's answer landing on disk (the transcript line's timestamp) to the prompt arriving in the
target agent (the target's own log of the message). Baseline: one pair of panes. Then 12 pairs (24 panes)
at once, in the same process. Prints both medians and their ratio.

Run: ``.venv/bin/python bench/bench_handoff.py [PAIRS] [TURNS]`` (needs tmux; its own socket and temp dirs).
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.engine.config import Config  # noqa: E402
from pipeline.engine.runtime import Pipeline  # noqa: E402
from pipeline.plugin.manager import load_registries  # noqa: E402
from pipeline.system.tmux import Tmux  # noqa: E402


def agent_cmd(name: str, log: Path, home: Path) -> str:
    return shlex.join(
        [
            "env",
            f"BATON_DEMO_HOME={home}",
            sys.executable,
            "-m",
            "plugins.demo.agent",
            "--name",
            name,
            "--role",
            "echo",
            "--work-s",
            "0.05",
            "--log",
            str(log),
        ]
    )


async def measure(pairs: int, turns: int, tmp: Path) -> list[float]:
    home = tmp / f"home-{pairs}"
    home.mkdir()
    os.environ["BATON_DEMO_HOME"] = str(home)
    tmux = Tmux(socket_name=f"baton-bench-{os.getpid()}-{pairs}", config_file="/dev/null")
    tiles, routes, sources, logs = {}, [], [], []
    try:
        for i in range(pairs):
            src = await tmux.new_session(
                f"p{i}", agent_cmd(f"s{i}", tmp / f"s{pairs}-{i}.jsonl", home), width=120, height=30
            )
            dst = await tmux.new_session(
                f"q{i}", agent_cmd(f"t{i}", tmp / f"t{pairs}-{i}.jsonl", home), width=120, height=30
            )
            tiles[f"s{i}"] = {"pane": src.pane_id, "agent": "demo"}
            tiles[f"t{i}"] = {"pane": dst.pane_id, "agent": "demo"}
            routes.append({"from": f"s{i}", "to": f"t{i}"})
            sources.append(src.pane_id)
            logs.append(tmp / f"t{pairs}-{i}.jsonl")
        await anyio.sleep(1.5)
        config = Config.model_validate({"version": 1, "tiles": tiles, "routes": routes})
        pipeline = Pipeline(config, load_registries(), tmux)
        latencies: list[float] = []
        async with anyio.create_task_group() as tg:
            await tg.start(pipeline.run)
            await anyio.sleep(1.0)
            for turn in range(turns):
                for i, pane in enumerate(sources):
                    await tmux.paste(pane, f"turn {turn} of pair {i}")
                    await tmux.send_keys(pane, "Enter")
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline and any(_count(log) <= turn for log in logs):
                    await anyio.sleep(0.05)
                await anyio.sleep(0.3)
            tg.cancel_scope.cancel()
        answers = {}
        for f in home.glob("*.jsonl"):
            for line in f.read_text().splitlines():
                r = json.loads(line)
                if r["type"] == "answer":  # the source's answer comes before the target's echo of it
                    answers[r["text"]] = min(r["at"], answers.get(r["text"], r["at"]))
        for log in logs:
            for line in log.read_text().splitlines():
                r = json.loads(line)
                if "message" in r and r["message"] in answers:
                    latencies.append((r["t"] - answers[r["message"]]) * 1000)
        return latencies
    finally:
        await tmux.kill_server()


def _count(log: Path) -> int:
    return sum(1 for line in log.read_text().splitlines() if '"message"' in line) if log.exists() else 0


async def main() -> None:
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    turns = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    with tempfile.TemporaryDirectory() as tmp:
        base = await measure(1, turns, Path(tmp))
        many = await measure(pairs, turns, Path(tmp))
    b, m = statistics.median(base), statistics.median(many)
    print(
        f"answer on disk -> prompt in target, 1 pair ({len(base)} hand-offs): median {b:.0f} ms, max "
        f"{max(base):.0f} ms"
    )
    print(f"answer on disk -> prompt in target, {pairs} pairs / {2 * pairs} panes ({len(many)} hand-offs): "
          f"median {m:.0f} ms, max {max(many):.0f} ms")
    print(f"ratio {pairs} pairs / 1 pair: {m / b:.2f}")


if __name__ == "__main__":
    anyio.run(main)
