"""Codex's token use, from the rollout's ``token_count`` events, and its cost.

Shapes (see tests/fixtures/codex): 0.171 writes ``event_msg`` ``{"type":"token_count","info":
{"total_token_usage": {input_tokens, cached_input_tokens, output_tokens, reasoning_output_tokens,
total_tokens}, "last_token_usage": …}}`` — the thread's running total, ``info: null`` before the first
response — and a ``token_usage_record`` line whose ``thread_token_usage`` is the same total. Older Codex
wrote the counts flat in the ``token_count`` payload, one response's worth each (summed here). The model
comes from the latest ``turn_context``. ``input_tokens`` includes the cached ones; ``output_tokens``
includes reasoning. A line of another shape adds nothing; the legacy format (2025, no envelope) records
no usage at all.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pipeline.plugin.usage import MatchingLines, Price, SessionUsage, count_of

__all__ = ["PRICES", "RolloutUsage", "price_of"]

#: USD per million tokens (input, output, cached input), from OpenAI's API pricing page
#: (https://openai.com/api/pricing) as of 2025-11. A model not listed here is shown with its tokens only.
PRICES: dict[str, Price] = {
    "gpt-5.1-codex-max": Price(1.25, 10.0, 0.125),
    "gpt-5.1-codex": Price(1.25, 10.0, 0.125),
    "gpt-5.1-codex-mini": Price(0.25, 2.0, 0.025),
    "gpt-5.1": Price(1.25, 10.0, 0.125),
    "gpt-5-codex": Price(1.25, 10.0, 0.125),
    "gpt-5": Price(1.25, 10.0, 0.125),
    "gpt-5-mini": Price(0.25, 2.0, 0.025),
    "gpt-5-nano": Price(0.05, 0.40, 0.005),
    "gpt-4.1": Price(2.0, 8.0, 0.50),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.10),
    "o3": Price(2.0, 8.0, 0.50),
    "o4-mini": Price(1.10, 4.40, 0.275),
    "codex-mini-latest": Price(1.50, 6.0, 0.375),
}
_DATED = re.compile(r"-\d{4}-\d{2}-\d{2}$")
_FIELDS = ("input_tokens", "cached_input_tokens", "output_tokens")


def price_of(model: str) -> Price | None:
    return PRICES.get(_DATED.sub("", model.rpartition("/")[2]))


def _counts(value: object) -> tuple[int, int, int] | None:
    """(input, cached input, output) from a usage object, or None if it is not one."""
    if not isinstance(value, dict) or not any(k in value for k in _FIELDS):
        return None
    inp, cached, out = (count_of(value.get(k)) for k in _FIELDS)
    return inp, min(cached, inp), out


class RolloutUsage:
    """The tokens of one rollout, read as it grows. A running total that grows is split by the model of
    the turn it grew in, so a ``/model`` switch mid-session is priced right."""

    def __init__(self, rollout: Path) -> None:
        self.path = Path(rollout)
        self._tail = MatchingLines(rollout, (b"token_count", b"token_usage_record", b"turn_context"))
        self._reset()

    def _reset(self) -> None:
        self.model = ""
        self._running: tuple[int, int, int] = (0, 0, 0)
        self._sums = [0, 0, 0]
        self._cost: float | None = 0.0
        self._models: dict[str, None] = {}
        self._seen = False

    def read(self) -> SessionUsage | None:
        """The usage so far, reading only what was appended since the last call; None when the rollout
        holds no usage of a known shape."""
        records = self._tail.read()
        if self._tail.restarted:
            self._reset()
        for record in records:
            self._feed(record)
        if not self._seen:
            return None
        inp, cached, out = self._sums
        return SessionUsage(input=inp - cached, output=out, cache_read=cached, cost_usd=self._cost,
                     models=tuple(m for m in self._models if m))

    def _feed(self, record: dict[str, Any]) -> None:
        payload = record.get("payload")
        if not isinstance(payload, dict):
            return
        kind = record.get("type")
        if kind == "turn_context":
            model = payload.get("model")
            if isinstance(model, str) and model:
                self.model = model
        elif kind == "token_usage_record":
            self._running_total(_counts(payload.get("thread_token_usage")))
        elif kind == "event_msg" and payload.get("type") == "token_count":
            info = payload.get("info")
            if isinstance(info, dict):
                self._running_total(_counts(info.get("total_token_usage")))
            elif (flat := _counts(payload)) is not None:
                self._add(flat)

    def _running_total(self, total: tuple[int, int, int] | None) -> None:
        if total is None:
            return
        delta = tuple(max(now - before, 0) for now, before in zip(total, self._running, strict=True))
        self._running = total
        self._add((delta[0], delta[1], delta[2]))

    def _add(self, counts: tuple[int, int, int]) -> None:
        self._seen = True
        inp, cached, out = counts
        if not inp + out:
            return
        for i, n in enumerate(counts):
            self._sums[i] += n
        self._models[self.model] = None
        price = price_of(self.model)
        if price is None or self._cost is None:
            self._cost = None
            return
        self._cost += price.cost(inp - cached, out, cached, 0)
