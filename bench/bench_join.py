"""What a join costs the router, against a plain hand-off measured in the same process run.

Each answer goes through :meth:`PromptRouter.route` (journal writes, the transform, the decisions) on a
journal file (WAL, as ``baton run`` keeps it) in a temp folder:

1. baseline: one answer of ``a`` through a single route ``a -> b`` (one hand-off);
2. the answer that completes a join of two sources (``[s0, s1] -> b``): its own cost is the hand-off it
   completes plus the join's writes; the claim is that the join adds at most 1 ms p50 to it;
3. a join of 10 sources: the cost of the 10 answers that make one hand-off, per answer and per group,
   against the plain hand-off.

Run: ``.venv/bin/python bench/bench_join.py`` (~10 s; temp dirs only, nothing started).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pipeline.engine.config import parse_config  # noqa: E402
from pipeline.engine.context import EngineContext  # noqa: E402
from pipeline.engine.hops import HopLedger  # noqa: E402
from pipeline.engine.journal import Journal  # noqa: E402
from pipeline.engine.stages.route import PromptRouter  # noqa: E402
from pipeline.engine.tiles import TileRuntime  # noqa: E402
from pipeline.plugin.events import Completion, Response  # noqa: E402
from pipeline.plugin.manager import load_registries  # noqa: E402
from pipeline.system.tmux import Tmux  # noqa: E402
from plugins.terminal.adapter import TerminalAdapter  # noqa: E402

ROUNDS = 300
TEMPLATE = '{type: template, template: "The reviews:\\n\\n{responses}"}'


def router(folder: Path, sources: int) -> PromptRouter:
    names = [f"s{i}" for i in range(sources)]
    tiles = "\n".join(f"  {n}: {{pane: '%{i + 2}', agent: shell}}" for i, n in enumerate(["a", "b", *names]))
    join = f"  - {{from: [{', '.join(names)}], to: b, transform: {TEMPLATE}}}" if sources else ""
    text = f"version: 1\ntiles:\n{tiles}\nroutes:\n  - {{from: a, to: b, transform: {TEMPLATE}}}\n{join}\n"
    cfg, _ = parse_config(text)
    runtimes = {}
    for name, tile in cfg.tiles.items():
        ctx = EngineContext(name=name, tile=tile, tmux=Tmux(socket_name="bench-join-unused"))
        adapter = TerminalAdapter(ctx)
        runtimes[name] = TileRuntime(ctx=ctx, adapter=adapter, fallback=adapter)
    journal = Journal(folder / "journal.sqlite3")
    return PromptRouter(cfg, runtimes, load_registries().transforms, journal=journal)


def answer(tile: str, turn: str) -> Response:
    return Response(Completion(tile=tile, turn_id=turn, hop=1), f"{tile} says: fine\n" * 20, "transcript")


async def plain(r: PromptRouter) -> list[float]:
    samples = []
    for i in range(ROUNDS):
        t0 = time.perf_counter()
        assert len(await r.route(answer("a", f"t{i}"))) == 1
        samples.append((time.perf_counter() - t0) * 1000)
    return samples


async def groups(r: PromptRouter, sources: int) -> tuple[list[float], list[float]]:
    """(the completing answer's ms, the whole group's ms) per group; each source was handed the same
    upstream turn, as a fan-out does."""
    hops = HopLedger(r.journal)
    last, whole = [], []
    for i in range(ROUNDS // max(1, sources // 2)):
        for s in range(sources):
            hops.expect(f"s{s}", 1, f"a:g{i}")
            hops.take(f"s{s}", f"q{i}-{s}")
        t_group = time.perf_counter()
        for s in range(sources):
            t0 = time.perf_counter()
            out = await r.route(answer(f"s{s}", f"q{i}-{s}"))
            if s == sources - 1:
                assert len(out) == 1
                last.append((time.perf_counter() - t0) * 1000)
        whole.append((time.perf_counter() - t_group) * 1000)
    return last, whole


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folders = [Path(tmp) / name for name in ("plain", "join2", "join10")]
        for folder in folders:
            folder.mkdir()
        base = statistics.median(await plain(router(folders[0], 0)))
        last2, _ = await groups(router(folders[1], 2), 2)
        last10, whole10 = await groups(router(folders[2], 10), 10)
    p_last2, p_last10, p_whole10 = map(statistics.median, (last2, last10, whole10))
    print(f"plain hand-off (baseline)            p50 {base:.3f} ms")
    print(f"answer completing a join of 2        p50 {p_last2:.3f} ms   +{p_last2 - base:.3f} ms "
          f"(x{p_last2 / base:.2f})")
    print(f"answer completing a join of 10       p50 {p_last10:.3f} ms   +{p_last10 - base:.3f} ms "
          f"(x{p_last10 / base:.2f})")
    print(f"join of 10: the group's 10 answers   p50 {p_whole10:.3f} ms = {p_whole10 / 10:.3f} ms an answer "
          f"(x{p_whole10 / 10 / base:.2f} a plain hand-off)")


if __name__ == "__main__":
    anyio.run(main)
