"""``baton history``'s table, one for every source of hand-offs: this host's journal and every host's, read
from the bus (``--all-hosts``). Both print the same columns — ``--all-hosts`` adds HOST — and the same AI
USE cells and total line, so the two views never drift apart.

A row is a hand-off as ``--json`` prints it (a dict). Rows from the bus were written by other hosts,
perhaps by another version of batonpass: a field that is missing or of the wrong type shows as blank (or
``?``), never as a traceback. Every cell is one line of printable text.

``--follow`` prints the same columns one row at a time, for as long as it runs (:class:`FollowTable`): its
widths are fixed when it starts, so a later row lines up with the earlier ones. When no hand-off matches,
both views say so the same way (:func:`no_match`).

Rows are in time order: by when each last changed (``updated``, the time WHEN shows), oldest first
(:func:`in_time_order`). A failed hand-off's WHY ends with the command that types it again (``baton retry
KEY``), so the table the README sends people to shows the key.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from pipeline.cmdline.output import table
from pipeline.engine.journal import STATES, HistoryFilter
from pipeline.system.text import fit, sanitize, text_width

__all__ = ["HEADER", "FollowTable", "ai_total", "ai_use", "describe_filter", "handoff_cells", "handoff_table",
           "header", "in_time_order", "no_match"]

R = TypeVar("R", bound=Mapping[str, Any])

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


def ai_use(usage: Mapping[str, Any] | None, width: int | None = None) -> str:
    """An AI transform's call in a few words: ``3200 in · 300 out · $0.0087`` (tokens only when the
    model's price is unknown; "" when no model was called). Within ``width`` columns, shorter words:
    ``3500 tok · $0.0087``, then the cost alone."""
    if not usage:
        return ""
    tokens_in, tokens_out = _tokens_in(usage), _count(usage.get("output_tokens"))
    cost = _number(usage.get("cost_usd"))
    forms = [f"{tokens_in} in · {tokens_out} out", f"{tokens_in + tokens_out} tok"]
    if cost is not None:
        forms = [f"{form} · ${cost:.4f}" for form in forms] + [f"${cost:.4f}"]
    return next((form for form in forms if width is None or text_width(form) <= width), forms[-1])


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


def in_time_order(rows: Iterable[R]) -> list[R]:
    """``rows`` by when each last changed (``updated``), oldest first; a row without a time first."""
    return sorted(rows, key=lambda row: (_number(row.get("updated")) or 0.0, str(row.get("key", ""))))


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


def _why(row: Mapping[str, Any]) -> str:
    """Why it ended so; a failed hand-off's with the command that types it again (not when its key holds
    what a terminal cannot show as it is: ``--json`` has that one)."""
    why, key = _text(row.get("last_error") or row.get("note")), row.get("key")
    if row.get("state") != "failed" or row.get("kind") == "action" or not key or _text(key) != key:
        return why
    retry = f"baton retry {key}"
    return f"{why} ({retry})" if why else retry


def handoff_cells(row: Mapping[str, Any], *, host: bool = False, ai_width: int | None = None
                  ) -> tuple[object, ...]:
    """The cells of one hand-off, in :data:`HEADER`'s order (HOST second when ``host``); AI USE's words
    within ``ai_width`` columns when given."""
    state = _text(row.get("state")) + (f" ({_text(row['joining'])})" if row.get("joining") else "")
    cells = (_when(row), _text(row.get("route")), _text(row.get("turn_id"))[:TURN_WIDTH],
             _text(row.get("hop")), state, _text(row.get("attempts")),
             ai_use(_usage(row), ai_width), _why(row))
    return (cells[0], _text(row.get("host")), *cells[1:]) if host else cells


def header(*, host: bool = False) -> tuple[str, ...]:
    return (HEADER[0], "HOST", *HEADER[1:]) if host else HEADER


def handoff_table(rows: Sequence[Mapping[str, Any]], *, host: bool = False) -> str:
    """The table of ``rows``, and the AI transforms' total under it when any called a model."""
    text = table(header(host=host), [handoff_cells(r, host=host) for r in rows])
    total = ai_total(rows)
    return f"{text}\n{total}" if total else text


#: the narrowest ROUTE, TURN and AI USE get in a narrow terminal (columns; AI USE's: a cost, ``$0.0087``);
#: the others keep their width
_FLOOR = {1: 8, 2: 8, 6: 8}
#: how wide a column is at least, whatever the rows known at the start hold: WHEN's time and the longest
#: state take that much, a later hand-off may name a longer route or turn, or call a model (its cost)
_ROOM = {0: len("2026-12-04 15:00:00"), 1: 12, 2: 12, 4: max(map(len, STATES)), 6: len("$10.0000")}
#: WHY's least room at the end of the line; with less, it goes on a line of its own under the row
_WHY_ROOM = 24
_GAP = "  "


class FollowTable:
    """``baton history --follow``'s table: :data:`HEADER`'s columns, one row at a time. The widths are fixed
    from the rows known at the start (the backlog) and the terminal's ``width``, so a later cell that is
    wider is cut with ``…`` and every row lines up under the header. WHY, last, takes the rest of the line;
    in a terminal too narrow to leave it :data:`_WHY_ROOM` columns (under about 100), it goes on a line of
    its own under its row. ``width`` None (standard output is no terminal): nothing is cut but the fixed
    columns."""

    def __init__(self, backlog: Sequence[Mapping[str, Any]], width: int | None) -> None:
        cells = [HEADER, *(handoff_cells(r) for r in backlog)]
        widths = [max([_ROOM.get(i, 0), *(text_width(str(row[i])) for row in cells)])
                  for i in range(len(HEADER) - 1)]
        widths[2] = min(widths[2], TURN_WIDTH)
        while width is not None and self._used(widths) + _WHY_ROOM > width:
            narrowing = [i for i in _FLOOR if widths[i] > _FLOOR[i]]
            if not narrowing:
                break
            widths[max(narrowing, key=lambda i: widths[i])] -= 1
        self.widths = widths
        self.width = width
        self.why_below = width is not None and self._used(widths) + _WHY_ROOM > width
        self.latest: dict[str, Mapping[str, Any]] = {}

    @staticmethod
    def _used(widths: Sequence[int]) -> int:
        return sum(widths) + len(_GAP) * len(widths)

    def header(self) -> str:
        return self._cut(self._columns(HEADER))

    def line(self, row: Mapping[str, Any]) -> str:
        """The row's line (two when WHY goes under it); the row is also kept as its hand-off's latest, for
        :meth:`total`."""
        self.latest[_text(row.get("key"))] = row
        cells = handoff_cells(row, ai_width=self.widths[6])
        if row.get("joining") and text_width(str(cells[4])) > self.widths[4]:  # the count must not be cut
            cells = (*cells[:4], "joining", *cells[5:-1], f"{_text(row['joining'])}; {cells[-1]}")
        if not self.why_below:
            return self._cut(self._columns(cells))
        columns = self._cut(self._columns([*cells[:-1], ""]))
        return columns if not cells[-1] else f"{columns}\n{self._cut(f'  └ {cells[-1]}')}"

    def total(self) -> str:
        """The AI transforms' total over the hand-offs shown, each counted once in its latest state."""
        return ai_total(list(self.latest.values()))

    def _columns(self, cells: Sequence[object]) -> str:
        fixed = [fit(str(c), w, pad=True) for c, w in zip(cells, self.widths, strict=False)]
        return _GAP.join([*fixed, str(cells[-1])]).rstrip()

    def _cut(self, line: str) -> str:
        return line if self.width is None else fit(line, self.width)


def _filtered(match: HistoryFilter) -> bool:
    return match != HistoryFilter()


def describe_filter(match: HistoryFilter) -> str:
    """The filters of ``match`` as a person gave them: ``--tile reviewer --since 2026-12-04 08:00:00``."""
    words = [f"--{name} {value}" for name, value in
             (("route", match.route), ("tile", match.tile), ("outcome", match.outcome)) if value is not None]
    words += ["--refused"] if match.refused else []
    if match.since is not None:
        words.append(f"--since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(match.since))}")
    return " ".join(words)


def no_match(match: HistoryFilter, others: bool, where: str = "") -> str:
    """What to say when nothing matches: which filters, and whether hand-offs exist without them."""
    if not _filtered(match) or not others:
        return f"no hand-offs{where} yet"
    holder = "the bus" if where else "the journal"
    return f"no hand-offs match {describe_filter(match)}; {holder} holds others (fewer filters show them)"
