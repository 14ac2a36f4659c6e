"""What a model call of an AI transform cost: a small price table, per model, in US dollars.

Prices are Anthropic's list prices per million tokens, from https://platform.claude.com/docs/en/about-claude/
pricing ("Model pricing": base input, 5-minute cache writes — the cache the transforms ask for —, cache hits,
output), as read on 2026-12-04; standard context (≤ 200k input tokens), not the Batch API. A model not in
the table gets its tokens recorded and no cost (``baton history`` prints tokens only): a wrong price is
worse than none. Add a model here when Anthropic lists it.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from pipeline.plugin import Usage

__all__ = ["PRICES", "Price", "price_of", "usage_of"]


class Price(NamedTuple):
    """US dollars per million tokens."""

    input: float
    output: float
    cache_write: float
    cache_read: float


_OPUS_NEW = Price(5.0, 25.0, 6.25, 0.50)
_OPUS_OLD = Price(15.0, 75.0, 18.75, 1.50)
_SONNET = Price(3.0, 15.0, 3.75, 0.30)

#: by model id without its date suffix (``claude-sonnet-4-5-20250929`` → ``claude-sonnet-4-5``)
PRICES: dict[str, Price] = {
    "claude-opus-5": _OPUS_NEW,
    "claude-opus-4-8": _OPUS_NEW,
    "claude-opus-4-7": _OPUS_NEW,
    "claude-opus-4-6": _OPUS_NEW,
    "claude-opus-4-5": _OPUS_NEW,
    "claude-opus-4-1": _OPUS_OLD,
    "claude-opus-4": _OPUS_OLD,
    "claude-3-opus": _OPUS_OLD,
    "claude-sonnet-4-6": _SONNET,
    "claude-sonnet-4-5": _SONNET,
    "claude-sonnet-4": _SONNET,
    "claude-3-7-sonnet": _SONNET,
    "claude-haiku-4-5": Price(1.0, 5.0, 1.25, 0.10),
    "claude-3-5-haiku": Price(0.80, 4.0, 1.0, 0.08),
    "claude-3-haiku": Price(0.25, 1.25, 0.30, 0.03),
}

_SUFFIX = re.compile(r"(-\d{8}|-latest|-0)$")


def price_of(model: str) -> Price | None:
    """The price of ``model`` (an id, an alias like ``claude-sonnet-4-0`` or ``...-latest``), or None."""
    name = model.strip().lower()
    while (bare := _SUFFIX.sub("", name)) != name:
        name = bare
    return PRICES.get(name)


def usage_of(model: str, usage: object) -> Usage:
    """A :class:`Usage` from the Messages API's ``usage`` object (any of its counts may be missing or
    None), priced when the model is in :data:`PRICES`."""

    def tokens(name: str) -> int:
        value = getattr(usage, name, None)
        return value if isinstance(value, int) and value > 0 else 0

    counts = (tokens("input_tokens"), tokens("output_tokens"), tokens("cache_creation_input_tokens"),
              tokens("cache_read_input_tokens"))
    price = price_of(model)
    cost = None
    if price is not None:
        cost = round(sum(n * p for n, p in zip(counts, (price.input, price.output, price.cache_write,
                                                         price.cache_read), strict=True)) / 1e6, 6)
    return Usage(model, *counts, cost_usd=cost)
