"""What a model call of an AI transform cost, priced from Anthropic's table
(:mod:`pipeline.plugin.anthropic_prices`, shared with Claude Code's sessions on the live board). A model not
in the table gets its tokens recorded and no cost (``baton history`` prints tokens only). The transforms ask
for the 5-minute cache, so cache writes are priced at that rate.
"""

from __future__ import annotations

from pipeline.plugin import Usage
from pipeline.plugin.anthropic_prices import PRICES, price_of

__all__ = ["PRICES", "price_of", "usage_of"]


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
