"""``baton history``: the hand-off journal, filtered, as a table or one JSON object per line; ``--follow``
keeps printing hand-offs, a join's groups as they fill and actions as the journal records them
(:mod:`pipeline.views.history_follow`). The table is :mod:`pipeline.views.handoff_table`'s, shared with
``--all-hosts``. Ctrl-C ends ``--follow`` with exit status 0.

Rows come in time order, by when each last changed (the time WHEN shows): the table, ``--json`` and
``--follow`` alike. An action refused before it changed anything (``baton hold`` of a route that does not
exist, ``baton retry nosuch``) is left out unless ``--refused`` (or ``--outcome refused``) asks for it: it
is no history, and it must not push real hand-offs out of the latest ``-n``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pipeline.cmdline.output import json_line, quiet_stdout
from pipeline.engine.action_kinds import KINDS
from pipeline.engine.gate_journal import gate_fields
from pipeline.engine.journal import ActionRecord, HandoffRecord, HistoryFilter, Journal, default_journal_path
from pipeline.views.handoff_table import FollowTable, handoff_table, in_time_order, no_match
from pipeline.views.join_rows import joining_rows

__all__ = ["action_row", "history_command", "history_rows", "record_row"]

def record_row(record: HandoffRecord) -> dict[str, Any]:
    """A hand-off as ``--json`` prints it (the field names docs/json.md promises)."""
    return asdict(record)


def action_row(action: ActionRecord) -> dict[str, Any]:
    """A person's action (``baton approve``…, the web page) as a row of the same table: its kind in the
    ROUTE column, its outcome (``done``, ``refused``) in OUTCOME, where it came from and what it said in
    WHY; ``--json`` adds ``kind: "action"`` and ``origin`` (docs/json.md)."""
    return {"kind": "action", "key": f"action:{action.id}", "route": action.kind, "source": action.origin,
            "target": action.target, "turn_id": "", "hop": 0, "state": action.outcome, "response": None,
            "prompt": None, "attempts": 1, "last_error": "", "pane": None, "usage": None,
            "note": f"{action.target} from {action.origin}: {action.message}", "origin": action.origin,
            "host": action.host, "created": action.created, "updated": action.updated}


def history_rows(journal: Journal, limit: int, match: HistoryFilter) -> list[dict[str, Any]]:
    """The ``limit`` hand-offs, joining groups and actions that ``match`` which changed last, in time
    order."""
    rows = gate_fields(journal, [record_row(r) for r in journal.history(limit, match)])
    rows += joining_rows(journal, match)
    rows += map(action_row, journal.actions(limit, match))
    return in_time_order(rows)[-limit:]


class _FollowedRows:
    """What ``--follow`` follows: hand-offs, joining groups and actions that match, as ``--json`` prints
    them."""

    def __init__(self, limit: int, match: HistoryFilter) -> None:
        self.limit, self.match = limit, match

    def latest(self, journal: Journal) -> list[dict[str, Any]]:
        return history_rows(journal, self.limit, self.match)

    def changed_since(self, journal: Journal, at: float) -> list[dict[str, Any]]:
        rows = gate_fields(journal, [record_row(r) for r in journal.changed_since(at, self.match)])
        rows += joining_rows(journal, self.match, since=at)
        rows += map(action_row, journal.actions_changed_since(at, self.match))
        return in_time_order(rows)


def history_command(args: argparse.Namespace) -> int:
    match = HistoryFilter(route=args.route, tile=args.tile, outcome=args.outcome, since=args.since,
                          refused=args.refused)
    if args.all_hosts:
        if args.follow:
            print("baton history: --follow reads this host's journal; it does not go with --all-hosts",
                  file=sys.stderr)
            return 2
        from pipeline.cmdline.config import load_optional
        from pipeline.plugin.manager import load_registries
        from pipeline.views.all_hosts import print_all_hosts

        config, ok = load_optional(args, load_registries())
        return print_all_hosts("history", config, args.json, args.limit, match) if ok else 1
    path = default_journal_path()
    try:
        if args.follow:
            return _follow(path, args.limit, match, args.json)
        status = _print_history(path, args.limit, match, args.json)
        if (hint := _unknown_names(args)) and not args.json:
            print(f"baton history: {hint}", file=sys.stderr)
        return status
    except sqlite3.Error as exc:
        # a file that is no SQLite database, or a damaged one (not "locked", not "unable to open"): what to do
        unreadable = type(exc) is sqlite3.DatabaseError
        hint = "; not a journal batonpass can read: move it aside and the next `baton run` starts a new one"
        hint = hint if unreadable else ""
        print(f"baton history: cannot read the journal {path}: {exc}{hint}", file=sys.stderr)
        return 1


def _unknown_names(args: argparse.Namespace) -> str:
    """A ``--tile``/``--route`` that routes.yaml does not name (a typo, most likely: the journal may hold
    one of an older routes.yaml), with the names it has; "" when both are known or there is no routes.yaml.
    The names the journal gives what no route did are known too: an action's kind (``approve``…) and
    ``send``, the route of ``baton send``'s hand-offs."""
    from pipeline.cmdline.config import config_path
    from pipeline.engine.config import load_config

    if args.tile is None and args.route is None:
        return ""
    try:
        config, _ = load_config(config_path(args))
    except Exception:  # no routes.yaml, or a broken one: history reads the journal without it
        return ""
    routes = {r.label for r in config.routes} | {r.arrow for r in config.routes} | set(KINDS)
    if args.tile is not None and args.tile not in config.tiles:
        return f"routes.yaml has no tile {args.tile!r} (tiles: {', '.join(sorted(config.tiles))})"
    if args.route is not None and args.route not in routes:
        names = ", ".join(r.label for r in config.routes)
        return f"routes.yaml has no route {args.route!r} (routes: {names})"
    return ""


def _print_history(path: Path, limit: int, match: HistoryFilter, as_json: bool) -> int:
    if not path.exists():
        if not as_json:
            print(f"no hand-offs yet ({path} does not exist)")
        return 0
    journal = Journal(path)
    rows = history_rows(journal, limit, match)
    if as_json:
        for row in rows:
            print(json_line(row))
        return 0
    if not rows:
        print(no_match(match, bool(journal.history(1) or journal.actions(1, HistoryFilter()))))
        return 0
    print(handoff_table(rows))
    return 0


def _follow(path: Path, limit: int, match: HistoryFilter, as_json: bool) -> int:
    """The latest ``limit`` hand-offs, joining groups and actions, then every change, until Ctrl-C (exit
    0) or a closed pipe. Ctrl-C ends the table with the AI transforms' total, as ``baton history`` does;
    ``--json`` stays one object per line, nothing else."""
    from pipeline.views.history_follow import follow_journal

    printer = _JsonLines() if as_json else _FollowPrinter()
    try:
        follow_journal(path, _FollowedRows(limit, match), printer.emit)
    except KeyboardInterrupt:
        printer.end()
        return 0
    except BrokenPipeError:  # `baton history --follow | head -3`: the reader is done
        quiet_stdout()
    return 0


class _JsonLines:
    def emit(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            print(json_line(row), flush=True)

    def end(self) -> None:
        pass


class _FollowPrinter:
    """The follow's table: the header once the backlog is known (it sizes the columns), a line a change,
    and the AI total at the end. The width is the terminal's (or $COLUMNS); a pipe's lines are not cut."""

    def __init__(self) -> None:
        self.table: FollowTable | None = None

    def emit(self, rows: list[dict[str, Any]]) -> None:
        if self.table is None:
            terminal = "COLUMNS" in os.environ or sys.stdout.isatty()
            self.table = FollowTable(rows, shutil.get_terminal_size().columns if terminal else None)
            print(self.table.header())
        for row in rows:
            print(self.table.line(row))
        sys.stdout.flush()

    def end(self) -> None:
        total = self.table.total() if self.table is not None else ""
        if total:  # on a line of its own, not after the ^C a terminal echoes
            print(("\n" if sys.stdout.isatty() else "") + total, flush=True)
