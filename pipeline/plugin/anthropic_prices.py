"""Anthropic's model prices, for every plugin that prices Claude tokens (the AI transforms' calls, Claude
Code's sessions on the live board): one table, so the two never disagree.

Prices are Anthropic's list prices per million tokens, from https://platform.claude.com/docs/en/about-claude/
pricing ("Model pricing": base input, output, cache hits, 5-minute cache writes), as read on 2026-12-04;
standard context (<= 200k input tokens), not the Batch API. A 1-hour cache write costs twice the input price.
A model not in the table (a gateway's alias, a newer model) gets its tokens and no cost: a wrong price is
worse than none. Add a model here when Anthropic lists it.
"""

from __future__ import annotations

import re

from pipeline.plugin.usage import Price

__all__ = ["PRICES", "price_of"]

_OPUS_NEW = Price(5.0, 25.0, 0.50, 6.25)
_OPUS_OLD = Price(15.0, 75.0, 1.50, 18.75)
_SONNET = Price(3.0, 15.0, 0.30, 3.75)
#: by model id without its date suffix (``claude-sonnet-4-5-20250929`` -> ``claude-sonnet-4-5``)
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
    "claude-3-5-sonnet": _SONNET,
    "claude-haiku-4-5": Price(1.0, 5.0, 0.10, 1.25),
    "claude-3-5-haiku": Price(0.80, 4.0, 0.08, 1.0),
    "claude-3-haiku": Price(0.25, 1.25, 0.03, 0.30),
}
_DATED = re.compile(r"([-@]\d{8}|-latest|-0)$")


def price_of(model: str) -> Price | None:
    """The price of ``model``: an id (``claude-sonnet-4-5-20250929``), an alias (``claude-opus-4-0``,
    ``…-latest``) or a cloud name (``us.anthropic.claude-opus-4-1-20250805-v1:0``); None when not listed."""
    name = model.strip().lower()
    name = name[name.find("claude-"):] if "claude-" in name else name
    name = re.sub(r"-v\d+(:\d+)?$", "", name)
    while (bare := _DATED.sub("", name)) != name:
        name = bare
    return PRICES.get(name)
