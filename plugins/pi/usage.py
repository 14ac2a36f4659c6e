"""pi's token use and cost, from its assistant messages: pi records both itself (docs/agents.md, pi).

Each assistant message carries ``usage: {"input", "output", "cacheRead", "cacheWrite", "totalTokens",
"cost": {…, "total"}}`` (``input`` without the cached tokens), priced by pi from its model catalogue or the
``cost`` of a ``models.json`` model; 1.x adds ``usage`` entries (cache warming) that count too. A model with
no price costs 0 there: the cost is then None, as pi cannot tell either.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pipeline.plugin.usage import SessionUsage, count_of

__all__ = ["session_usage"]


def session_usage(messages: Iterable[dict[str, Any]]) -> SessionUsage | None:
    """The sum of the assistant messages' usage, or None when none carries any."""
    sums, cost, seen = [0, 0, 0, 0], 0.0, False
    models: list[str] = []
    for message in messages:
        usage = message.get("usage")
        if not isinstance(usage, dict):
            continue
        seen = True
        for i, key in enumerate(("input", "output", "cacheRead", "cacheWrite")):
            sums[i] += count_of(usage.get(key))
        total = (usage.get("cost") or {}).get("total") if isinstance(usage.get("cost"), dict) else None
        cost += total if isinstance(total, (int, float)) and not isinstance(total, bool) else 0.0
        model = message.get("model")
        if isinstance(model, str) and model not in models:
            models.append(model)
    if not seen:
        return None
    return SessionUsage(input=sums[0], output=sums[1], cache_read=sums[2], cache_write=sums[3],
                        cost_usd=cost if cost > 0 or not any(sums) else None, models=tuple(models))
