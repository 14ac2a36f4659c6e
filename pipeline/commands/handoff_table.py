"""``baton history``'s table, one for every source of hand-offs: this host's journal and every host's, read
from the bus (``--all-hosts``). Both print the same columns — ``--all-hosts`` adds HOST — and the same AI
USE cells and total line, so the two views never drift apart.

A row is a hand-off as ``--json`` prints it (a dict). Rows from the bus were written by other hosts,
perhaps by another version of batonpass: a field that is missing or of the wrong type shows as blank (or
``?``), never as a traceback. Every cell is one line of printable text.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from pipeline.commands.table import table
from pipeline.system.text import sanitize

__all__ = ["HEADER", "ai_total", "ai_use", "handoff_cells", "handoff_table", "header"]

HEADER = ("WHEN", "ROUTE", "TURN", "HOP", "OUTCOME", "TRIES", "AI USE", "WHY")
#: how much of a turn id the table shows
TURN_WIDTH = 28


def _number(value: object) -> float | None:
    """A finite number, or None (a bool, a string, NaN or a missing field is none)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _count(value: object) -> int:
    number = _number(value)
    return 0 if number is None else int(number)


def _tokens_in(usage: Mapping[str, Any]) -> int:
    """All the input a call was billed for: fresh, written to the cache, read from it."""
    return sum(_count(usage.get(k)) for k in ("input_tokens", "cache_write_tokens", "cache_read_tokens"))


def _usage(row: Mapping[str, Any]) -> Mapping[str, Any] | None:
    usage = row.get("usage")
    return usage if isinstance(usage, Mapping) and usage else None


def ai_use(usage: Mapping[str, Any] | None) -> str:
    """An AI transform's call in a few words: ``3200 in · 300 out · $0.0087`` (tokens only when the
    model's price is unknown; "" when no model was called)."""
    if not usage:
        return ""
    words = f"{_tokens_in(usage)} in · {_count(usage.get('output_tokens'))} out"
    cost = _number(usage.get("cost_usd"))
    return words if cost is None else f"{words} · ${cost:.4f}"


def ai_total(rows: Sequence[Mapping[str, Any]]) -> str:
    """One line adding up the AI transforms' calls among ``rows`` ("" when there were none)."""
    calls = [u for u in map(_usage, rows) if u is not None]
    if not calls:
        return ""
    tokens_in = sum(_tokens_in(u) for u in calls)
    tokens_out = sum(_count(u.get("output_tokens")) for u in calls)
    priced = [cost for u in calls if (cost := _number(u.get("cost_usd"))) is not None]
    line = (f"AI transforms: {len(calls)} call{'s' * (len(calls) != 1)}, {tokens_in} tokens in, "
            f"{tokens_out} out" + (f", ${sum(priced):.4f}" if priced else ""))
    unpriced = len(calls) - len(priced)
    return line + (f" ({unpriced} of a model with no known price: tokens only)" if unpriced else "")


def _when(row: Mapping[str, Any]) -> str:
    at = _number(row.get("updated"))
    try:
        return "?" if at is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))
    except (OverflowError, OSError, ValueError):  # a time the platform cannot show
        return "?"


def _text(value: object) -> str:
    """One line of printable text: a turn id or an error may come from an agent's files or a server's
    answer, and an escape sequence or a line break in a cell would garble the terminal or the table."""
    return "" if value is None else " ".join(sanitize(str(value)).split())


def handoff_cells(row: Mapping[str, Any], *, host: bool = False) -> tuple[object, ...]:
    """The cells of one hand-off, in :data:`HEADER`'s order (HOST second when ``host``)."""
    cells = (_when(row), _text(row.get("route")), _text(row.get("turn_id"))[:TURN_WIDTH],
             _text(row.get("hop")), _text(row.get("state")), _text(row.get("attempts")), ai_use(_usage(row)),
             _text(row.get("last_error") or row.get("note")))
    return (cells[0], _text(row.get("host")), *cells[1:]) if host else cells


def header(*, host: bool = False) -> tuple[str, ...]:
    return (HEADER[0], "HOST", *HEADER[1:]) if host else HEADER


def handoff_table(rows: Sequence[Mapping[str, Any]], *, host: bool = False) -> str:
    """The table of ``rows``, and the AI transforms' total under it when any called a model."""
    text = table(header(host=host), [handoff_cells(r, host=host) for r in rows])
    total = ai_total(rows)
    return f"{text}\n{total}" if total else text
