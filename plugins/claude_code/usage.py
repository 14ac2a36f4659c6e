"""Claude Code's token use, from the transcript's assistant lines (``message.usage``), and its cost.

Claude Code writes one transcript line per content block of a message, each carrying the message's
``usage`` (the same ``message.id``): a message counts once, with its last line's numbers. Subagents write
their own transcripts under ``<session>/subagents/``; their tokens are the session's too. Shapes seen:
2.1.x ``{input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens,
cache_creation: {ephemeral_5m_input_tokens, ephemeral_1h_input_tokens}, …}``; 1.0.x without the cache
fields; ``usage: null`` in some subagent lines. A line of another shape adds nothing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pipeline.plugin.usage import MatchingLines, Price, Usage, count_of

__all__ = ["PRICES", "TranscriptUsage", "price_of"]

#: USD per million tokens (input, output, cache read, 5-minute cache write), from Anthropic's pricing page
#: (https://www.anthropic.com/pricing, "Model pricing" in the API docs) as of 2025-11. A 1-hour cache write
#: costs twice the input price. Sonnet's long-context (> 200k) surcharge is not modelled. A model not listed
#: here (a newer one, a gateway's alias) is shown with its tokens only.
PRICES: dict[str, Price] = {
    "claude-opus-4-5": Price(5.0, 25.0, 0.50, 6.25),
    "claude-opus-4-1": Price(15.0, 75.0, 1.50, 18.75),
    "claude-opus-4": Price(15.0, 75.0, 1.50, 18.75),
    "claude-sonnet-4-5": Price(3.0, 15.0, 0.30, 3.75),
    "claude-sonnet-4": Price(3.0, 15.0, 0.30, 3.75),
    "claude-3-7-sonnet": Price(3.0, 15.0, 0.30, 3.75),
    "claude-3-5-sonnet": Price(3.0, 15.0, 0.30, 3.75),
    "claude-haiku-4-5": Price(1.0, 5.0, 0.10, 1.25),
    "claude-3-5-haiku": Price(0.80, 4.0, 0.08, 1.0),
    "claude-3-opus": Price(15.0, 75.0, 1.50, 18.75),
    "claude-3-haiku": Price(0.25, 1.25, 0.03, 0.30),
}
_DATED = re.compile(r"[-@]\d{8}$")


def price_of(model: str) -> Price | None:
    """The price of ``model`` (``claude-sonnet-4-5-20250929``, ``us.anthropic.claude-opus-4-1-…-v1:0``)."""
    name = model[model.find("claude-"):] if "claude-" in model else model
    name = re.sub(r"-v\d+(:\d+)?$", "", name)
    return PRICES.get(_DATED.sub("", name))


#: one message's counts: input, output, cache read, cache write, of which 1-hour cache write
_Counts = tuple[int, int, int, int, int]


class TranscriptUsage:
    """The tokens of one session: its transcript and its subagents' transcripts, each read as it grows."""

    def __init__(self, transcript: Path) -> None:
        self.transcript = Path(transcript)
        self._tails: dict[Path, MatchingLines] = {}
        #: (file, message id or line number) -> (model, counts): a message read again replaces its counts
        self._messages: dict[tuple[Path, str], tuple[str, _Counts]] = {}
        self._lines = 0

    def files(self) -> list[Path]:
        subagents = self.transcript.with_suffix("") / "subagents"
        try:
            found = sorted(subagents.glob("*.jsonl"))
        except OSError:
            found = []
        return [self.transcript, *found]

    def read(self) -> Usage | None:
        """The session's usage so far, reading only what was appended since the last call; None when no
        assistant line of a known shape was seen."""
        for path in self.files():
            tail = self._tails.get(path)
            if tail is None:
                tail = self._tails[path] = MatchingLines(path, (b'"usage"',))
            records = tail.read()
            if tail.restarted:
                self._messages = {k: v for k, v in self._messages.items() if k[0] != path}
            for record in records:
                self._add(path, record)
        return self.total() if self._messages else None

    def _add(self, path: Path, record: dict[str, Any]) -> None:
        message = record.get("message")
        if record.get("type") != "assistant" or not isinstance(message, dict):
            return
        usage = message.get("usage")
        if not isinstance(usage, dict):
            return
        cache = usage.get("cache_creation")
        hour = count_of(cache.get("ephemeral_1h_input_tokens")) if isinstance(cache, dict) else 0
        write = count_of(usage.get("cache_creation_input_tokens"))
        counts = (count_of(usage.get("input_tokens")), count_of(usage.get("output_tokens")),
                  count_of(usage.get("cache_read_input_tokens")), write, min(hour, write))
        model = message.get("model")
        if model == "<synthetic>":
            return  # written by Claude Code itself (an API error, an interrupt): no tokens were used
        key = message.get("id")
        if not isinstance(key, str):
            self._lines += 1
            key = f"line {self._lines}"
        self._messages[(path, key)] = (model if isinstance(model, str) else "", counts)

    def total(self) -> Usage:
        sums = [0, 0, 0, 0]
        cost: float | None = 0.0
        models: dict[str, None] = {}
        for model, (inp, out, read, write, hour) in self._messages.values():
            if not inp + out + read + write:
                continue
            for i, n in enumerate((inp, out, read, write)):
                sums[i] += n
            models[model] = None
            price = price_of(model)
            if price is None or cost is None:
                cost = None
                continue
            cost += price.cost(inp, out, read, write - hour) + hour * price.input * 2 / 1_000_000
        return Usage(sums[0], sums[1], sums[2], sums[3], cost_usd=cost, models=tuple(m for m in models if m))
