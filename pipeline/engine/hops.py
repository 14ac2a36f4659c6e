"""Hop accounting: how many automatic hand-offs led to the turn a tile is working on.

The dispatcher records the hop of each prompt it types into a tile; the detector takes it back when that
tile's next turn completes. A turn nobody recorded was started by a person, so its hop is 0. The count
lives in the journal, so a loop's count survives a restart (an in-memory journal keeps it for one run).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.engine.journal import Journal

__all__ = ["HopLedger"]


class HopLedger:
    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    def expect(self, tile: str, hop: int) -> None:
        """A prompt with ``hop`` was typed into ``tile``: its next completion carries that hop."""
        self.journal.push_hop(tile, hop)

    def take(self, tile: str) -> int:
        """The hop of the turn ``tile`` just finished (0 if it was a person's prompt)."""
        hop = self.journal.pop_hop(tile)
        return 0 if hop is None else hop
