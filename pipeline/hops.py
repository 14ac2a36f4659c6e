"""Hop accounting: how many automatic hand-offs led to the turn a tile is working on.

The dispatcher records the hop of each prompt it types into a tile; the detector takes it back when that
tile's next turn completes. A turn nobody recorded was started by a person, so its hop is 0.
"""

from __future__ import annotations

from collections import defaultdict, deque

__all__ = ["HopLedger"]


class HopLedger:
    def __init__(self) -> None:
        self._pending: dict[str, deque[int]] = defaultdict(deque)

    def expect(self, tile: str, hop: int) -> None:
        """A prompt with ``hop`` was typed into ``tile``: its next completion carries that hop."""
        self._pending[tile].append(hop)

    def take(self, tile: str) -> int:
        """The hop of the turn ``tile`` just finished (0 if it was a person's prompt)."""
        queue = self._pending.get(tile)
        return queue.popleft() if queue else 0
