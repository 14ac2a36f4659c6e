"""Claude Code's token use, from the transcript's assistant lines (``message.usage``), and its cost.

Claude Code writes one transcript line per content block of a message, each carrying the message's
``usage`` (the same ``message.id``): a message counts once, with its last line's numbers. Subagents write
their own transcripts under ``<session>/subagents/``; their tokens are the session's too. Shapes seen:
2.1.x ``{input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens,
cache_creation: {ephemeral_5m_input_tokens, ephemeral_1h_input_tokens}, …}``; 1.0.x without the cache
fields; ``usage: null`` in some subagent lines. A line of another shape adds nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline.plugin.anthropic_prices import PRICES, price_of
from pipeline.plugin.usage import MatchingLines, SessionUsage, count_of

__all__ = ["PRICES", "TranscriptUsage", "price_of"]

#: one message's counts: input, output, cache read, cache write, of which 1-hour cache write
_Counts = tuple[int, int, int, int, int]


class TranscriptUsage:
    """The tokens of one session: its transcript and its subagents' transcripts, each read as it grows."""

    def __init__(self, transcript: Path) -> None:
        self.transcript = Path(transcript)
        self._tails: dict[Path, MatchingLines] = {}
        #: (file, message id or line number) -> (model, counts): a message read again replaces its counts
        self._messages: dict[tuple[Path, str], tuple[str, _Counts]] = {}
        #: per model: the sums of its messages' counts, kept up as messages come (a read costs what it read)
        self._per_model: dict[str, list[int]] = {}
        self._lines = 0

    def files(self) -> list[Path]:
        subagents = self.transcript.with_suffix("") / "subagents"
        try:
            found = sorted(subagents.glob("*.jsonl"))
        except OSError:
            found = []
        return [self.transcript, *found]

    def read(self) -> SessionUsage | None:
        """The session's usage so far, reading only what was appended since the last call; None when no
        assistant line of a known shape was seen."""
        for path in self.files():
            tail = self._tails.get(path)
            if tail is None:
                tail = self._tails[path] = MatchingLines(path, (b'"usage"',))
            records = tail.read()
            if tail.restarted:
                for key in [k for k in self._messages if k[0] == path]:
                    self._count(key, None)
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
        self._count((path, key), (model if isinstance(model, str) else "", counts))

    def _count(self, key: tuple[Path, str], entry: tuple[str, _Counts] | None) -> None:
        """Put ``entry`` (model, counts) in place of what ``key`` counted before (None: forget it)."""
        old = self._messages.pop(key, None)
        for sign, item in ((-1, old), (1, entry)):
            if item is None:
                continue
            sums = self._per_model.setdefault(item[0], [0, 0, 0, 0, 0])
            for i, n in enumerate(item[1]):
                sums[i] += sign * n
        if entry is not None:
            self._messages[key] = entry

    def total(self) -> SessionUsage:
        per_model = {model: sums for model, sums in self._per_model.items() if any(sums)}
        cost: float | None = 0.0
        for model, (inp, out, read, write, hour) in per_model.items():
            price = price_of(model)
            if price is None or cost is None:
                cost = None
                continue
            cost += price.cost(inp, out, read, write - hour) + hour * price.input * 2 / 1_000_000
        inp, out, read, write = (sum(s[i] for s in per_model.values()) for i in range(4))
        models = tuple(m for m in per_model if m)
        return SessionUsage(inp, out, read, write, cost_usd=cost, models=models)
