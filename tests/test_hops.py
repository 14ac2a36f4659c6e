"""The hop ledger on its own (no tmux): how deep in a chain of automatic hand-offs a tile's turn is."""

from __future__ import annotations

from pathlib import Path

from pipeline.engine.hops import HopLedger
from pipeline.engine.journal import MEMORY, Journal


def test_a_turn_nobody_recorded_was_a_persons_prompt() -> None:
    assert HopLedger(Journal(MEMORY)).take("a") == 0


def test_each_prompt_typed_gives_its_hop_to_the_next_turn_in_order_per_tile() -> None:
    hops = HopLedger(Journal(MEMORY))
    hops.expect("a", 1)
    hops.expect("b", 5)
    hops.expect("a", 3)
    assert [hops.take("a"), hops.take("a"), hops.take("a")] == [1, 3, 0]
    assert hops.take("b") == 5


def test_a_loops_count_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "journal.sqlite3"
    HopLedger(Journal(path)).expect("a", 4)
    assert HopLedger(Journal(path)).take("a") == 4  # a new run over the same journal
    assert HopLedger(Journal(path)).take("a") == 0  # taken once
