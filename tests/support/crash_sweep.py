"""The crash-point sweep's harness (tests/test_crash_sweep.py; docs/testing.md, "The crash-point sweep").

A scenario is one routes.yaml between demo agents (each in its own pane, answering by itself and logging
every prompt it takes) and one expectation: which prompts each tile must take, once. :class:`Sweep` runs it
once with the journal's writes counted (W, the scenario's crash points), then once per N in 1..W with
``baton run`` killing itself (SIGKILL, from inside: :mod:`pipeline.engine.crash_points`) right after its
Nth journal write; whenever the daemon is found dead it is started again, without the switch, until the
scenario settles. After each run it checks every tile: each expected prompt taken once, nothing else typed
(no input while busy, no paste left in an input), and every hand-off in the journal ``delivered``.

Each run has its own state folder (journal, transcripts) and its own panes; the tmux server is the test's,
shared by the runs (each run kills its panes when it is done).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from pipeline.engine.crash_points import COUNT_ENV, CRASH_ENV
from pipeline.engine.journal import Journal
from tests.support.agents import demo_agent_command, read_log
from tests.support.daemons import Daemon, has_started, write_config
from tests.support.exactly_once import Want, tally
from tests.support.polling import quiet_for, wait_for
from tests.support.tmux import TmuxServer

__all__ = ["TASK", "Run", "Scenario", "Sweep"]

T = TypeVar("T")
#: how long each demo agent works on a prompt: short, so that a run is quick
WORK_S = 0.05
#: after the scenario settled, how long nothing more may happen (a second copy would show by then)
QUIET_S = 1.0
#: what the person types into the first tile to start the scenario
TASK = "task 0"
#: the labels of the daemon's start-up writes: the journal pruned, each tile's mark
_START_UP = ("delete handoffs", "insert tiles")


@dataclass(frozen=True)
class Scenario:
    """One routes.yaml and what each tile must take. ``tiles``: name -> the demo agent's role (the first
    tile gets :data:`TASK` from the person); ``expect(answers)``: name -> the prompts it must take, each once,
    given every tile's answers so far (a list per tile, in order)."""

    name: str
    tiles: Mapping[str, str]
    routes: Sequence[dict]
    expect: Callable[[Mapping[str, list[str]]], Mapping[str, list[Want]]]
    settings: Mapping[str, object] = field(default_factory=dict)
    #: what a person does once the scenario is under way (``baton pass``): called with the run, may wait
    person: Callable[[Run], None] | None = None


class Run:
    """One run of a scenario: its panes, state folder and daemon; ``crash_after`` N arms the switch."""

    def __init__(self, server: TmuxServer, folder: Path, scenario: Scenario, crash_after: int | None) -> None:
        self.server, self.folder, self.scenario, self.crash_after = server, folder, scenario, crash_after
        self.state = folder / "state"
        self.writes = folder / "writes.tsv"
        folder.mkdir(parents=True)
        self.logs = {tile: folder / f"{tile}.jsonl" for tile in scenario.tiles}
        #: the agents start now and get ready while the run before goes on (:meth:`go` waits for them)
        self.panes = {
            tile: server.new_pane(demo_agent_command(tile, role=role, work_s=WORK_S, log=self.logs[tile]),
                                  env={"XDG_STATE_HOME": str(self.state)}, width=120, height=30)
            for tile, role in scenario.tiles.items()}
        tiles = {tile: {"pane": pane, "agent": "demo"} for tile, pane in self.panes.items()}
        config = write_config(folder / "routes.yaml", server.socket, tiles, list(scenario.routes),
                              **scenario.settings)
        self.journal = Journal(self.state / "batonpass" / "journal.sqlite3")
        self.daemon = Daemon(config, folder)
        self.daemon.env = {"XDG_STATE_HOME": str(self.state), COUNT_ENV: str(self.writes)}
        if crash_after is not None:
            self.daemon.env[CRASH_ENV] = str(crash_after)
        #: whether the armed daemon died at its switch (a run that wrote fewer than N never does)
        self.crashed = False

    # ---- driving ----------------------------------------------------------------------------------------

    def go(self) -> None:
        """Start the daemon, give the first tile the person's task, let the person act, and wait until
        every tile took what it must and the journal has nothing unfinished, then a quiet moment."""
        wait_for(lambda: all("demo❯" in self.server.capture(pane) for pane in self.panes.values()),
                 what="the demo agents")
        # a run before followed the tiles: their turns are news, not history
        self.journal.mark_followed(list(self.panes), time.time())
        self.start()
        self.server.type(self.panes[next(iter(self.scenario.tiles))], TASK)
        if self.scenario.person is not None:
            self.scenario.person(self)
        while True:  # a daemon dead in the quiet moment (a late write) is started again, and waited on
            self.until(self.settled, what="every prompt in and the journal finished")
            quiet_for(QUIET_S, "a second copy of a prompt, or a prompt nobody expects")
            if self.alive():
                break
        assert self.daemon.stop() == 0, self.daemon.stderr()[-3000:]

    def alive(self) -> bool:
        return self.daemon.proc is not None and self.daemon.proc.poll() is None

    def revive(self) -> None:
        """A daemon that died at its switch is started again, without it (and without counting)."""
        if self.alive():
            return
        assert self.daemon.proc is not None
        code = self.daemon.proc.returncode
        assert code == -9 and not self.crashed, f"baton run ended {code}:\n{self.daemon.stderr()[-3000:]}"
        self.crashed = True
        self.daemon.env = {"XDG_STATE_HOME": str(self.state)}
        self.start()

    def start(self) -> None:
        """Start the daemon and wait for its start-up line (or its death, by the switch)."""
        self.daemon.start()
        wait_for(lambda: has_started(self.daemon.err.read_text()) or not self.alive(), what="baton run")

    def until(self, predicate: Callable[[], T], timeout: float = 30.0, what: str = "") -> T:
        """Wait for ``predicate`` and return its answer, starting the daemon again whenever it is found
        dead."""
        def revived_and() -> T:
            self.revive()
            return predicate()

        return wait_for(revived_and, timeout=timeout, what=what)

    # ---- what happened ----------------------------------------------------------------------------------

    def answers(self) -> dict[str, list[str]]:
        """Each tile's answers so far, from its agent's own transcript."""
        folder = self.state / "batonpass" / "demo-agents"
        out = {}
        for tile, pane in self.panes.items():
            path = folder / f"{self.server.pane_pid(pane)}.jsonl"
            records = read_log(path)
            out[tile] = [r["text"] for r in records if r.get("type") == "answer"]
        return out

    def taken(self) -> dict[str, list[str]]:
        """What each tile took as prompts (its agent's log)."""
        return {tile: [r["message"] for r in read_log(log) if "message" in r]
                for tile, log in self.logs.items()}

    def settled(self) -> bool:
        expected, taken = self.scenario.expect(self.answers()), self.taken()
        every = all(not tally(wants, taken[tile])[0] for tile, wants in expected.items())
        return every and not self.journal.unfinished()

    def problems(self) -> list[str]:
        """What is wrong after the run: lost, duplicated or stray prompts per tile, input typed while an
        agent was busy or left in its input, hand-offs not delivered."""
        found = []
        expected, taken = self.scenario.expect(self.answers()), self.taken()
        for tile in self.scenario.tiles:
            lost, duplicated, stray = tally(expected.get(tile, []), taken[tile])
            if lost or duplicated or stray:
                found.append(f"{tile}: lost {lost} duplicated {duplicated} stray {stray}")
            busy = [r for r in read_log(self.logs[tile]) if r.get("event") == "input-while-busy"]
            if busy:
                found.append(f"{tile}: typed into while busy: {busy}")
            screen = self.server.capture(self.panes[tile]).rstrip()
            if not screen.endswith("demo❯"):
                found.append(f"{tile}: its input is not empty: {screen.splitlines()[-1]!r}")
        rows = self.journal.history(limit=1000)
        found += [f"hand-off {h.key} ended {h.state} ({h.note or h.last_error})" for h in rows
                  if h.state not in ("delivered", "skipped")]
        return found

    def write_labels(self) -> list[str]:
        """The armed daemon's journal writes, in order (``N<TAB>label``)."""
        return self.writes.read_text().splitlines() if self.writes.exists() else []

    def close(self) -> None:
        if self.alive():
            self.daemon.kill()
        self.journal.close()
        for pane in self.panes.values():
            self.server.run("kill-session", "-t", pane, check=False)


class Sweep:
    """A scenario run clean once (its writes counted), then once per crash point."""

    def __init__(self, server: TmuxServer, tmp: Path, scenario: Scenario) -> None:
        self.server, self.tmp, self.scenario = server, tmp, scenario
        self.seconds: list[float] = []
        self.runs = 0
        self.prepared: Run | None = None
        #: a pane that outlives the runs: a server whose last session a run closes would exit under the next
        self.keeper = server.new_pane()

    def prepare(self, crash_after: int | None) -> Run:
        """The run for ``crash_after``, its agents starting (the one prepared already, if it is that one)."""
        if self.prepared is not None and self.prepared.crash_after == crash_after:
            run, self.prepared = self.prepared, None
            return run
        self.runs += 1
        folder = self.tmp / self.scenario.name / f"{self.runs:03d}-{crash_after or 'clean'}"
        return Run(self.server, folder, self.scenario, crash_after)

    def run(self, crash_after: int | None, then: int | None = None) -> tuple[Run, list[str]]:
        """One run; returns it (closed) and what is wrong after it. ``then``: the crash point of the next
        run, whose agents start meanwhile."""
        started = time.monotonic()
        run = self.prepare(crash_after)
        if then is not None:
            self.prepared = self.prepare(then)
        try:
            run.go()
            problems = run.problems()
        except AssertionError as exc:
            problems = [f"did not settle: {exc}"]
        finally:
            run.close()
        self.seconds.append(time.monotonic() - started)
        if problems:
            problems.append(f"daemon log:\n{run.daemon.stderr()[-3000:]}")
        return run, problems

    def crash_points(self) -> tuple[int, int]:
        """(W, S): the journal writes of a clean run (which must itself be right), and how many of them
        were the daemon's start-up (the journal pruned, the tiles' marks) before the first of a hand-off."""
        run, problems = self.run(None)
        assert not problems, "\n".join(["the clean run is wrong:", *problems])
        writes = [line.split("\t", 1)[1] for line in run.write_labels()]
        assert writes, "the clean run wrote nothing to the journal"
        start_up = next(i for i, label in enumerate(writes) if not label.startswith(_START_UP))
        return len(writes), start_up

    def sweep(self, points: Sequence[int]) -> list[str]:
        """Run once per crash point; returns a failure report per point that went wrong."""
        failures = []
        for i, n in enumerate(points):
            run, problems = self.run(n, then=points[i + 1] if i + 1 < len(points) else None)
            labels = run.write_labels()
            at = labels[n - 1].split("\t", 1)[1] if len(labels) >= n else "a write this run never made"
            if not run.crashed:
                problems.append(f"the daemon was never killed: this run made {len(labels)} writes")
            if problems:
                failures.append("\n  ".join([f"killed after write {n} ({at}):", *problems]))
        return failures
