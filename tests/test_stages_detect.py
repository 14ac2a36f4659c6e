"""The detector on its own (no tmux): one completion per turn, and the catch-up it holds for every adapter.

A turn's fate after a restart is decided by the journal, whichever adapter reports it: the first run of a
tile records what is on disk as history; later runs hand off what ended while they were down (once), record
as skipped what is older than catch_up_s, and report again a turn a crash left seen but not routed."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from pipeline.engine.hops import HopLedger
from pipeline.engine.journal import Journal
from pipeline.engine.stages.detect import CompletionDetector
from pipeline.plugin.events import Completion
from tests.support.polling import until
from tests.support.stages import completion, config, ended, tiles

pytestmark = pytest.mark.anyio


class Run:
    """One run of batonpass: a detector over ``journal``, its output stream collected."""

    def __init__(self, journal: Journal, catch_up_s: float = 300) -> None:
        self.cfg = config(f"""
version: 1
settings: {{catch_up_s: {catch_up_s}}}
tiles:
  a: {{pane: '%1', agent: shell}}
  b: {{pane: '%2', agent: shell}}
routes:
  - {{from: a, to: b}}
""")
        self.tiles = tiles(self.cfg)
        self.journal = journal
        self.detector = CompletionDetector(self.tiles, HopLedger(journal), journal=journal, config=self.cfg)
        self.sent, self.out = anyio.create_memory_object_stream[Completion](64)
        self.detector._send = self.sent

    @property
    def a(self):
        return self.tiles["a"]

    def passed(self) -> list[str]:
        got = []
        while True:
            try:
                got.append(self.out.receive_nowait().turn_id)
            except anyio.WouldBlock:
                return got

    def route(self, turn: str) -> None:
        """What the router does with a completion: its hand-offs recorded, the turn marked routed."""
        self.journal.record_routing(completion("a", turn), [])


def states(journal: Journal) -> dict[str, tuple[str, str]]:
    return {h.turn_id: (h.state, h.note) for h in journal.history()}


async def test_first_run_records_what_is_on_disk_as_history(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.sqlite3")
    run = Run(journal)
    run.a.adapter.on_disk = [ended("t1", 100), ended("t2", 5)]
    await run.detector.catch_up(run.a)
    assert run.passed() == []
    assert {t: s for t, (s, _) in states(journal).items()} == {"t1": "skipped", "t2": "skipped"}
    assert all(note.startswith("history:") for _, note in states(journal).values())
    assert journal.followed_until("a") is not None


async def test_a_restart_hands_off_what_ended_while_down_once(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.sqlite3")
    first = Run(journal)
    first.a.adapter.on_disk = [ended("old", 50)]
    await first.detector.catch_up(first.a)
    # down: two turns end meanwhile
    second = Run(journal)
    second.a.adapter.on_disk = [ended("old", 50), ended("down1", 0.5), ended("down2", 0.2)]
    await second.detector.catch_up(second.a)
    assert second.passed() == ["down1", "down2"]
    for turn in ("down1", "down2"):
        second.route(turn)
    await second.detector.accept(completion("a", "down2", signal="hook"))  # another signal: dropped
    await second.a.ctx.resolved()  # the adapter follows a new session: asked again, nothing new
    assert second.passed() == [] and len(second.a.adapter.asked) == 2
    third = Run(journal)
    third.a.adapter.on_disk = second.a.adapter.on_disk
    await third.detector.catch_up(third.a)
    assert third.passed() == []


async def test_a_turn_older_than_catch_up_s_is_recorded_skipped_with_the_reason(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.sqlite3")
    journal.mark_followed(["a"], time.time() - 3600)  # a run followed a until an hour ago
    run = Run(journal, catch_up_s=10)
    run.a.adapter.on_disk = [ended("stale", 1800), ended("fresh", 2)]
    await run.detector.catch_up(run.a)
    assert run.passed() == ["fresh"]
    state, note = states(journal)["stale"]
    assert state == "skipped" and "catch_up_s=10" in note


async def test_a_turn_seen_but_not_routed_before_a_crash_is_reported_again_with_its_hop(
    tmp_path: Path,
) -> None:
    journal = Journal(tmp_path / "j.sqlite3")
    first = Run(journal)
    await first.detector.catch_up(first.a)
    first.detector.hops.expect("a", 3)  # a hand-off typed into a: its next turn is hop 3
    await first.detector.accept(ended("t", 120).completion("a", "file"))
    (seen,) = first.passed()
    # killed before the router recorded the hand-offs; the mark moved past the turn meanwhile
    journal.mark_followed(["a"], time.time())
    second = Run(journal)
    second.a.adapter.on_disk = [ended("t", 120)]
    await second.detector.catch_up(second.a)
    assert second.passed() == ["t"]
    assert journal.seen_completion("a", "t") == (3, False)


async def test_live_reports_pass_once_whichever_signal_comes_first(tmp_path: Path) -> None:
    run = Run(Journal(tmp_path / "j.sqlite3"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(run.detector._follow, run.a)
        await run.a.adapter.live_in.send(ended("live", 0))
        await until(lambda: run.a.adapter.on_disk, 5, "the live turn on disk", interval=0.01)
        await run.detector.accept(completion("a", "live", signal="hook"))
        tg.cancel_scope.cancel()
    assert run.passed() == ["live"]
