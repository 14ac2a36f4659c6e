"""Copilot CLI's token use, from the ``session.usage_record`` lines of ``events.jsonl`` (one per model call:
``data.usage`` = ``{model, inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens, cost, isByok, …}``).

``cost`` there is Copilot's premium-request multiplier, not money: a subscription is billed by requests, so
its sessions show tokens only. With a key of one's own (``isByok``) the provider bills the tokens: Claude
models are priced at Anthropic's list prices (``pipeline.plugin.anthropic_prices``); other models show tokens
only (a wrong price is worse than none).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.plugin.anthropic_prices import price_of
from pipeline.plugin.tools import json_object
from pipeline.plugin.usage import MatchingLines, SessionUsage, count_of

__all__ = ["EventsUsage"]


class EventsUsage:
    """The tokens of one session's ``events.jsonl``, read as it grows."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._tail = MatchingLines(path, (b"session.usage_record",))
        self._reset()

    def _reset(self) -> None:
        self._sums = [0, 0, 0, 0]
        self._cost: float | None = 0.0
        self._models: dict[str, None] = {}
        self._seen = False

    def read(self) -> SessionUsage | None:
        """The usage so far (reading only what was appended since the last call); None before any."""
        records = self._tail.read()
        if self._tail.restarted:
            self._reset()
        for record in records:
            if record.get("type") == "session.usage_record":
                self._feed(json_object(json_object(record.get("data")).get("usage")))
        if not self._seen:
            return None
        inp, out, cache_read, cache_write = self._sums
        return SessionUsage(input=inp, output=out, cache_read=cache_read, cache_write=cache_write,
                            cost_usd=self._cost, models=tuple(self._models))

    def _feed(self, usage: dict[str, Any]) -> None:
        counts = [count_of(usage.get(k)) for k in
                  ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")]
        if not usage:
            return
        self._seen = True
        for i, n in enumerate(counts):
            self._sums[i] += n
        raw = usage.get("model")
        model = raw if isinstance(raw, str) else ""
        if model:
            self._models[model] = None
        price = price_of(model.replace(".", "-")) if usage.get("isByok") is True else None
        if price is None or self._cost is None:
            self._cost = None
            return
        self._cost += price.cost(counts[0], counts[1], counts[2], counts[3])
