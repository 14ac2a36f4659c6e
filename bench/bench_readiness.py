"""A target's readiness check — the last step before the paste — against its ways of asking tmux.

The dispatcher asks, before it types, whether the target pane can take a prompt (``target_state``: the
pane, the agent's process under it from /proc, the agent's own files, and the screen for a draft the user
left in the input line). Measured on an idle Claude Code and Codex stand-in (``bench/*_standin.py``) in a
real tmux pane, ``BENCH_LOOKS`` (300) checks each, p50 / p99:

- ``one write``: as a hand-off does it now: the pane and the screen asked in one control-mode write
  (:func:`pipeline.engine.context.readiness_check`);
- ``two writes``: the same check asking for the pane, then for the screen (each a round trip) — the way
  before, and still the way of a check outside a hand-off;
- ``processes``: the same two asks with one ``tmux`` process per command (the naive way).

And the tmux round trips alone (``display-message`` for the pane; ``capture-pane``; both in one write).
Printed with the ratio to ``two writes`` measured in the same run.

Run: ``.venv/bin/python bench/bench_readiness.py`` (~1 min; its own tmux socket and temp dirs).
"""

from __future__ import annotations

import os
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.engine.config import Tile  # noqa: E402
from pipeline.engine.context import EngineContext, pane_lookups_shared, readiness_check  # noqa: E402
from pipeline.engine.stages.dispatch import target_state  # noqa: E402
from pipeline.plugin.manager import load_registries  # noqa: E402
from pipeline.system.tmux import Tmux  # noqa: E402

LOOKS = int(os.environ.get("BENCH_LOOKS", "300"))
STANDINS = {"claude": (ROOT / "bench" / "claude_standin.py", "CLAUDE_CONFIG_DIR"),
            "codex": (ROOT / "bench" / "codex_standin.py", "CODEX_HOME")}


def quantiles(samples: list[float]) -> tuple[float, float]:
    samples = sorted(samples)
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.99))]


async def timed(step: Callable[[], Awaitable[object]], times: int = LOOKS) -> tuple[float, float]:
    for _ in range(10):  # warm: connections made, the adapter's files resolved
        await step()
    samples = []
    for _ in range(times):
        t0 = time.perf_counter()
        await step()
        samples.append((time.perf_counter() - t0) * 1000)
    return quantiles(samples)


async def one_agent(agent: str, tmp: Path) -> None:
    script, variable = STANDINS[agent]
    home, cwd = tmp / agent / "home", tmp / agent / "proj"
    home.mkdir(parents=True)
    cwd.mkdir()
    command = shlex.join(["env", f"{variable}={home}", sys.executable, str(script), "--name", "t0",
                          "--log", str(tmp / agent / "t0.jsonl")])
    name = f"baton-bench-ready-{os.getpid()}-{agent}"
    tmux, naive = (Tmux(socket_name=name, config_file="/dev/null", control=c) for c in (True, False))
    try:
        pane = (await tmux.new_session("t", command, cwd=str(cwd), width=100, height=30)).pane_id
        registries = load_registries()
        adapters = [registries.agents.get(agent)(EngineContext(name="t", tile=Tile(pane=pane, agent=agent),
                                                             tmux=t)) for t in (tmux, naive)]
        with anyio.fail_after(20):
            while await target_state(adapters[0]) != "ready":
                await anyio.sleep(0.1)

        async def check(adapter: object, *, one_write: bool) -> None:
            with pane_lookups_shared():  # as the dispatcher looks (the tile remembers what it captures)
                if one_write:
                    with readiness_check():
                        state = await target_state(adapter)  # type: ignore[arg-type]
                else:
                    state = await target_state(adapter)  # type: ignore[arg-type]
            assert state == "ready", state

        rows = {
            "one write": await timed(lambda: check(adapters[0], one_write=True)),
            "two writes": await timed(lambda: check(adapters[0], one_write=False)),
            "processes": await timed(lambda: check(adapters[1], one_write=False), times=LOOKS // 5),
        }
        base = rows["two writes"][0]
        print(f"{agent}: the readiness check, p50 / p99")
        for what, (p50, p99) in rows.items():
            print(f"  {what:>12}: {p50:6.2f} / {p99:6.2f} ms   p50 x{p50 / base:.2f} of two writes",
                  flush=True)
        pane_alone = await timed(lambda: tmux.pane(pane))
        capture_alone = await timed(lambda: tmux.capture(pane, escapes=agent == "codex"))
        both = await timed(lambda: tmux.pane_and_capture(pane, escapes=agent == "codex"))
        ratio = both[0] / (pane_alone[0] + capture_alone[0])
        print(f"  round trips: pane {pane_alone[0]:.3f}, screen {capture_alone[0]:.3f}, both in one write "
              f"{both[0]:.3f} ms (x{ratio:.2f} of the two)", flush=True)
    finally:
        await tmux.kill_server()


async def main() -> None:
    print(f"load average {os.getloadavg()[0]:.2f}; {LOOKS} samples each", flush=True)
    with tempfile.TemporaryDirectory(prefix="baton-bench-ready-") as tmp:
        for agent in os.environ.get("BENCH_AGENTS", "claude,codex").split(","):
            await one_agent(agent, Path(tmp))


if __name__ == "__main__":
    anyio.run(main)
