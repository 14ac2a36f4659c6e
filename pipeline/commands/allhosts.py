"""``baton status --all-hosts`` and ``baton history --all-hosts``: every host's view, read from the bus."""

from __future__ import annotations

import sys
import time
from typing import Any

import anyio

from pipeline.commands.table import json_line, json_text, table
from pipeline.engine.config import Config
from pipeline.engine.hosts import bus_servers
from pipeline.engine.journal import HistoryFilter

__all__ = ["print_all_hosts"]

#: how long to wait for the bus before saying it cannot be reached
REACH_S = 5.0


def print_all_hosts(kind: str, config: Config | None, as_json: bool, limit: int = 50,
                    match: HistoryFilter | None = None) -> int:
    """Print every host's tiles (``kind="tiles"``) or hand-offs (``"history"``, those that ``match``, one
    JSON object per line with ``--json``); 1 when there is no bus."""
    settings = config.settings.bus if config is not None else None
    if not bus_servers(settings):
        print(
            f"baton {'status' if kind == 'tiles' else 'history'} --all-hosts: no bus configured "
            "(settings.bus.servers in routes.yaml, or BATON_BUS_URL)",
            file=sys.stderr,
        )
        return 1
    try:
        rows = anyio.run(_read, settings, kind)
    except TimeoutError:
        print(
            f"baton: the bus at {', '.join(bus_servers(settings))} did not answer within {REACH_S:g}s",
            file=sys.stderr,
        )
        return 1
    if kind == "history":
        rows = [r for r in rows if match is None or match.matches(r)]
        rows = sorted(rows, key=lambda r: (r.get("created", 0), r.get("key", "")))[-limit:]
        if as_json:
            for row in rows:
                print(json_line(row))
            return 0
    else:
        rows = sorted(rows, key=lambda r: (r.get("host", ""), r.get("tile", "")))
    if as_json:
        print(json_text(rows))
        return 0
    if kind == "tiles":
        print(
            table(
                ("HOST", "TILE", "PANE", "AGENT", "STATE"),
                [
                    (r["host"], r["tile"], r.get("pane", ""), r.get("agent", ""), r.get("state", ""))
                    for r in rows
                ],
            )
        )
        return 0
    print(
        table(
            ("WHEN", "HOST", "ROUTE", "TURN", "HOP", "OUTCOME", "WHY"),
            [
                (
                    time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["updated"])),
                    r["host"],
                    r["route"],
                    str(r["turn_id"])[:28],
                    r["hop"],
                    r["state"],
                    r.get("last_error") or r.get("note") or "",
                )
                for r in rows
            ],
        )
    )
    return 0


async def _read(settings: Any, kind: str) -> list[dict[str, Any]]:
    from pipeline.bus.board import board_rows
    from pipeline.bus.link import BusLink

    link = BusLink(settings)
    with anyio.fail_after(REACH_S):
        await link.connect()
    try:
        with anyio.fail_after(REACH_S):
            return await board_rows(link, kind)
    finally:
        await link.close()
