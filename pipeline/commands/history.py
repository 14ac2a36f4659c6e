"""``baton history``: the hand-off journal, filtered, as a table or one JSON object per line; ``--follow``
keeps printing hand-offs as the journal records them.

``--follow`` looks at the journal every :data:`FOLLOW_TICK_S` (SQLite in WAL mode: a reader never blocks
the daemon) and prints a line each time a hand-off's record changed, so one hand-off shows as it goes
``transformed`` → ``delivered``; states it passed between two looks show as the last one. Ctrl-C ends it
with exit status 0.
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from pipeline.commands.table import json_line, table
from pipeline.engine.journal import HandoffRecord, HistoryFilter, Journal, default_journal_path

__all__ = ["FOLLOW_TICK_S", "ai_use", "history_command", "parse_since", "quiet_stdout", "record_row"]

FOLLOW_TICK_S = 0.25
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_AGO = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd])")


def parse_since(value: str) -> float:
    """``--since``: ``90s``, ``10m``, ``2h``, ``1d`` ago, or an ISO time (``2026-03-01T14:00``, local time
    unless it names its zone). Returns epoch seconds; argparse turns a ValueError into a usage error."""
    value = value.strip()
    ago = _AGO.fullmatch(value)
    if ago:
        return time.time() - float(ago.group(1)) * _UNITS[ago.group(2)]
    try:
        return datetime.fromisoformat(value).timestamp()
    except (ValueError, OverflowError, OSError):  # not a time; or one the platform cannot count (year 1)
        raise argparse.ArgumentTypeError(
            f"{value!r} is neither a duration (10m, 2h, 1d) nor an ISO time (2026-03-01T14:00)"
        ) from None


def record_row(record: HandoffRecord) -> dict[str, Any]:
    """A hand-off as ``--json`` prints it (the field names docs/json.md promises)."""
    return asdict(record)


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def ai_use(usage: dict[str, Any] | None) -> str:
    """An AI transform's call in a few words: ``3200 in · 300 out · $0.0087`` (tokens only when the
    model's price is unknown; "" when no model was called)."""
    if not usage:
        return ""
    words = f"{_tokens_in(usage)} in · {int(usage.get('output_tokens') or 0)} out"
    cost = usage.get("cost_usd")
    return words if cost is None else f"{words} · ${cost:.4f}"


def _tokens_in(usage: dict[str, Any]) -> int:
    """All the input a call was billed for: fresh, written to the cache, read from it."""
    return sum(int(usage.get(k) or 0) for k in ("input_tokens", "cache_write_tokens", "cache_read_tokens"))


def _total(records: list[HandoffRecord]) -> str:
    """One line adding up the AI transforms' calls among ``records`` ("" when there were none)."""
    calls = [r.usage for r in records if r.usage]
    if not calls:
        return ""
    tokens_in = sum(_tokens_in(u) for u in calls)
    tokens_out = sum(int(u.get("output_tokens") or 0) for u in calls)
    priced = [u["cost_usd"] for u in calls if u.get("cost_usd") is not None]
    line = (f"AI transforms: {len(calls)} call{'s' * (len(calls) != 1)}, {tokens_in} tokens in, "
            f"{tokens_out} out" + (f", ${sum(priced):.4f}" if priced else ""))
    unpriced = len(calls) - len(priced)
    return line + (f" ({unpriced} of a model with no known price: tokens only)" if unpriced else "")


def _cells(r: HandoffRecord) -> tuple[object, ...]:
    return (_when(r.updated), r.route, r.turn_id[:28], r.hop, r.state, r.attempts, ai_use(r.usage),
            r.last_error or r.note)


HEADER = ("WHEN", "ROUTE", "TURN", "HOP", "OUTCOME", "TRIES", "AI USE", "WHY")


def history_command(args: argparse.Namespace) -> int:
    match = HistoryFilter(route=args.route, tile=args.tile, outcome=args.outcome, since=args.since)
    if args.all_hosts:
        if args.follow:
            print("baton history: --follow reads this host's journal; it does not go with --all-hosts",
                  file=sys.stderr)
            return 2
        from pipeline.commands.allhosts import print_all_hosts
        from pipeline.commands.server import load_optional
        from pipeline.plugin.manager import load_registries

        config, ok = load_optional(args, load_registries())
        return print_all_hosts("history", config, args.json, args.limit, match) if ok else 1
    path = default_journal_path()
    try:
        if args.follow:
            return _follow(path, args.limit, match, args.json)
        return _print_history(path, args.limit, match, args.json)
    except sqlite3.Error as exc:
        print(f"baton history: cannot read the journal {path}: {exc}", file=sys.stderr)
        return 1


def _filtered(match: HistoryFilter) -> bool:
    return match != HistoryFilter()


def _print_history(path: Path, limit: int, match: HistoryFilter, as_json: bool) -> int:
    if not path.exists():
        if not as_json:
            print(f"no hand-offs yet ({path} does not exist)")
        return 0
    records = Journal(path).history(limit, match)
    if as_json:
        for r in records:
            print(json_line(record_row(r)))
        return 0
    if not records:
        print("no hand-offs match" if _filtered(match) else "no hand-offs yet")
        return 0
    print(table(HEADER, [_cells(r) for r in records]))
    if total := _total(records):
        print(total)
    return 0


def _follow(path: Path, limit: int, match: HistoryFilter, as_json: bool) -> int:
    """The latest ``limit`` hand-offs, then every change, until Ctrl-C (exit 0) or a closed pipe."""
    emit: Callable[[HandoffRecord], None] = (
        (lambda r: print(json_line(record_row(r)), flush=True)) if as_json
        else (lambda r: print("  ".join(str(c) for c in _cells(r)), flush=True))
    )
    try:
        if not as_json:
            print("  ".join(HEADER), flush=True)
        while not path.exists():  # batonpass never ran here yet: the daemon's first hand-off makes it
            time.sleep(FOLLOW_TICK_S)
        journal = Journal(path)
        last = time.time()  # what changes from here on is news; a change during the backlog may show twice
        shown: set[tuple[str, float]] = set()
        for r in journal.history(limit, match):
            emit(r)
        while True:
            time.sleep(FOLLOW_TICK_S)
            changed = [r for r in journal.changed_since(last, match) if (r.key, r.updated) not in shown]
            for r in changed:
                emit(r)
            if changed:
                newest = changed[-1].updated
                shown = {key for key in shown if key[1] == newest} if newest == last else set()
                shown |= {(r.key, r.updated) for r in changed if r.updated == newest}
                last = newest
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:  # `baton history --follow | head -3`: the reader is done
        quiet_stdout()
        return 0


def quiet_stdout() -> None:
    """Point standard output at /dev/null, so the interpreter's final flush of a closed pipe stays quiet."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
