"""Cline's token use, from the ``metrics`` of its ``assistant`` messages (one per model call:
``{inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens}``, with ``modelInfo.id``), and its cost
from ``metrics.cost`` where a message carries one (Cline prices the models it knows; a custom endpoint's
calls carry none, and ``metadata.totalCost`` of the session stays 0: shown as tokens only)."""

from __future__ import annotations

from typing import Any

from pipeline.plugin.tools import json_object
from pipeline.plugin.usage import SessionUsage, count_of

__all__ = ["session_usage"]


def session_usage(messages: list[dict[str, Any]]) -> SessionUsage | None:
    """The tokens of a session's model calls, or None when none carried metrics."""
    sums, cost, seen, priced = [0, 0, 0, 0], 0.0, False, True
    models: dict[str, None] = {}
    for message in messages:
        metrics = json_object(message.get("metrics"))
        if not metrics:
            continue
        seen = True
        for i, key in enumerate(("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")):
            sums[i] += count_of(metrics.get(key))
        price = metrics.get("cost")
        if isinstance(price, int | float) and not isinstance(price, bool) and price > 0:
            cost += float(price)
        else:
            priced = False
        model = json_object(message.get("modelInfo")).get("id")
        if isinstance(model, str) and model:
            models[model] = None
    if not seen:
        return None
    return SessionUsage(input=sums[0], output=sums[1], cache_read=sums[2], cache_write=sums[3],
                        cost_usd=cost if priced else None, models=tuple(models))
