"""Exactly once, as the crash tests count it: what a target took as prompts, held against what it should have
taken — each expected prompt once, nothing lost, nothing twice, nothing else (tests/test_fault_matrix.py, the
crash-point sweep of tests/test_crash_sweep.py)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from tests.support.cli import json_lines
from tests.support.daemons import Daemon

__all__ = ["Holding", "Want", "each_once", "history", "matches", "tally"]


@dataclass(frozen=True)
class Holding:
    """A prompt known by what it holds rather than word for word (a join's, laid out by its transform)."""

    parts: tuple[str, ...]

    def __str__(self) -> str:
        return "a prompt holding " + " and ".join(repr(p.split("\n")[0][:40]) for p in self.parts)


#: an expected prompt: its exact text, or what it holds
Want = str | Holding


def matches(want: Want, message: str) -> bool:
    return message == want if isinstance(want, str) else all(part in message for part in want.parts)


def tally(expected: Sequence[Want], got: Sequence[str]) -> tuple[list[str], dict[str, int], list[str]]:
    """(lost, duplicated, stray): the expected prompts taken no time, those taken more than once (how often),
    and what was taken that nothing expected — each shortened to its first line."""
    counts = [sum(matches(want, m) for m in got) for want in expected]
    lost = [str(want).split("\n")[0] for want, n in zip(expected, counts, strict=True) if n == 0]
    duplicated = {str(want).split("\n")[0]: n for want, n in zip(expected, counts, strict=True) if n > 1}
    stray = [m[:80] for m in got if not any(matches(want, m) for want in expected)]
    return lost, duplicated, stray


def history() -> list[dict]:
    """``baton history --json``, every row."""
    out = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", "history", "--json", "-n", "100000"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json_lines(out.stdout)


def each_once(head: str, expected: list[str], got: list[str], daemon: Daemon, tail: str) -> str:
    """Assert that the target took each expected prompt once and nothing else, and that ``baton history``
    has each delivered once; returns the run's report line (printed too)."""
    lost, duplicated, stray = tally(expected, got)
    report = f"{head} lost={len(lost)} duplicated={len(duplicated)} {tail}"
    print(report)
    assert lost == [] and duplicated == {} and stray == [], (
        f"{report}\nlost {lost}\nduplicated {duplicated}\nstray {stray}\n{daemon.stderr()[-4000:]}"
    )
    delivered = [h["prompt"] for h in history() if h["state"] == "delivered"]
    assert all(delivered.count(prompt) == 1 for prompt in expected), (report, delivered)
    assert len(delivered) == len(expected), (report, delivered)
    return report
