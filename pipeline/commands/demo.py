"""``baton demo``: two demo agents on a private tmux server, routed to each other, hand-offs printed.

Needs no API key and no agent installed: the agents are ``plugins.demo.agent``, run by this Python. The
demo stops by itself after ``handoffs`` hand-offs (that is its ``max_hops``) and kills only the tmux server
it started. With ``ask`` its first prompt holds ``NEEDS_APPROVAL``: alice asks before she works, as a real
agent's permission prompt does, and the demo says what she asks and how to answer — ``baton approve`` (or
``deny``) with the routes.yaml it writes for its tiles, or the page of ``baton web`` on it.
Ctrl-C (or SIGTERM, SIGHUP: a closed terminal) stops it early: it cleans up as ever (a second
Ctrl-C does not cut that short), and :class:`DemoProgress` says how far it got and what it leaves; ``baton
demo`` exits with status 128 + the signal's number (130 for Ctrl-C).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import anyio

from pipeline.cmdline.output import quiet_stdout
from pipeline.engine.config import Config, Route, Settings, Tile
from pipeline.engine.journal import Journal, JournalUnusable, check_folder
from pipeline.engine.runtime import Pipeline
from pipeline.plugin.events import Completion, Delivery, Prompt
from pipeline.plugin.manager import load_registries
from pipeline.plugin.screen import ScreenDialogs
from pipeline.spool import spool_dir
from pipeline.system import proc
from pipeline.system.tmux import Tmux, TmuxError

__all__ = ["DemoProgress", "demo_command", "run_demo"]

FIRST_PROMPT = "Plan a small feature: a --version flag for our CLI.\nKeep it to two steps."
#: what makes the demo agent ask before it works (``APPROVAL`` in plugins/demo/agent.py)
ASKS = "\nNEEDS_APPROVAL: ask before you touch a file."
#: the reviewer's route: its answer, framed for the writer
REVISE = "The reviewer ({source}) says:\n{response}\nRevise the plan."
#: how long a demo that asks may wait for its answer (a person reads, decides, types)
ASK_TIMEOUT_S = 900.0


@dataclass
class DemoProgress:
    """How far a demo got, kept outside it: what a Ctrl-C says once the demo's task is gone."""

    handoffs: int = 0
    keep: bool = False
    #: the demo's tmux server (``tmux -L NAME``), once it is being started
    socket: str | None = None
    handed: int = 0
    #: the signal that stopped it
    stopped_by: signal.Signals | None = None

    def stopped(self) -> str:
        """What the signal stopped and what it leaves behind (said after the clean-up)."""
        by = "Ctrl-C" if self.stopped_by in (None, signal.SIGINT) else self.stopped_by.name
        if self.socket is None:
            return f"demo: stopped by {by} before it started anything; nothing is left behind"
        done = f"demo: stopped by {by} after {self.handed} of {self.handoffs} hand-offs"
        if self.keep:
            return (f"{done}; its tmux server is left running (--keep): watch it with  {self.socket} "
                    f"attach  and stop it with  {self.socket} kill-server")
        return f"{done}; its tmux server ({self.socket}) is stopped and its files are removed"


async def run_demo(*, handoffs: int = 4, work_s: float = 1.0, keep: bool = False, timeout_s: float = 90.0,
                   out: Callable[[str], None] = print, progress: DemoProgress | None = None,
                   tmux: Tmux | None = None, ask: bool = False) -> int:
    """The demo; 0 when it made its hand-offs, 1 when not, 128 + the signal's number when one stopped it
    (``progress`` says how far it got). Runs in the main thread: it listens for the signals itself.
    ``tmux``: the server to start (default: a private name); no server may run there yet. ``ask``: the
    first turn asks a person first (and the demo waits up to :data:`ASK_TIMEOUT_S` for the answer)."""
    progress = progress or DemoProgress()
    status = 0
    with anyio.open_signal_receiver(*STOP_SIGNALS) as signals:  # each one from here on: not raised
        async with anyio.create_task_group() as tg:

            def say(line: str) -> None:
                try:
                    out(line)
                except BrokenPipeError:  # `baton demo | head -3`: the reader has what it wanted
                    quiet_stdout()
                    tg.cancel_scope.cancel()

            tg.start_soon(_stop_on_signal, signals, tg.cancel_scope, progress)
            status = await _demo(handoffs, work_s, keep, max(timeout_s, ASK_TIMEOUT_S) if ask else timeout_s,
                                 say, progress, tmux, ask)
            tg.cancel_scope.cancel()
    return status if progress.stopped_by is None else 128 + progress.stopped_by


#: what stops the demo early: Ctrl-C, ``kill``, the terminal closed
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


async def _stop_on_signal(signals: AsyncIterator[signal.Signals], scope: anyio.CancelScope,
                          progress: DemoProgress) -> None:
    """The first signal stops the demo; the ones after it wait in the receiver, unraised, until the demo
    has cleaned up."""
    async for signum in signals:
        progress.stopped_by = signal.Signals(signum)
        scope.cancel()
        return


async def _demo(handoffs: int, work_s: float, keep: bool, timeout_s: float, out: Callable[[str], None],
                progress: DemoProgress, tmux: Tmux | None, ask: bool) -> int:
    try:  # the hooks' spool is in the state folder; the demo's own files in a temporary one
        check_folder(spool_dir())
        home = tempfile.mkdtemp(prefix="baton-demo-")
    except (JournalUnusable, OSError) as exc:  # before anything starts: one line, nothing to clean up
        why = exc if isinstance(exc, JournalUnusable) else f"cannot make a temporary folder: {exc}"
        print(f"baton demo: {why}", file=sys.stderr)
        return 1
    tmux = tmux or Tmux(socket_name=f"baton-demo-{os.getpid()}", config_file="/dev/null")
    socket = tmux.describe()
    progress.handoffs, progress.keep, progress.socket = handoffs, keep, socket
    agent = f"{shlex.quote(sys.executable)} -m plugins.demo.agent --work-s {work_s}"
    os.environ["BATON_DEMO_HOME"] = home  # the agents' transcripts, read by the demo adapter
    env = {"PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "BATON_DEMO_HOME": home}
    started = time.monotonic()
    seen: list[Delivery] = []
    try:
        alice = await tmux.new_session(
            "demo", f"{agent} --name alice --role writer", width=160, height=40, env=env
        )
        bob = await tmux.split(alice.pane_id, f"{agent} --name bob --role reviewer", env=env)
        await tmux.set_title(alice.pane_id, "alice")
        await tmux.set_title(bob.pane_id, "bob")
        out(f"demo: two agents on a private tmux server; watch them with:  {socket} attach"
            + ("" if keep else "  (it stops when the demo ends; --keep leaves it running)"))
        await _wait_for_agents(tmux, [alice.pane_id, bob.pane_id])
        config = Config(
            version=1,
            tiles={
                "alice": Tile(pane=alice.pane_id, agent="demo", description="writes plans"),
                "bob": Tile(pane=bob.pane_id, agent="demo", description="reviews plans"),
            },
            routes=[
                Route.model_validate({"from": "alice", "to": "bob", "transform": "raw"}),
                Route.model_validate(
                    {
                        "from": "bob",
                        "to": "alice",
                        "transform": {
                            "type": "template",
                            "template": REVISE,
                        },
                    }
                ),
            ],
            settings=Settings(max_hops=handoffs),
        )
        done = anyio.Event()
        handed_at: dict[str, float] = {}

        def report(event: Completion | Delivery) -> None:
            if isinstance(event, Completion):
                handed_at[event.turn_id] = time.monotonic()
                out(f"  {event.tile} finished a turn (hop {event.hop})")
                if event.hop >= handoffs:
                    done.set()
                return
            if event.prompt.route == "seed":
                out(f"you -> alice: {_first_line(event.prompt.text)}")
                return
            seen.append(event)
            progress.handed = len(seen)
            latency = (time.monotonic() - handed_at.get(event.prompt.turn_id, time.monotonic())) * 1000
            out(f"hand-off {len(seen)}: {event.prompt.source} -> {event.prompt.target} "
                f"({event.state}, hop {event.prompt.hop}, {latency:.0f} ms after the turn was seen): "
                f"{_first_line(_answer_in(event.prompt))}")

        pipeline = Pipeline(config, load_registries(), tmux, report=report,
                            journal=Journal(os.path.join(home, "journal.sqlite3")))
        with anyio.move_on_after(timeout_s):
            async with anyio.create_task_group() as tg:
                await tg.start(pipeline.run)
                if ask:
                    answer = _how_to_answer(_write_routes(home, config), tmux)
                    tg.start_soon(_tell_what_they_ask, pipeline, out, answer)
                first = FIRST_PROMPT + (ASKS if ask else "")
                await pipeline.submit(Prompt(route="seed", source="you", target="alice", text=first,
                                             turn_id="seed", hop=0))
                await done.wait()
                tg.cancel_scope.cancel()
        ok = len(seen) >= handoffs and all(d.state == "delivered" for d in seen)
        out(
            f"demo: {len(seen)} hand-offs in {time.monotonic() - started:.1f}s; "
            f"the chain stopped at max_hops={handoffs}"
            if ok
            else f"demo: only {len(seen)} of {handoffs} hand-offs"
        )
        return 0 if ok else 1
    finally:
        with anyio.CancelScope(shield=True):  # a signal cancelled the demo: its clean-up still runs
            if not keep:
                shutil.rmtree(home, ignore_errors=True)
                with contextlib.suppress(TmuxError):  # tmux not installed: the error that got here says so
                    await tmux.kill_server()
            elif progress.stopped_by is None:
                out(f"demo: left running; stop it with:  {socket} kill-server")


async def _wait_for_agents(tmux: Tmux, panes: list[str], timeout_s: float = 15.0) -> None:
    with anyio.fail_after(timeout_s):
        for pane in panes:
            while True:
                info = await tmux.pane(pane)
                if proc.find_agent(info.pid, {"baton-demo"}) and "demo❯" in await tmux.capture(pane):
                    break
                await anyio.sleep(0.05)


def _write_routes(home: str, config: Config) -> str:
    """A routes.yaml naming the demo's tiles by their panes, for ``baton approve``, ``deny`` and ``web``
    from another terminal; its path."""
    path = os.path.join(home, "routes.yaml")
    tiles = "".join(f"  {name}: {{pane: \"{tile.pane}\", agent: demo}}\n"
                    for name, tile in config.tiles.items())
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"version: 1\ntiles:\n{tiles}")
    return path


def _how_to_answer(routes: str, tmux: Tmux) -> Callable[[str], str]:
    """What to type to answer a tile's prompt, from another terminal or a browser."""
    where = f"-c {shlex.quote(routes)} {tmux.describe().removeprefix('tmux ')}"
    return lambda tile: (f"  answer it: baton approve {tile} {where}  (baton deny {tile} … refuses it), "
                         f"or with Approve/Deny on the page of: baton web {where}")


async def _tell_what_they_ask(pipeline: Pipeline, out: Callable[[str], None],
                              answer: Callable[[str], str]) -> None:
    """Say what each agent asks a person, once per prompt, with how to answer it; and when it was answered."""
    said: dict[str, str | None] = {}
    while True:
        for name, runtime in pipeline.tiles.items():
            adapter = runtime.adapter
            asks = await adapter.asked_now() if isinstance(adapter, ScreenDialogs) else None
            if asks != said.get(name):
                if asks:
                    out(f"{name} waits for you: {asks}")
                    out(answer(name))
                elif said.get(name):
                    out(f"{name} was answered")
                said[name] = asks
        await anyio.sleep(0.2)


def _answer_in(prompt: Prompt) -> str:
    """The source's answer a hand-off carries, without the words the reviewer's route frames it in."""
    return prompt.text.removeprefix(REVISE.split("{response}")[0].format(source=prompt.source))


def _first_line(text: str, width: int = 70) -> str:
    line = text.strip().split("\n", 1)[0]
    return line if len(line) <= width else line[: width - 1] + "…"


def demo_command(args: argparse.Namespace) -> int:
    logging.getLogger("batonpass").setLevel(logging.DEBUG if args.verbose else logging.WARNING)
    if args.config is not None:
        print(f"baton demo: -c {args.config} is not used: the demo routes its own two agents; "
              "baton run -c uses your routes.yaml", file=sys.stderr)
        return 2
    tmux = None
    if args.socket is not None or args.socket_path is not None:  # the demo's server: a new one, there
        tmux = Tmux(socket_name=args.socket, socket_path=args.socket_path, config_file="/dev/null")
        if tmux.server_answers():
            flag = f"-L {args.socket}" if args.socket is not None else f"-S {args.socket_path}"
            print(f"baton demo: a tmux server already runs at {flag}; the demo starts (and stops) a server "
                  f"of its own: name a free one, or leave {flag.split()[0]} out", file=sys.stderr)
            return 2
    progress = DemoProgress()
    try:
        status = anyio.run(lambda: run_demo(handoffs=args.handoffs, work_s=args.work_s, keep=args.keep,
                                            progress=progress, tmux=tmux, ask=args.ask))
    except KeyboardInterrupt:  # a Ctrl-C before the demo listened for it (or after)
        progress.stopped_by, status = signal.SIGINT, 130
    # the demo is over and baton only exits from here: a Ctrl-C now would end that in a traceback of
    # whatever exit step it landed in (the tmux control client's reaping, say)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if progress.stopped_by is not None:
        with contextlib.suppress(OSError):  # SIGHUP: the terminal may be gone
            print(progress.stopped(), flush=True)
    return status
