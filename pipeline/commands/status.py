"""``baton status``: per tile, what batonpass sees — pane, agent, its PID, session, transcript, state,
and a preview of the last answer (the rows: :mod:`pipeline.views.tile_status`); ``--watch`` draws the live
board (:mod:`pipeline.views.live_board`), ``--all-hosts`` every host's tiles, from the bus."""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from typing import Any

import anyio

from pipeline.cmdline.config import load, no_tiles_on, this_host, tmux_for
from pipeline.cmdline.output import json_text, table
from pipeline.plugin.manager import load_registries
from pipeline.system.text import count
from pipeline.views.tile_status import tile_status

__all__ = ["status_command"]

#: the session id's first characters in the table (as git shortens a commit); the whole below it and in JSON
SESSION_CHARS = 8

def status_command(args: argparse.Namespace) -> int:
    """0; 1 when routes.yaml is invalid; 3 when none of the tiles has its pane."""
    registries = load_registries()
    config, _ = load(args, registries)
    if config is None:
        return 1
    if args.all_hosts and args.watch:
        from pipeline.views.hosts_board import show_hosts_board

        return show_hosts_board(args, config)
    if args.all_hosts:
        from pipeline.views.all_hosts import print_all_hosts

        return print_all_hosts("tiles", config, args.json)
    whole, config = config, this_host(config, args.host)
    if args.watch:
        from pipeline.views.live_board import show_live_board

        return show_live_board(args, config, registries)
    rows = anyio.run(lambda: tile_status(config, registries, tmux_for(args, config)))
    status = 3 if rows and all(r["state"] == "gone" for r in rows) else 0
    # every tile failing the same way (no tmux server): said once, not once per tile
    errors = {r.get("error") for r in rows}
    shared = errors.pop() if len(rows) > 1 and len(errors) == 1 and None not in errors else None
    if args.json:
        print(json_text(rows))
    else:
        _print_rows(rows, errors=shared is None)
        _print_holds()
        _print_awaiting()
    if status and shared:
        print(f"baton status: none of the {count(len(rows), 'tile')} can be looked at: {shared}",
              file=sys.stderr)
    elif status:
        print(
            f"baton status: none of the {count(len(rows), 'tile')} has its pane on "
            f"{tmux_for(args, config).describe()}",
            file=sys.stderr,
        )
    elif not rows and not args.json:
        print(f"baton status: {no_tiles_on(whole, args.host) or 'no tiles'}", file=sys.stderr)
    return status


def _print_holds() -> None:
    """The routes a person holds (``baton hold``), read-only: their hand-offs stay queued."""
    from pipeline.engine.journal import default_journal_path

    path = default_journal_path()
    if not path.exists():
        return
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2)
    try:
        holds = db.execute("SELECT h.route, h.origin, h.at, (SELECT COUNT(*) FROM handoffs WHERE "
                           "route=h.route AND state='held') FROM holds h ORDER BY h.route").fetchall()
    except sqlite3.Error:  # a journal older than holds, or locked: nothing to say
        return
    finally:
        db.close()
    for route, origin, at, queued in holds:
        since = time.strftime("%H:%M:%S", time.localtime(at))
        print(f"route {route}: held by {origin} since {since}, {count(queued, 'hand-off')} queued "
              f"(baton resume {route})")


def _print_awaiting() -> None:
    """The hand-offs awaiting a person (``gate: person``), read-only: typed only once passed."""
    from pipeline.engine.journal import default_journal_path
    from pipeline.views.awaiting import read_awaiting

    for a in read_awaiting(default_journal_path()):
        since = time.strftime("%H:%M:%S", time.localtime(a["created"]))
        print(f"hand-off {a['key']} -> {a['target']} awaits a person since {since} (baton pass {a['key']}, "
              f"baton drop {a['key']})")


def _print_rows(rows: list[dict[str, Any]], *, errors: bool = True) -> None:
    print(table(("TILE", "PANE", "AGENT", "PID", "SESSION", "STATE", "LAST ANSWER"),
                [(r["tile"], r["pane_id"] or r["pane"], r["agent"], r["agent_pid"] or "-",
                  (r.get("session_id") or "-")[:SESSION_CHARS], r["state"], r["last_response"] or "-")
                 for r in rows]))
    for r in rows:
        if r.get("session_id") or r.get("session"):  # the whole id, and its file
            both = f"{r['session_id']} ({r['session']})" if r.get("session_id") and r.get("session") else None
            print(f"{r['tile']} session: {both or r.get('session_id') or r['session']}")
        for key in ("transcript", "error"):
            if r.get(key) and (errors or key != "error"):
                print(f"{r['tile']} {key}: {r[key]}")
