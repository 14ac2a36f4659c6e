"""The file watcher and tmux, each against its naive way, in the same process.

1. Watcher: a line appended to a file → the watcher's hint, p50/max over 40 writes, and the CPU the
   watcher burns while nothing changes (``BENCH_IDLE_S``, 5 s): watchfiles with its defaults, watchfiles
   tuned (``step`` 10/5/2/1 ms), and inotify read through the event loop (what batonpass uses on Linux).
2. tmux: one ``display-message`` round trip as a ``tmux`` process vs over the control-mode connection
   (p50 over 200), and the ratio.

Run: ``.venv/bin/python bench/bench_watch.py`` (~1 min; needs tmux).
"""

from __future__ import annotations

import os
import resource
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.system.inotify import Inotify  # noqa: E402
from pipeline.system.tmux import Tmux  # noqa: E402

IDLE_S = float(os.environ.get("BENCH_IDLE_S", "5"))


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def watchfiles_events(folder: str, stop: threading.Event, **tuning: int) -> AsyncIterator[object]:
    from watchfiles import awatch

    async for changes in awatch(folder, stop_event=stop, watch_filter=None, **tuning):
        yield changes


async def inotify_events(folder: str, stop: threading.Event) -> AsyncIterator[object]:
    with Inotify() as ino:
        ino.add_tree(folder)
        while not stop.is_set():
            batch = None
            with anyio.move_on_after(0.2):  # only so this bench can stop it; batonpass cancels instead
                batch = await ino.changes()
            if batch is not None:
                yield batch


async def trial(name: str, events: Callable[[str, threading.Event], AsyncIterator[object]]) -> float:
    folder = tempfile.mkdtemp()
    target = os.path.join(folder, "transcript.jsonl")
    stop = threading.Event()
    latencies: list[float] = []
    written = 0.0
    idle = 0.0

    async def writer() -> None:
        nonlocal written, idle
        await anyio.sleep(0.3)
        for _ in range(40):
            with open(target, "a") as f:
                f.write("{}\n")
            written = time.perf_counter()
            await anyio.sleep(0.03)
        await anyio.sleep(0.3)
        before, t0 = cpu_s(), time.monotonic()
        await anyio.sleep(IDLE_S)
        idle = (cpu_s() - before) / (time.monotonic() - t0) * 100
        stop.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer)
        async for _ in events(folder, stop):
            if written:
                latencies.append((time.perf_counter() - written) * 1000)
                written = 0.0
    p50 = statistics.median(latencies)
    print(f"{name:>34}: write -> hint p50 {p50:5.1f} ms, max {max(latencies):5.1f} ms; "
          f"idle {idle:.2f} % of a core", flush=True)
    return p50


async def tmux_round_trips() -> None:
    socket = f"baton-bench-watch-{os.getpid()}"
    tmux = Tmux(socket_name=socket, config_file="/dev/null")
    plain = Tmux(socket_name=socket, config_file="/dev/null", control=False)
    pane = (await tmux.new_session("b", "sleep 600")).pane_id
    try:
        result = {}
        for name, t in (("subprocess", plain), ("control mode", tmux)):
            await t.pane(pane)
            times = []
            for _ in range(200):
                t0 = time.perf_counter()
                await t.pane(pane)
                times.append((time.perf_counter() - t0) * 1000)
            result[name] = statistics.median(times)
            print(f"{'tmux display-message, ' + name:>34}: p50 {result[name]:.2f} ms", flush=True)
        print(f"control mode / subprocess: x{result['control mode'] / result['subprocess']:.3f}")
    finally:
        await tmux.kill_server()


async def main() -> None:
    base = await trial("watchfiles defaults", lambda f, s: watchfiles_events(f, s))
    for step in (10, 5, 2, 1):
        await trial(f"watchfiles step={step} debounce=200", lambda f, s, step=step: watchfiles_events(
            f, s, step=step, debounce=200, rust_timeout=60_000))
    ino = await trial("inotify through the event loop", inotify_events)
    print(f"inotify / watchfiles defaults: x{ino / base:.3f}")
    await tmux_round_trips()


if __name__ == "__main__":
    anyio.run(main)
