"""The added latency of a hand-off between hosts (over NATS JetStream on loopback) against one on one host.

Same scene twice, on real tmux panes running the demo agent: answer on disk in the source's transcript ->
prompt in the target agent's own log. Same host: one pipeline with both tiles. Cross host: the source tile
on host ``alpha`` and the target on ``beta``, two pipelines (each with its own journal) joined by a real
nats-server started here on a free 127.0.0.1 port: detection, transform and publish on alpha; consume,
journal and dispatch on beta. Prints both medians and the difference (target: <= 5 ms p50 more).

Run: ``.venv/bin/python bench/bench_bus.py [TURNS]`` (needs tmux and the ``bus`` extra; temp dirs only).
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.engine.config import Config  # noqa: E402
from pipeline.engine.journal import Journal  # noqa: E402
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def measure(cross: bool, turns: int, tmp: Path) -> list[float]:
    home = tmp / f"home-{cross}"
    home.mkdir()
    os.environ["BATON_DEMO_HOME"] = str(home)
    tmux = Tmux(socket_name=f"baton-bench-bus-{os.getpid()}-{int(cross)}", config_file="/dev/null")
    log = tmp / f"t-{cross}.jsonl"
    try:
        src = await tmux.new_session(
            "s", agent_cmd("s", tmp / f"s-{cross}.jsonl", home), width=120, height=30
        )
        dst = await tmux.new_session("t", agent_cmd("t", log, home), width=120, height=30)
        hosts = ({"host": "alpha"}, {"host": "beta"}) if cross else ({}, {})
        config = Config.model_validate(
            {
                "version": 1,
                "routes": [{"from": "s", "to": "t"}],
                "tiles": {
                    "s": {"pane": src.pane_id, "agent": "demo", **hosts[0]},
                    "t": {"pane": dst.pane_id, "agent": "demo", **hosts[1]},
                },
            }
        )
        await anyio.sleep(1.5)
        pipelines = (
            [
                Pipeline(config, load_registries(), tmux, host=h, journal=Journal(tmp / f"{h}.sqlite3"))
                for h in ("alpha", "beta")
            ]
            if cross
            else [Pipeline(config, load_registries(), tmux)]
        )
        async with anyio.create_task_group() as tg:
            for p in pipelines:
                await tg.start(p.run)
            for p in pipelines:
                if p.bus is not None:
                    await p.bus.connected.wait()
            await anyio.sleep(1.0)
            for turn in range(turns):
                await tmux.paste(src.pane_id, f"turn {turn}")
                await tmux.send_keys(src.pane_id, "Enter")
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline and _count(log) <= turn:
                    await anyio.sleep(0.05)
                await anyio.sleep(0.3)
            tg.cancel_scope.cancel()
        answers = {}
        for f in home.glob("*.jsonl"):
            for line in f.read_text().splitlines():
                r = json.loads(line)
                if r["type"] == "answer":
                    answers[r["text"]] = min(r["at"], answers.get(r["text"], r["at"]))
        return [
            (r["t"] - answers[r["message"]]) * 1000
            for line in log.read_text().splitlines()
            if "message" in (r := json.loads(line)) and r["message"] in answers
        ]
    finally:
        await tmux.kill_server()


def _count(log: Path) -> int:
    return sum(1 for line in log.read_text().splitlines() if '"message"' in line) if log.exists() else 0


async def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        binary = str(Path(sysconfig.get_path("scripts")) / "nats-server")
        server = subprocess.Popen(
            [binary, "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", f"{tmp}/js"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.environ["BATON_BUS_URL"] = f"nats://127.0.0.1:{port}"
        try:
            same = await measure(False, turns, Path(tmp))
            cross = await measure(True, turns, Path(tmp))
        finally:
            server.terminate()
            server.wait()
    s, c = statistics.median(same), statistics.median(cross)
    print(f"same host  ({len(same)} hand-offs): p50 {s:.1f} ms, max {max(same):.1f} ms")
    print(f"cross host ({len(cross)} hand-offs, NATS on loopback): p50 {c:.1f} ms, max {max(cross):.1f} ms")
    print(f"added by the bus: p50 {c - s:+.1f} ms (target <= 5 ms)")


if __name__ == "__main__":
    anyio.run(main)
