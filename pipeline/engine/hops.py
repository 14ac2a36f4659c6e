"""Hop accounting: how many automatic hand-offs led to the turn a tile is working on.

The dispatcher records the hop of each prompt it types into a tile; the detector takes it back when that
tile's next turn completes. A turn nobody recorded was started by a person, so its hop is 0.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pipeline.engine.journal import Journal

__all__ = ["HopLedger"]


class HopLedger:
    """In memory, or in the journal when there is one (so that a loop's count survives a restart)."""

    def __init__(self, journal: Journal | None = None) -> None:
        self.journal = journal
        self._pending: dict[str, deque[int]] = defaultdict(deque)

    def expect(self, tile: str, hop: int) -> None:
        """A prompt with ``hop`` was typed into ``tile``: its next completion carries that hop."""
        if self.journal is not None:
            self.journal.push_hop(tile, hop)
        else:
            self._pending[tile].append(hop)

    def take(self, tile: str) -> int:
        """The hop of the turn ``tile`` just finished (0 if it was a person's prompt)."""
        if self.journal is not None:
            hop = self.journal.pop_hop(tile)
            return 0 if hop is None else hop
        queue = self._pending.get(tile)
        return queue.popleft() if queue else 0
