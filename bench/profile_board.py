"""Where the idle live board's CPU goes: ``baton web``'s feed (:class:`pipeline.web.feed.WebFeed`, the live
board's ``TileFeed`` inside) run in this process over ``BENCH_TILES`` (50) idle Claude Code stand-ins
(``bench/claude_standin.py``), profiled with cProfile on the event loop's thread for ``BENCH_IDLE_S`` (30)
seconds after a 6-s warm-up; prints the process's and the tmux server's CPU as a percentage of one core and
the top ``BENCH_TOP`` (40) functions by cumulative time. ``BENCH_PROFILE=0``: the CPU figures only,
unprofiled. ``BENCH_PROFILE_OUT=FILE`` keeps the stats for ``pstats``.

Run: ``.venv/bin/python bench/profile_board.py`` (needs tmux; its own socket and temp dir; ~1 min).
"""

from __future__ import annotations

import cProfile
import os
import pstats
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import psutil

from pipeline.engine.config import load_config
from pipeline.engine.tiles import build_tiles
from pipeline.plugin.manager import load_registries
from pipeline.system.tmux import Tmux
from pipeline.web.feed import WebFeed

ROOT = Path(__file__).resolve().parent.parent
STANDIN = ROOT / "bench" / "claude_standin.py"
TILES = int(os.environ.get("BENCH_TILES", "50"))
IDLE_S = float(os.environ.get("BENCH_IDLE_S", "30"))
PROFILE = os.environ.get("BENCH_PROFILE", "1") != "0"


def scene(work: Path, tmux: list[str]) -> Path:
    """``TILES`` stand-in panes and their routes.yaml; returns its path once every session file exists."""
    config = work / "claude"
    lines = ["version: 1", "tiles:"]
    for i in range(TILES):
        cwd = work / f"proj{i}"
        cwd.mkdir(parents=True)
        cmd = shlex.join(["env", f"CLAUDE_CONFIG_DIR={config}", sys.executable, str(STANDIN),
                          "--name", f"c{i}", "--log", str(work / f"c{i}.jsonl")])
        pane = subprocess.run([*tmux, "new-session", "-d", "-P", "-F", "#{pane_id}", "-s", f"c{i}",
                               "-x", "100", "-y", "30", "-c", str(cwd), cmd], capture_output=True, text=True,
                              check=True).stdout.strip()
        lines.append(f"  c{i}: {{pane: '{pane}', agent: claude}}")
    (work / "routes.yaml").write_text("\n".join([*lines, "routes: []"]) + "\n")
    os.environ.update(XDG_STATE_HOME=str(work / "state"), CLAUDE_CONFIG_DIR=str(config))
    while len(list((config / "sessions").glob("*.json"))) < TILES:
        time.sleep(0.1)  # shapes the scenario: every stand-in has written its session file
    return work / "routes.yaml"


def cpu_s(proc: psutil.Process, children: bool = True) -> float:
    procs = [proc, *proc.children(recursive=True)] if children else [proc]
    return sum(p.cpu_times().user + p.cpu_times().system for p in procs)


async def watch(routes: Path, socket: str, tmux_server: psutil.Process, profile: cProfile.Profile) -> None:
    registries = load_registries()
    config, _ = load_config(routes, registries)
    feed = WebFeed(config, await build_tiles(config, registries.agents, Tmux(socket)), "bench")
    me = psutil.Process()
    async with anyio.create_task_group() as tg:
        tg.start_soon(feed.run)
        await anyio.sleep(6)  # shapes the scenario: the first looks and the tokens read
        t0, c0, s0 = time.monotonic(), cpu_s(me), cpu_s(tmux_server, children=False)
        if PROFILE:
            profile.enable()
        await anyio.sleep(IDLE_S)  # shapes the scenario: the window measured
        if PROFILE:
            profile.disable()
        elapsed = time.monotonic() - t0
        print(f"{TILES} idle tiles, {IDLE_S:.0f} s{' (under cProfile)' if PROFILE else ''}: this process "
              f"{(cpu_s(me) - c0) / elapsed * 100:.2f} % of a core, the tmux server "
              f"{(cpu_s(tmux_server, children=False) - s0) / elapsed * 100:.2f} %", flush=True)
        tg.cancel_scope.cancel()


def main() -> None:
    socket = f"baton-profile-board-{os.getpid()}"
    tmux = ["tmux", "-f", "/dev/null", "-L", socket]
    profile = cProfile.Profile()
    with tempfile.TemporaryDirectory() as tmp:
        try:
            routes = scene(Path(tmp), tmux)
            pid = subprocess.run([*tmux, "display-message", "-p", "#{pid}"], capture_output=True, text=True,
                                 check=True).stdout
            anyio.run(watch, routes, socket, psutil.Process(int(pid)), profile)
        finally:
            subprocess.run([*tmux, "kill-server"], capture_output=True)
    if PROFILE:
        stats = pstats.Stats(profile)
        if out := os.environ.get("BENCH_PROFILE_OUT"):
            stats.dump_stats(out)
        stats.sort_stats("cumulative").print_stats(int(os.environ.get("BENCH_TOP", "40")))


if __name__ == "__main__":
    main()
