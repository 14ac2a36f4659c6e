"""The proof that the board tells the truth about an agent's state (docs/board.md, "Proven on the real CLIs").

A test drives one agent through start → idle → working → idle → a permission prompt → ``baton approve`` →
working → idle → Esc → idle → a failed turn → idle, inside a :class:`StateProof`, which meanwhile

* **samples the board**: what ``baton status --json`` computes (:func:`pipeline.views.tile_status.
  tile_status` on tiles built afresh each time, as the command does) every ~150 ms in a thread of its own,
  and the real ``baton status --json`` command every ~2 s beside it (one process costs ~0.8 s and 0.4 s of
  CPU, too much to run seven times a second on CI's two cores) — each sample is (start, end, state,
  waiting_for);
* **watches the screen**: ``tmux capture-pane`` every ~100 ms, classified by the test's :class:`Screen`
  (a dialog drawn → waiting, the agent's busy line → working, its empty input → idle);
* takes the **model's log**: the fake API's :class:`~tests.fakes.loopback.StreamLog` (a request received,
  its first and last chunk, an error answered) — while a request is being answered the agent works;
* and the keys the test pressed (:meth:`StateProof.key`): from a key until the screen or the API says what
  happened next (a second at most), the truth is unknown (a board that shows the new state at once is
  right).

The truth at a moment: working while the model answers, else what the screen shows, else unknown.
:meth:`StateProof.check` fails on every sample that contradicts it: a sample taken over [start, end] may
show the truth of any moment in [start − 1 s, end + 0.25 s] (the board may be a second late; the screen is
looked at every 100 ms, so the truth itself may be late by that much). It reports, per state the truth
held for long enough to see, the delay from the truth to the end of the first sample that showed it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from pipeline.engine.config import Config
from pipeline.plugin.manager import load_registries
from pipeline.system.tmux import Tmux
from pipeline.views.states import state_words
from pipeline.views.tile_status import tile_status
from tests.fakes.loopback import StreamLog
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

__all__ = ["GRACE_S", "LEAD_S", "Sample", "Screen", "StateProof", "Verdict"]

#: how late the board may show a state
GRACE_S = 1.0
#: how much sooner than the truth the board may show it (the screen is looked at every 100 ms)
LEAD_S = 0.25
#: a state the truth holds for less than this need not have been seen
SHORTEST_S = GRACE_S + 0.5


@dataclass(frozen=True)
class Sample:
    """One look at the board: its state between ``start`` and ``end`` (time.time())."""

    start: float
    end: float
    state: str
    waiting_for: str | None
    source: str  # "status" (in-process, every ~150 ms) or "cli" (the command itself)

    @property
    def kind(self) -> str:
        return state_words(self.state)[0]


@dataclass(frozen=True)
class Screen:
    """What the agent's screen shows, from predicates on ``tmux capture-pane -p``: a dialog waiting for a
    person (a permission prompt, a start-up dialog), its busy line, its input ready for a prompt."""

    dialog: Callable[[str], bool]
    busy: Callable[[str], bool]
    ready: Callable[[str], bool]

    def kind(self, screen: str) -> str | None:
        if self.dialog(screen):
            return "waiting"
        if self.busy(screen):
            return "working"
        return "idle" if self.ready(screen) else None


@dataclass
class Segment:
    kind: str
    start: float
    end: float
    phase: str
    shown_after: float | None = None


@dataclass
class Verdict:
    agent: str
    samples: list[Sample]
    segments: list[Segment]
    contradictions: list[str]
    t0: float

    def delays(self) -> dict[str, float | None]:
        """Per phase and state (``"start: waiting"``), the longest delay to show it (None: never shown),
        over the spans the truth held it long enough to be seen."""
        out: dict[str, list[float | None]] = {}
        for seg in self.segments:
            if seg.end - seg.start >= SHORTEST_S:
                out.setdefault(f"{seg.phase}: {seg.kind}", []).append(seg.shown_after)
        return {k: None if None in v else max(d for d in v if d is not None) for k, v in out.items()}

    def line(self) -> str:
        delays = ", ".join(f"{k} {'never' if v is None else f'{v:.2f}s'}" for k, v in self.delays().items())
        cli = sum(1 for s in self.samples if s.source == "cli")
        return (f"{self.agent}: {len(self.contradictions)} contradictions in {len(self.samples)} samples "
                f"({cli} by the command); delay to show: {delays}")

    def timeline(self) -> str:
        """The truth's spans, for a failure's message."""
        return " ".join(f"+{seg.start - self.t0:.1f}s {seg.phase}:{seg.kind}({seg.end - seg.start:.1f}s)"
                        for seg in self.segments)

    def assert_true(self) -> None:
        missed = [k for k, v in self.delays().items() if v is None]
        problems = self.contradictions + [f"never shown: {k}" for k in missed]
        assert not problems, f"{self.line()}\n" + "\n".join(problems[:30]) + f"\ntruth: {self.timeline()}"


class StateProof:
    """Samples one tile's board state and the agent's screen while a test drives the agent. Use as a context
    manager; give the fake API's stream log with :meth:`check`."""

    def __init__(self, agent: str, server: TmuxServer, pane: str, screen: Screen, routes: Path, *,
                 tile: str = "agent", interval_s: float = 0.15, cli_every_s: float = 2.0) -> None:
        self.agent, self.server, self.pane, self.tile, self.screen = agent, server, pane, tile, screen
        self.routes, self.interval_s, self.cli_every_s = routes, interval_s, cli_every_s
        spec = {"version": 1, "tiles": {tile: {"pane": pane, "agent": agent}}}
        self.config = Config.model_validate(spec)
        self.samples: list[Sample] = []
        self.seen: list[tuple[float, str | None]] = []  # the screen's kind when it changed
        self.keys: list[tuple[float, str]] = []
        self.phases: list[tuple[float, str]] = [(time.time(), "start")]
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        routes.write_text(json.dumps(spec))  # for the command and for `baton approve`

    # ---- the test's side ------------------------------------------------------------------------------

    def phase(self, name: str) -> None:
        """Name what the test does from now on (the report's rows: ``approved: working``)."""
        self.phases.append((time.time(), name))

    def key(self, what: str) -> None:
        """The test is about to press a key (or run ``baton approve``): the truth is unknown until the
        screen or the API says what it did."""
        self.keys.append((time.time(), what))

    def press(self, *keys: str) -> None:
        """Press ``keys`` (tmux key names) in the agent's pane, as a person would."""
        self.key(" ".join(keys))
        self.server.run("send-keys", "-t", self.pane, *keys)

    def prompt(self, text: str, *, pause_s: float = 0.2,
               draft: Callable[[str], str | None] | None = None) -> None:
        """Type ``text`` into the agent's input and, after a person's pause (an Enter right after the keys
        may be read as part of a paste: docs/agents.md), press Enter. With ``draft`` (the agent's reader of
        its input box), wait until the input shows the text before the pause, and until it is gone after."""

        def drafted() -> bool:
            return text in ((draft or str)(self.server.capture(self.pane)) or "")

        self.server.run("send-keys", "-t", self.pane, "-l", text)
        if draft:
            wait_for(drafted, what="the typed prompt")
        self.hold(pause_s)
        self.press("Enter")
        if draft:
            wait_for(lambda: not drafted(), what="the prompt sent")

    # ---- the scenario's steps, as most agents take them --------------------------------------------------

    def answer_turn(self, text: str, prompt: Callable[[str], None] | None = None) -> None:
        """The phase ``answer``: ``text`` sent (by ``prompt``, else :meth:`prompt`), the agent working, then
        idle long enough for the board to be held to it."""
        self.phase("answer")
        (prompt or self.prompt)(text)
        self.wait_screen("working")
        self.wait_screen("idle", hold_s=1.5)

    def approval_turn(self, text: str, prompt: Callable[[str], None] | None = None) -> None:
        """The phases ``permission`` (``text`` makes the agent ask before a tool) and ``approved`` (``baton
        approve`` answers it; the agent works on, then is idle)."""
        self.phase("permission")
        (prompt or self.prompt)(text)
        self.wait_screen("waiting", hold_s=1.5)
        self.phase("approved")
        self.approve()
        self.wait_screen("working")
        self.wait_screen("idle", hold_s=1.5)

    def interrupted_turn(self, text: str, prompt: Callable[[str], None] | None = None) -> None:
        """The phase ``interrupted``: ``text`` sent, the agent working for long enough to be seen, then Esc
        and idle."""
        self.phase("interrupted")
        (prompt or self.prompt)(text)
        self.wait_screen("working", hold_s=1.5)
        self.press("Escape")
        self.wait_screen("idle", hold_s=1.5)

    def report(self, title: str, streams: Sequence[StreamLog], capsys: Any) -> None:
        """Check the samples against the truth, print the verdict under ``title`` (past pytest's capture:
        the delays are docs/board.md's table) and fail on any contradiction."""
        verdict = self.check(streams)
        with capsys.disabled():
            print(f"\n{title} {verdict.line()}\n{verdict.timeline()}")
        verdict.assert_true()

    def approve(self, verb: str = "approve") -> str:
        """``baton approve`` (or ``deny``) the tile, as a person would: its keys for the dialog on screen.
        Its output."""
        self.key(f"baton {verb}")
        command = [sys.executable, "-m", "pipeline.cli", verb, self.tile, "-c", str(self.routes), "-L",
                   self.server.socket]
        done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ), timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def screen_kind(self) -> str | None:
        with self._lock:
            return self.seen[-1][1] if self.seen else None

    def wait_screen(self, kind: str, timeout: float = 60.0, *, hold_s: float = 0.0) -> None:
        """Wait until the screen has shown ``kind`` for ``hold_s`` on end (so that the board has had the
        time to show it: a state seen for a moment only need not be shown)."""

        def held() -> bool:
            with self._lock:
                since, now = self.seen[-1] if self.seen else (0.0, None)
            return now == kind and time.time() - since >= hold_s

        try:
            wait_for(held, timeout, what=f"the screen to show {kind}")
        except AssertionError:
            raise AssertionError(f"{self.agent}: the screen never showed {kind} for {hold_s}s:\n"
                                 f"{self.server.capture(self.pane)}") from None

    def hold(self, seconds: float) -> None:
        """Let the agent be for ``seconds`` (a state lasting that long, an agent's own pace)."""
        time.sleep(seconds)  # shapes the scenario: the state lasts this long

    # ---- sampling -------------------------------------------------------------------------------------

    @contextmanager
    def running(self) -> Iterator[StateProof]:
        threads = [threading.Thread(target=f, name=f"state-proof-{f.__name__}", daemon=True)
                   for f in (self._sample_status, self._sample_cli, self._watch_screen)]
        for t in threads:
            t.start()
        try:
            yield self
        finally:
            self._stop.set()
            for t in threads:
                t.join(timeout=10)
        assert not self.errors, self.errors[:5]

    def _record(self, start: float, rows: list[dict[str, Any]], source: str) -> None:
        row = next(r for r in rows if r["tile"] == self.tile)
        with self._lock:
            self.samples.append(Sample(start, time.time(), row["state"], row.get("waiting_for"), source))

    def _sample_status(self) -> None:
        registries = load_registries()
        # a tmux client per command, as a short-lived `baton status` has; never the control-mode client the
        # test's own loop may hold
        tmux = Tmux(socket_name=self.server.socket, control=False)

        async def loop() -> None:
            while not self._stop.is_set():
                start = time.time()
                try:
                    self._record(start, await tile_status(self.config, registries, tmux), "status")
                except Exception as exc:  # noqa: BLE001 - reported by running()
                    self.errors.append(f"status sample: {exc!r}")
                # shapes the scenario: a look every interval_s, as a person's board would
                await anyio.sleep(max(0.0, self.interval_s - (time.time() - start)))

        anyio.run(loop)

    def _sample_cli(self) -> None:
        while not self._stop.wait(self.cli_every_s):
            start = time.time()
            command = [sys.executable, "-m", "pipeline.cli", "status", "--json", "-c", str(self.routes),
                       "-L", self.server.socket]
            done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ), timeout=60)
            try:
                self._record(start, json.loads(done.stdout), "cli")
            except (ValueError, StopIteration):
                self.errors.append(f"baton status --json: {done.returncode} {done.stdout[-300:]} "
                                   f"{done.stderr[-300:]}")

    def _watch_screen(self) -> None:
        while not self._stop.wait(0.1):
            text = self.server.run("capture-pane", "-p", "-J", "-t", self.pane, check=False)
            kind = self.screen.kind(text)
            with self._lock:
                if not self.seen or self.seen[-1][1] != kind:
                    self.seen.append((time.time(), kind))

    # ---- the verdict ----------------------------------------------------------------------------------

    def check(self, streams: Sequence[StreamLog]) -> Verdict:
        """The samples against the truth (the screen, the keys pressed and the model's ``streams``)."""
        timeline = self._timeline(streams)
        segments = _segments(timeline, self.phases)
        contradictions = []
        t0 = self.phases[0][0]
        for sample in self.samples:
            allowed = _kinds_between(timeline, sample.start - GRACE_S, sample.end + LEAD_S)
            if None not in allowed and sample.kind not in allowed:
                contradictions.append(
                    f"at +{sample.start - t0:.2f}s ({sample.source}) the board said {sample.state!r} "
                    f"(asks {sample.waiting_for!r}); the truth over the second before: {sorted(allowed)}")
        for seg in segments:
            shown = [s.end for s in self.samples if s.end >= seg.start and s.kind == seg.kind
                     and s.start <= seg.end + GRACE_S]
            seg.shown_after = max(0.0, min(shown) - seg.start) if shown else None
        return Verdict(self.agent, sorted(self.samples, key=lambda s: s.start), segments, contradictions, t0)

    def _timeline(self, streams: Sequence[StreamLog]) -> list[tuple[float, str | None]]:
        """(time, the truth from then on): working while a stream is open, else the screen's kind. A key
        makes the truth unknown until the screen or the model says more (a second at most); an answer
        streaming when a key was pressed (Esc) is the screen's to judge from then on (the model may stream
        on, unheard)."""
        events: list[tuple[float, str, Any]] = [(t, "screen", k) for t, k in self.seen]
        events += [(t, "key", None) for t, _ in self.keys]
        events += [(t + GRACE_S, "settle", None) for t, _ in self.keys]  # a screen that did not change
        for i, s in enumerate(streams):
            events += [(s.received, "open", i), (s.ended or float("inf"), "close", i)]
        out: list[tuple[float, str | None]] = []
        screen, open_, after_key = None, set(), False
        for t, what, value in sorted(events, key=lambda e: e[0]):
            if what == "screen":
                screen, after_key = value, False
            elif what == "key":
                open_.clear()
                after_key = True
            elif what == "settle":
                after_key = False
            elif what == "open":
                open_.add(value)
                after_key = False
            elif value in open_:
                open_.discard(value)
                after_key = False
            truth = "working" if open_ else (None if after_key else screen)
            if not out or out[-1][1] != truth:
                out.append((t, truth))
        return out


def _kinds_between(timeline: list[tuple[float, str | None]], start: float, end: float) -> set[str | None]:
    """Every truth held at some moment of [start, end] (None: unknown, or before the first)."""
    kinds: set[str | None] = set()
    before: str | None = None
    for t, kind in timeline:
        if t <= start:
            before = kind
        elif t <= end:
            kinds.add(kind)
    kinds.add(before)
    return kinds


def _segments(timeline: list[tuple[float, str | None]], phases: list[tuple[float, str]]) -> list[Segment]:
    """The spans of known truth, each named by the phase the test was in when it began."""
    out = []
    for (t, kind), (t_next, _) in zip(timeline, [*timeline[1:], (time.time(), None)], strict=True):
        if kind is not None:
            phase = [name for at, name in phases if at <= t][-1:] or ["start"]
            out.append(Segment(kind, t, t_next, phase[0]))
    return out

