"""Gemini CLI's token use, from the ``tokens`` of its ``gemini`` messages, and its cost.

Each model call is a ``gemini`` message ``{"tokens": {"input", "output", "cached", "thoughts", "tool",
"total"}, "model"}``; a message written again (with its tool calls) counts once. ``input`` includes the
``cached`` tokens (the API's promptTokenCount); thoughts are billed as output.
"""

from __future__ import annotations

from typing import Any

from pipeline.plugin.usage import Price, SessionUsage, count_of

__all__ = ["PRICES", "price_of", "session_usage"]

#: US dollars per million tokens, Google's list prices (prompts up to 200k tokens), 2026-12
PRICES: dict[str, Price] = {
    "gemini-2.5-pro": Price(input=1.25, output=10.0, cache_read=0.125),
    "gemini-2.5-flash": Price(input=0.30, output=2.50, cache_read=0.03),
    "gemini-2.5-flash-lite": Price(input=0.10, output=0.40, cache_read=0.01),
    "gemini-3-pro-preview": Price(input=2.0, output=12.0, cache_read=0.20),
}


def price_of(model: str) -> Price | None:
    """The price of ``model`` (a dated or ``-preview`` variant priced as its family), or None."""
    for name in sorted(PRICES, key=len, reverse=True):
        if model == name or model.startswith(name + "-"):
            return PRICES[name]
    return None


def session_usage(messages: dict[str, dict[str, Any]], default_model: str = "") -> SessionUsage | None:
    """The tokens of a session's messages (one per id, as the file's last line says), or None when no
    message carried tokens."""
    per_model: dict[str, list[int]] = {}
    models = [m.get("model") for m in messages.values() if isinstance(m.get("model"), str)]
    default_model = str(models[-1]) if models else default_model  # early messages may name none
    for message in messages.values():
        tokens = message.get("tokens")
        if message.get("type") != "gemini" or not isinstance(tokens, dict):
            continue
        model = message.get("model") if isinstance(message.get("model"), str) else default_model
        cached = count_of(tokens.get("cached"))
        counts = (max(count_of(tokens.get("input")) - cached, 0),
                  count_of(tokens.get("output")) + count_of(tokens.get("thoughts")), cached)
        sums = per_model.setdefault(str(model), [0, 0, 0])
        for i, n in enumerate(counts):
            sums[i] += n
    if not per_model:
        return None
    cost: float | None = 0.0
    for model, (inp, out, read) in per_model.items():
        price = price_of(model)
        cost = None if price is None or cost is None else cost + price.cost(inp, out, read, 0)
    inp, out, read = (sum(s[i] for s in per_model.values()) for i in range(3))
    return SessionUsage(inp, out, read, 0, cost_usd=cost, models=tuple(m for m in per_model if m))
