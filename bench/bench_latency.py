"""Hand-off latency: the answer's last line on disk → the paste starts in the target pane.

Real tmux panes run the Claude Code stand-in (``bench/claude_standin.py``: a process named ``claude`` that
writes its session file and transcript as Claude Code 2.1.x does) or the Codex one
(``bench/codex_standin.py``: a process named ``codex`` writing its rollout as 0.171 does, ``task_complete`` at
the end of a turn;
``BENCH_AGENTS=claude,codex``, both by default). Each source answers turns of its own at
random moments (one every ~0.7 s, ±20 %, or slower so that all together answer at most 10 turns a
second), independently of the others; the pipeline (``Pipeline`` with
the ``claude`` adapter, in this process) hands each answer to its target. The source logs when its end-of-turn
lines were written, the target when the first byte of the bracketed paste reached it; the difference is one
hand-off's latency (same clock, same machine).

Each configuration (1 pair, 10 pairs, 50 with ``BENCH_50=1``) gets >= ``BENCH_HANDOFFS`` (100) hand-offs, with
tmux reached over control mode and, as the baseline in the same process, over one subprocess per command
(``BENCH_MODES=control,subprocess``; a build without control mode runs subprocesses only). Printed: p50, p99
and max per configuration, and the ratios N pairs / 1 pair and control / subprocess.

The pipeline keeps its hand-off journal on disk (SQLite in the run's temp folder), as ``baton run`` does;
``BENCH_JOURNAL=memory`` uses the in-memory one of the tests. ``BENCH_SIZES=1,50`` runs only those sizes;
``BENCH_RATE=1.43`` makes all sources together answer that many turns a second whatever their number (one
pair's own rate: then 50 pairs differ from one by their number of tiles alone); ``BENCH_TRACE=1`` prints, per
configuration, the time each step of a hand-off took
(``bench/latency_trace.py``: wrappers installed in this process only). Each configuration's line also gives
the CPU time this process (the pipeline) and the tmux server spent per hand-off while the turns ran, and
for several pairs the p50 of each pair's first hand-off apart from the others'.
``BENCH_LOAD=2`` runs that many busy loops beside the whole run (other work taking the cores);
``BENCH_PIPELINE_NICE=-10`` gives the pipeline's thread that nice value (lowering it needs privilege),
and the control-mode ``tmux`` client it starts with it, to see whether a figure is the
pipeline waiting for a core.

Run: ``.venv/bin/python bench/bench_latency.py`` (needs tmux; its own sockets and temp dirs; ~8 min).
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.engine.config import Config  # noqa: E402
from pipeline.engine.journal import MEMORY, Journal  # noqa: E402
from pipeline.engine.runtime import Pipeline  # noqa: E402
from pipeline.plugin.manager import load_registries  # noqa: E402
from pipeline.system.tmux import Tmux  # noqa: E402

TRACE = bool(os.environ.get("BENCH_TRACE"))
if TRACE:  # where each hand-off's time goes (bench-only wrappers, see bench/latency_trace.py)
    sys.path.insert(0, str(ROOT / "bench"))
    import latency_trace  # noqa: E402

#: the stand-in of each agent, and the environment variable naming its home folder
STANDINS = {"claude": (ROOT / "bench" / "claude_standin.py", "CLAUDE_CONFIG_DIR"),
            "codex": (ROOT / "bench" / "codex_standin.py", "CODEX_HOME")}
EVERY_S = 0.7
#: all sources together answer at most this many turns a second: what grows is the number of tiles, not the
#: load (50 pairs at one answer each 0.7 s would be 70 hand-offs a second, a throughput test)
MAX_RATE = 10.0
#: BENCH_RATE, BENCH_PIPELINE_NICE (see above): read once
RATE = float(os.environ["BENCH_RATE"]) if os.environ.get("BENCH_RATE") else None
PIPELINE_NICE = int(os.environ["BENCH_PIPELINE_NICE"]) if os.environ.get("BENCH_PIPELINE_NICE") else None


class Followed(logging.Handler):
    """Counts the tiles the pipeline follows (its "following ..." log lines): the turns start after."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.tiles: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg.startswith(("%s: following", "%s: codex rollout")):
            self.tiles.add(str(record.args[0]) if isinstance(record.args, tuple) else "")


def standin(agent: str, name: str, log: Path, home: Path, *extra: str) -> str:
    script, variable = STANDINS[agent]
    return shlex.join(["env", f"{variable}={home}", sys.executable, str(script), "--name", name,
                       "--log", str(log), *extra])


def make_tmux(name: str, mode: str) -> Tmux:
    if "control" in inspect.signature(Tmux).parameters:
        return Tmux(socket_name=name, config_file="/dev/null", control=mode == "control")  # type: ignore[call-arg]
    return Tmux(socket_name=name, config_file="/dev/null")


async def measure(pairs: int, handoffs: int, mode: str, tmp: Path, agent: str = "claude") -> list[float]:
    """Latencies (ms) of ``pairs`` independent source → target hand-offs, >= ``handoffs`` in all."""
    turns = math.ceil(handoffs / pairs)
    every = max(EVERY_S, pairs / MAX_RATE)
    if RATE is not None:  # all sources together, whatever their number
        every = pairs / RATE
    work = tmp / f"{agent}-{mode}-{pairs}"
    config = work / agent
    config.mkdir(parents=True)
    tmux = make_tmux(f"baton-bench-{os.getpid()}-{agent}-{mode}-{pairs}", mode)
    tiles: dict[str, dict[str, str]] = {}
    routes, sources, target_logs, source_logs = [], [], [], []
    try:
        for i in range(pairs):
            cwd = work / f"proj{i}"
            cwd.mkdir()
            src_log, dst_log = work / f"s{i}.jsonl", work / f"t{i}.jsonl"
            src = await tmux.new_session(f"s{i}", standin(agent, f"s{i}", src_log, config, "--auto",
                                                          str(turns), "--every", str(every)),
                                         cwd=str(cwd), width=100, height=30)
            dst = await tmux.new_session(f"t{i}", standin(agent, f"t{i}", dst_log, config, "--work-s",
                                                          "0.02"), cwd=str(cwd), width=100, height=30)
            tiles[f"s{i}"] = {"pane": src.pane_id, "agent": agent}
            tiles[f"t{i}"] = {"pane": dst.pane_id, "agent": agent}
            routes.append({"from": f"s{i}", "to": f"t{i}"})
            sources.append(src.pane_id)
            target_logs.append(dst_log)
            source_logs.append(src_log)
        cfg = Config.model_validate({"version": 1, "tiles": tiles, "routes": routes})
        # the journal on disk, as `baton run` keeps it (BENCH_JOURNAL=memory: the in-memory one of tests)
        journal = Journal(MEMORY if os.environ.get("BENCH_JOURNAL") == "memory" else work / "journal.db")
        pipeline = Pipeline(cfg, load_registries(), tmux, journal=journal)
        followed = Followed()
        logger = logging.getLogger("batonpass")
        logger.addHandler(followed)
        level = logger.level
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)
        if PIPELINE_NICE is not None:  # this thread only (Linux): the sessions' processes keep 0
            os.setpriority(os.PRIO_PROCESS, 0, PIPELINE_NICE)
        async with anyio.create_task_group() as tg:
            await tg.start(pipeline.run)
            with anyio.fail_after(60):  # every tile followed (its files resolved) before the first turn
                while len(followed.tiles) < 2 * pairs:
                    await anyio.sleep(0.1)
            logger.removeHandler(followed)
            logger.setLevel(level)
            await anyio.sleep(0.5)
            cpu = CpuUse(tmux)
            for pane in sources:
                await tmux.send_keys(pane, "Enter")  # an empty line starts the source's own turns
            deadline = time.monotonic() + turns * every * 1.6 + 30
            arrived = lambda: sum(_count(log, "paste") for log in target_logs)  # noqa: E731
            while time.monotonic() < deadline and arrived() < pairs * turns:
                await anyio.sleep(2)  # reading 100 logs takes the pipeline's thread ~3 ms: seldom
            CPU[(agent, mode, pairs)] = cpu.per(max(arrived(), 1))
            tg.cancel_scope.cancel()
        answers = {r["text"]: r["t"] for log in source_logs for r in _records(log) if r["event"] == "answer"}
        latencies, pastes, firsts, others = [], {}, [], []
        for log in target_logs:
            for r in _records(log):
                text = str(r["text"]).strip()
                if r["event"] == "paste" and text in answers:
                    latencies.append((r["t"] - answers[text]) * 1000)
                    pastes[text] = r["t"]
                    # each pair's first hand-off (its target's first readiness look) apart from the others
                    (firsts if text.startswith("answer 1 of ") else others).append(latencies[-1])
        if pairs > 1 and firsts and others:
            print(f"  {pairs} pairs: p50 of each pair's first hand-off {statistics.median(firsts):.1f} ms, "
                  f"of the others {statistics.median(others):.1f} ms", flush=True)
        if TRACE:
            folders = {text: f"proj{text.rsplit(' s', 1)[1]}/" for text in answers}
            latency_trace.join(answers, folders, pastes)
        if len(latencies) < pairs * turns:
            print(f"  ! {mode}, {pairs} pairs: only {len(latencies)} of {pairs * turns} hand-offs arrived",
                  file=sys.stderr)
        return latencies
    finally:
        if PIPELINE_NICE is not None:
            os.setpriority(os.PRIO_PROCESS, 0, 0)  # the next configuration's tmux server starts from here
        await tmux.kill_server()


#: CPU ms per hand-off while the turns ran, per configuration: this process (the pipeline) and the tmux
#: server (the control-mode client hands its pipes to the server: it relays nothing, and uses no CPU)
CPU: dict[tuple[str, str, int], tuple[float, float]] = {}


class CpuUse:
    """CPU time used from now on by this process and by the tmux server."""

    def __init__(self, tmux: Tmux) -> None:
        self.server = psutil.Process(int(tmux.run_sync("display-message", "-p", "#{pid}").strip()))
        self.start = self._now()

    def _now(self) -> tuple[float, float]:
        times = self.server.cpu_times()
        return time.process_time(), times.user + times.system

    def per(self, handoffs: int) -> tuple[float, float]:
        """ms of CPU per hand-off since the start: (pipeline, tmux server)."""
        (p0, s0), (p1, s1) = self.start, self._now()
        return (p1 - p0) * 1000 / handoffs, (s1 - s0) * 1000 / handoffs


def _records(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _count(log: Path, event: str) -> int:
    return sum(1 for r in _records(log) if r["event"] == event)


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


async def run_all(agents: list[str], modes: list[str], sizes: list[int], handoffs: int,
                  results: dict[tuple[str, str, int], list[float]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")  # the hook spool, never the user's
        for agent in agents:
            for mode in modes:
                for pairs in sizes:
                    lat = await measure(pairs, handoffs, mode, Path(tmp), agent)
                    results[(agent, mode, pairs)] = lat
                    if lat:
                        print(f"{agent:>6}, {mode:>10}, {pairs:>2} pair{'s' if pairs > 1 else ' '} "
                              f"({len(lat)} hand-offs): p50 {pct(lat, 50):6.1f} ms  "
                              f"p99 {pct(lat, 99):6.1f} ms  max {max(lat):6.1f} ms  CPU/hand-off ms: "
                              "pipeline %.2f, tmux server %.2f" % CPU.get((agent, mode, pairs), (0, 0)),
                              flush=True)
                    if TRACE:
                        latency_trace.report()


async def main() -> None:
    if os.environ.get("BENCH_LOG"):  # the pipeline's own log, with milliseconds, to see where time goes
        logging.basicConfig(filename=os.environ["BENCH_LOG"], level=logging.DEBUG,
                            format="%(asctime)s.%(msecs)03d %(message)s", datefmt="%H:%M:%S")
    handoffs = int(os.environ.get("BENCH_HANDOFFS", "100"))
    sizes = [1, 10] + ([50] if os.environ.get("BENCH_50") else [])
    if os.environ.get("BENCH_SIZES"):  # e.g. "1,50": only these
        sizes = [int(n) for n in os.environ["BENCH_SIZES"].split(",")]
    modes = os.environ.get("BENCH_MODES", "control,subprocess").split(",")
    if "control" not in inspect.signature(Tmux).parameters:
        modes = ["subprocess"]
    agents = os.environ.get("BENCH_AGENTS", "claude,codex").split(",")
    results: dict[tuple[str, str, int], list[float]] = {}
    if TRACE:
        latency_trace.install()
    load = [subprocess.Popen([sys.executable, "-c", "while True: pass"])  # other work taking the cores
            for _ in range(int(os.environ.get("BENCH_LOAD", "0")))]
    try:
        await run_all(agents, modes, sizes, handoffs, results)
    finally:
        for loop in load:
            loop.kill()
            loop.wait()
    for agent in agents:
        for mode in modes:
            base = results.get((agent, mode, 1))
            for pairs in sizes[1:]:
                lat = results.get((agent, mode, pairs))
                if base and lat:
                    print(f"{agent}, {mode}: {pairs} pairs / 1 pair: "
                          f"p50 x{pct(lat, 50) / pct(base, 50):.2f}, p99 x{pct(lat, 99) / pct(base, 99):.2f}")
        if "control" in modes and "subprocess" in modes:
            for pairs in sizes:
                c, s = results.get((agent, "control", pairs)), results.get((agent, "subprocess", pairs))
                if c and s:
                    print(f"{agent}, control / subprocess, {pairs} pairs: "
                          f"p50 x{pct(c, 50) / pct(s, 50):.2f}, p99 x{pct(c, 99) / pct(s, 99):.2f}")


if __name__ == "__main__":
    anyio.run(main)
