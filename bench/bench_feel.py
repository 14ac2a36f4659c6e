"""The latency a person feels: a REAL agent's answer ends → the next real agent's request, through batonpass.

The source is the real Claude Code, the target each real agent CLI in turn (bench/feel_agents.py: from the
tests' npm cache, each against its fake model API on 127.0.0.1, in a private tmux server). The pipeline
runs in this process with one route, source → target. Per target, ``BENCH_N`` rounds, each round one
hand-off in every mode, interleaved:

- ``person``: the baseline — text typed into the target's input, and once it shows there, a person's Enter
  (``send-keys Enter``): Enter → the target's request. What the target itself costs.
- ``fixed``: batonpass as before: the source's prompt typed into it, its answer's last event sent by the
  fake API → the target's request, with the fixed ``submit_delay_s`` between the paste and the Enter.
- ``watch``: the same with the Enter pressed once the paste shows in the input (``until_landed``).

The pipeline watches both agents from their start, and a person types (once) only when it reads the tile
``ready``, as a person goes by the board: a fresh OpenCode is ``busy`` until its input box shows (it drops
what is typed before, docs/agents.md), its store waited for until it has tables — so no wait of the bench's
own for its tables, no typing again. A hand-off lost or left unconfirmed prints its journal state and the
target's screen; each target's run ends with the journal's hand-offs by state and batonpass's warnings
(its retypes among them).

A hand-off counts once the target's request holds the whole text (its last word): an Enter that
submitted a placeholder or a part of the paste shows as a hand-off that never arrived. Prints p50/p90 per
mode and, for the hand-offs, where the time went (p50 of each step: the answer's end → the
detector takes the turn (and by which signal) → the paste → the Enter → the request), and the source's own
files (the session file's ``idle``, the transcript's end-of-turn line) against the answer's end.

Run: ``.venv/bin/python bench/bench_feel.py`` — ``BENCH_AGENTS=claude,codex`` (default: all of
bench/feel_agents.py), ``BENCH_N=10``, ``BENCH_MODES=person,fixed,watch``,
``BENCH_LONG=1`` a 14-line answer (drawn as a placeholder), ``BENCH_SETTLE=8`` seconds between the agents'
start and the pipeline's (0), ``BENCH_HOOKS=1`` the source's
Stop hook installed (``baton hooks install --claude``), ``BENCH_WARMUP=0`` no unmeasured first prompt to the
target (by default one, a person's, before the rounds). Needs tmux; ends every process it started.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import anyio
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from feel_agents import AGENTS, fake_api, make_home  # noqa: E402

from pipeline.engine.config import Config  # noqa: E402
from pipeline.engine.journal import MEMORY, Journal  # noqa: E402
from pipeline.engine.journal.records import FINAL_STATES  # noqa: E402
from pipeline.engine.runtime import Pipeline  # noqa: E402
from pipeline.engine.stages import dispatch, submit  # noqa: E402
from pipeline.engine.stages.detect import CompletionDetector  # noqa: E402
from pipeline.plugin.manager import load_registries  # noqa: E402
from pipeline.system.tmux import Tmux  # noqa: E402

MARK = re.compile(r"FEEL-[a-z]+-\d+")
TIMEOUT_S = 60.0
#: the source's answer: one line, or with BENCH_LONG=1 14 lines (a placeholder in every agent's input)
LONG_LINES = 13 if os.environ.get("BENCH_LONG") else 0
#: per hand-off: step -> time.time()
marks: dict[str, float] = {}
#: the Enter's wait, as submit.py (which types every prompt) looks it up
_landed = submit.until_landed


async def _fixed(adapter: Any, clean: str, pasted: float) -> None:
    """The Enter as before: the fixed ``submit_delay_s`` after the paste."""
    await anyio.sleep(max(pasted + adapter.submit_delay_s - time.monotonic(), 0.0))


def install_marks() -> None:
    accept, paste, keys = CompletionDetector.accept, Tmux.paste, Tmux.send_keys

    async def on_accept(self: CompletionDetector, completion: Any) -> None:
        if completion.tile == "src":  # not the target's own turn
            marks.setdefault("accept", time.time())
            marks.setdefault("signal:" + completion.signal, 0.0)
        await accept(self, completion)

    async def on_paste(self: Tmux, pane_id: str, text: str) -> None:
        marks.setdefault("paste", time.time())
        await paste(self, pane_id, text)

    async def on_keys(self: Tmux, pane_id: str, *k: str) -> None:
        if "Enter" in k and "paste" in marks:
            marks.setdefault("enter", time.time())
        await keys(self, pane_id, *k)

    CompletionDetector.accept = on_accept  # type: ignore[method-assign]
    Tmux.paste = on_paste  # type: ignore[method-assign]
    Tmux.send_keys = on_keys  # type: ignore[method-assign]


class SourceFiles(threading.Thread):
    """Watches the source Claude Code's session file and transcript every 2 ms: when its status became
    ``idle``, when a final message (``stop_reason: end_turn``) and when an end-of-turn line
    (``turn_duration``) were added, as times."""

    def __init__(self, config: Path) -> None:
        super().__init__(daemon=True)
        self.config, self.stop = config, threading.Event()
        self.idle: list[float] = []  # the session file's status became idle
        self.ends: list[float] = []  # a turn_duration line was added to the transcript
        self.answered: list[float] = []  # a final message (stop_reason end_turn) was added

    def run(self) -> None:
        status, ends, answered = "", 0, 0
        while not self.stop.wait(0.002):
            now = time.time()
            for f in (self.config / "sessions").glob("*.json"):
                try:
                    s = json.loads(f.read_text()).get("status", "")
                except (OSError, ValueError):
                    continue
                if s == "idle" and status != "idle":
                    self.idle.append(now)
                status = s
            text = b"".join(f.read_bytes() for f in (self.config / "projects").glob("*/*.jsonl"))
            n, m = text.count(b'"turn_duration"'), text.count(b'"stop_reason":"end_turn"')
            if n > ends:
                self.ends.append(now)
            if m > answered:
                self.answered.append(now)
            ends, answered = n, m


def after(times: list[float], t: float) -> float | None:
    return next((x for x in times if x >= t), None)


async def until(check: Any, what: str, timeout: float = TIMEOUT_S) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        await anyio.sleep(0.01)


async def ready(pipeline: Pipeline, tile: str) -> bool:
    return await dispatch.target_state(pipeline.tiles[tile].adapter) == "ready"


async def type_and_enter(tmux: Tmux, pipeline: Pipeline, tile: str, pane: str, text: str) -> float:
    """Type ``text`` as a person would, once, wait until the input shows it, then Enter: the Enter's time.
    Typed only when batonpass reads the tile ``ready`` (:func:`one`, :func:`measure`), as a person goes by
    the board; an input that never shows the text fails the round with the screen it was read from."""
    adapter = pipeline.tiles[tile].adapter
    await tmux.run("send-keys", "-t", pane, "-l", text)
    try:
        await until(lambda: _holds(adapter, text), f"{text!r} in {tile}'s input", 5)
    except TimeoutError:  # say what the adapter read instead, and the screen it read it from
        print(f"  {tile} ({adapter.name}) input: {await adapter.current_draft()!r}; the screen:\n"
              f"{await tmux.run('capture-pane', '-p', '-t', pane)}", flush=True)
        raise
    await anyio.sleep(0.3)
    t = time.time()
    await tmux.run("send-keys", "-t", pane, "Enter")
    return t


async def _holds(adapter: Any, text: str) -> bool:
    return await adapter.input_holds(text) == "prompt"


async def one(mode: str, i: int, ctx: dict[str, Any]) -> dict[str, float] | None:
    tmux, pipeline, src_api, dst_api = ctx["tmux"], ctx["pipeline"], ctx["src_api"], ctx["dst_api"]
    marker = f"FEEL-{mode}-{i}"
    await until(lambda: ready(pipeline, "dst"), "the target ready")
    await until(lambda: ready(pipeline, "src"), "the source ready")
    await anyio.sleep(0.5)
    marks.clear()
    since = time.time()
    if mode == "person":
        start = await type_and_enter(tmux, pipeline, "dst", ctx["dst_pane"],
                                     f"{marker} please note {marker}-END")
    else:
        submit.until_landed = _landed if mode == "watch" else _fixed
        ends = len(src_api.answer_ends())
        await type_and_enter(tmux, pipeline, "src", ctx["src_pane"], f"Say {marker}")
        await until(lambda: _async(len(src_api.answer_ends()) > ends), "the source's answer")
        start = src_api.answer_ends()[ends]
    try:
        arrived = await until(lambda: _async(dst_api.first_arrival(f"{marker}-END", since)),
                              f"{marker} at the target")
    except TimeoutError:
        print(f"  {mode} {i}: no request at the target within {TIMEOUT_S:.0f}s; its hand-off: "
              f"{[(h.state, h.attempts, h.last_error) for h in _handoffs(pipeline, marker)]}; the target's "
              f"screen:\n{await tmux.run('capture-pane', '-p', '-t', ctx['dst_pane'])}", flush=True)
        return None
    out = {"total": (arrived - start) * 1000, "start": start, "arrived": arrived, **marks}
    return out


def _handoffs(pipeline: Pipeline, marker: str = "") -> list[Any]:
    """The journal's hand-offs whose prompt names ``marker`` (every one: "")."""
    return [h for h in pipeline.journal.history(limit=1000) if marker in (h.prompt or "")]


class Warnings(logging.Handler):
    """batonpass's warnings during a run: the dispatcher's retypes (a paste the target never took, typed
    again: submit.py) and any other (an adapter reading a store it does not know from the screen instead)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.said: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.said.append(record.getMessage())

    def summary(self) -> str:
        retyped = sum(m.startswith("retyping") for m in self.said)
        other = sorted({m for m in self.said if not m.startswith("retyping")})
        return f"retyped by the dispatcher {retyped} times; other warnings: {other or 'none'}"


async def _async(value: Any) -> Any:
    return value


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def report(agent: str, results: dict[str, list[dict[str, float]]], files: SourceFiles, load: float) -> None:
    print(f"{agent:>8} load average (1 min) {load:.1f} at its start, {os.getloadavg()[0]:.1f} at its end",
          flush=True)
    person = [r["total"] for r in results.get("person", [])]
    base = statistics.median(person) if person else None
    for mode, rows in results.items():
        totals = [r["total"] for r in rows]
        if not totals:
            continue
        over = (f", over a person's Enter p50 {statistics.median(totals) - base:+.0f} ms"
                if base and mode != "person" else "")
        print(f"{agent:>8} {mode:>6} ({len(totals)}): p50 {pct(totals, 50):6.0f} ms  "
              f"p90 {pct(totals, 90):6.0f} ms"
              f"{over}", flush=True)
        if mode == "person":
            continue
        steps = {"end→accept": ("start", "accept"), "accept→paste": ("accept", "paste"),
                 "paste→Enter": ("paste", "enter"), "Enter→request": ("enter", "arrived")}
        parts = []
        for name, (a, b) in steps.items():
            values = [(r[b] - r[a]) * 1000 for r in rows if a in r and b in r]
            if values:
                parts.append(f"{name} {statistics.median(values):.0f}")
        signals = sorted({k[7:] for r in rows for k in r if k.startswith("signal:")})
        idle = [(t - r["start"]) * 1000 for r in rows if (t := after(files.idle, r["start"]))]
        ends = [(t - r["start"]) * 1000 for r in rows if (t := after(files.ends, r["start"]))]
        final = [(t - r["start"]) * 1000 for r in rows if (t := after(files.answered, r["start"] - 0.5))]
        seen = (f"; the source's files after the answer's end: final message p50 "
                f"{statistics.median(final):.0f}, "
                f"session idle {statistics.median(idle):.0f}, turn_duration {statistics.median(ends):.0f}"
                if idle and ends and final else "")
        print(f"{'':>8} {'':>6} steps p50 ms: {', '.join(parts)}; taken by {'/'.join(signals)}{seen}",
              flush=True)


async def measure(agent: str, tmp: Path, n: int, modes: list[str]) -> None:
    def src_answer(prompt: str) -> str:
        found = MARK.search(prompt)
        marker = found[0] if found else "FEEL-none-0"
        body = "".join(f"\n- point {k}: the part {k} of the change keeps its tests"
                       for k in range(LONG_LINES))
        return f"{marker} is noted.{body} {marker}-END"

    with fake_api("claude", answer=src_answer) as src_api, fake_api(agent) as dst_api:
        src_home = make_home("claude", tmp / "src", src_api.url)
        dst_home = make_home(agent, tmp / "dst", dst_api.url)
        if os.environ.get("BENCH_HOOKS"):
            from pipeline.commands.hooks import hook_command
            from plugins.claude_code.hooks import install_stop_hook

            install_stop_hook(Path(src_home.env["CLAUDE_CONFIG_DIR"]) / "settings.json",
                              " ".join(hook_command("claude")))
        tmux = Tmux(socket_name=f"baton-feel-{os.getpid()}-{agent}", config_file="/dev/null")
        files = SourceFiles(Path(src_home.env["CLAUDE_CONFIG_DIR"]))
        warnings = Warnings()
        logging.getLogger("batonpass").addHandler(warnings)
        try:
            src = await tmux.new_session("src", src_home.shell(), cwd=str(src_home.cwd), width=120, height=40)
            dst = await tmux.new_session("dst", dst_home.shell(), cwd=str(dst_home.cwd), width=120, height=40)
            await anyio.sleep(0.3)
            for pane, home in ((src, src_home), (dst, dst_home)):
                await tmux.run("send-keys", "-t", pane.pane_id, "-l", home.command)
                await tmux.run("send-keys", "-t", pane.pane_id, "Enter")
            started, started_at = time.monotonic(), time.strftime("%H:%M:%S")
            # the pipeline watches the agents from their start, as `baton run` beside a fresh agent does: a
            # store not made yet (OpenCode's tables: 2–6 s in) is waited for by the adapter itself
            await anyio.sleep(float(os.environ.get("BENCH_SETTLE", "0")))
            config = Config.model_validate({"version": 1, "tiles": {
                "src": {"pane": src.pane_id, "agent": "claude"},
                "dst": {"pane": dst.pane_id, "agent": agent}},
                "routes": [{"from": "src", "to": "dst"}]})
            pipeline = Pipeline(config, load_registries(), tmux, journal=Journal(MEMORY))
            files.start()
            load = os.getloadavg()[0]
            async with anyio.create_task_group() as tg:
                await tg.start(pipeline.run)
                ctx = {"tmux": tmux, "pipeline": pipeline, "src_api": src_api, "dst_api": dst_api,
                       "src_pane": src.pane_id, "dst_pane": dst.pane_id}
                await until(lambda: ready(pipeline, "dst"), f"{agent} ready", 180)
                screen = await tmux.run("capture-pane", "-p", "-t", dst.pane_id)
                bottom = [ln.strip()[:40] for ln in screen.splitlines() if ln.strip()][-3:]
                print(f"{agent:>8} ready {time.monotonic() - started:.1f} s after its start at {started_at}; "
                      f"the screen's last lines then: {bottom}", flush=True)
                await until(lambda: ready(pipeline, "src"), "claude ready", 180)
                await anyio.sleep(2.0)  # the agents settle (a Qwen Code loads its tools)
                # kept: one unmeasured first prompt, a person's — a target's first costs more than the rest,
                # its own cost, not a hand-off's (2026-12-07, Enter → request: OpenCode 1.6–2.5 s at load
                # 7–12, 0.2 s at load 1; Claude Code 0.5–0.6 s against 0.06–0.1 s for the next ones)
                if os.environ.get("BENCH_WARMUP", "1") != "0" and (first := await one("person", -1, ctx)):
                    print(f"{agent:>8} first prompt (unmeasured): Enter → request {first['total']:.0f} ms",
                          flush=True)
                results: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
                for i in range(n):
                    for mode in modes:
                        row = await one(mode, i, ctx)
                        if row is not None:
                            results[mode].append(row)
                with contextlib.suppress(TimeoutError):  # the last hand-off's confirmation, before the count
                    await until(lambda: _async(all(h.state in FINAL_STATES for h in _handoffs(pipeline))),
                                "every hand-off settled", 15)
                tg.cancel_scope.cancel()
            report(agent, results, files, load)
            states = [h.state for h in _handoffs(pipeline)]
            print(f"{agent:>8} hand-offs in the journal: "
                  f"{ {st: states.count(st) for st in sorted(set(states))} }; {warnings.summary()}",
                  flush=True)
        finally:
            files.stop.set()
            submit.until_landed = _landed
            logging.getLogger("batonpass").removeHandler(warnings)
            await tmux.kill_server()
            end_left_behind(tmp)
            dst_home.end()


def end_left_behind(tmp: Path) -> None:
    """End what the agents started that outlives their panes (Codex's ``app-server`` daemon): the processes
    whose command line names this run's own temporary folder, and only those. (Cline's hub daemon names
    none: its home's ``end`` ends it.)"""
    for p in psutil.process_iter(["pid", "cmdline"]):
        if any(str(tmp) in part for part in p.info["cmdline"] or []):
            with contextlib.suppress(psutil.Error):
                p.kill()


async def main() -> None:
    agents = [a for a in os.environ.get("BENCH_AGENTS", ",".join(AGENTS)).split(",") if a]
    modes = os.environ.get("BENCH_MODES", "person,fixed,watch").split(",")
    n = int(os.environ.get("BENCH_N", "10"))
    install_marks()
    print(f"answer end -> the next agent's request, {n} rounds of {'/'.join(modes)}; load "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    for agent in agents:
        with tempfile.TemporaryDirectory(prefix=f"baton-feel-{agent}-", ignore_cleanup_errors=True) as tmp:
            os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")  # the hook spool, never the user's
            try:
                await measure(agent, Path(tmp), n, modes)
            except Exception as exc:  # one agent's failure must not hide the others' figures
                print(f"{agent:>8}: failed: {type(exc).__name__}: {exc}", flush=True)
                traceback.print_exception(exc)  # a task group's error says what failed only in its parts


if __name__ == "__main__":
    anyio.run(main)
