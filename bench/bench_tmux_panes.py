"""One tmux round trip against the number of panes in the server: the part of a hand-off batonpass cannot
flatten.

tmux 3.3 on Linux runs its event loop on ``poll()`` (it turns libevent's epoll off), passing every pane's
terminal to the kernel each time round the loop, and a command and its reply take a few turns of it. So
the same command costs more in a server with 100 panes than in one with 2, whoever sends it. This asks one
control-mode connection (as ``baton run`` does) for a pane (``display-message``) and for a screen
(``capture-pane``) in servers of 1, 10, 50 and 100 idle panes (one ``sleep`` each, one session per pane as
the latency bench makes them), 300 times each, and prints p50/p99 and the ratio to 1 pane.

Run: ``.venv/bin/python bench/bench_tmux_panes.py`` (needs tmux; its own sockets; ~30 s).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_latency import pct  # noqa: E402 - this script's own folder, first on sys.path

from pipeline.system.tmux import Tmux  # noqa: E402

SIZES = (1, 10, 50, 100)
ROUNDS = 300


async def timed(call: Callable[[], Awaitable[object]]) -> list[float]:
    out = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        await call()
        out.append((time.perf_counter() - start) * 1000)
    return out


async def one_server(panes: int) -> dict[str, list[float]]:
    """Round trips to a pane of a server with ``panes`` idle panes: by kind of command, in ms."""
    tmux = Tmux(socket_name=f"baton-bench-panes-{os.getpid()}-{panes}", config_file="/dev/null",
                control=True)
    try:
        pane = (await tmux.new_session("p0", "sleep 600", width=100, height=30)).pane_id
        for i in range(1, panes):
            await tmux.new_session(f"p{i}", "sleep 600", width=100, height=30)
        await anyio.sleep(0.5)
        await timed(lambda: tmux.pane(pane))  # warm up
        return {"pane": await timed(lambda: tmux.pane(pane)),
                "capture": await timed(lambda: tmux.capture(pane))}
    finally:
        await tmux.kill_server()


async def main() -> None:
    base: dict[str, float] = {}
    for panes in SIZES:
        for what, values in (await one_server(panes)).items():
            p50 = pct(values, 50)
            base.setdefault(what, p50)
            print(f"{panes:>3} panes, {what:>7}: p50 {p50:.3f} ms  p99 {pct(values, 99):.3f} ms  "
                  f"x{p50 / base[what]:.2f} of 1 pane", flush=True)


if __name__ == "__main__":
    anyio.run(main)
