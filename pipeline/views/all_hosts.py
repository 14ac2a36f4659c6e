"""``baton status --all-hosts`` and ``baton history --all-hosts``: every host's view, read from the bus."""

from __future__ import annotations

import sys
from typing import Any

import anyio

from pipeline.cmdline.output import json_line, json_text, table
from pipeline.engine.config import Config
from pipeline.engine.hosts import bus_servers
from pipeline.engine.journal import HistoryFilter
from pipeline.views.handoff_table import handoff_table, in_time_order, no_match
from pipeline.views.states import state_text

__all__ = ["print_all_hosts", "unreachable"]

#: how long to wait for the bus before saying it cannot be reached
REACH_S = 5.0


def unreachable(why: str) -> str:
    """What follows "the bus at URL" when a reader could not connect: the refusal, or nothing listening."""
    if why.startswith("the server "):
        return why.removeprefix("the server ")
    return f"cannot be reached ({why}): is it running (baton bus starts one)? else check settings.bus.servers"


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
    except TimeoutError as exc:
        why = str(exc) or f"did not answer within {REACH_S:g}s"
        print(f"baton {'status' if kind == 'tiles' else 'history'} --all-hosts: the bus at "
              f"{', '.join(bus_servers(settings))} {why}", file=sys.stderr)
        return 1
    rows = [r for r in rows if isinstance(r, dict)]  # another host's value that is not a row is left out
    everyone = len(rows)
    if kind == "history":
        rows = [r for r in rows if match is None or match.matches(r)]
        rows = in_time_order(rows)[-limit:]
        if as_json:
            for row in rows:
                print(json_line(row))
            return 0
    else:  # each host's daemon says its tiles' states in the engine's words: here in a person's
        rows = sorted(({**r, "state": state_text(str(r.get("state") or "gone"))} for r in rows),
                      key=lambda r: (str(r.get("host", "")), str(r.get("tile", ""))))
    if as_json:
        print(json_text(rows))
        return 0
    if kind == "tiles":
        print(
            table(
                ("HOST", "TILE", "PANE", "AGENT", "STATE"),
                [tuple(r.get(k, "") for k in ("host", "tile", "pane", "agent", "state")) for r in rows],
            )
        )
        return 0
    if not rows:
        print(no_match(match or HistoryFilter(), others=everyone > 0, where=" on the bus"))
        return 0
    print(handoff_table(rows, host=True))
    return 0



async def _read(settings: Any, kind: str) -> list[dict[str, Any]]:
    from pipeline.bus.board import board_rows
    from pipeline.bus.link import BusLink, BusUnreachable

    link = BusLink(settings, reader=True)
    try:
        with anyio.fail_after(REACH_S):
            await link.connect()
    except TimeoutError:  # the refusal, if that was why ("refused the credentials: check …")
        raise TimeoutError(link.refusal.removeprefix("the server ")) from None
    except BusUnreachable as exc:
        raise TimeoutError(unreachable(str(exc))) from None
    try:
        with anyio.fail_after(REACH_S):
            return await board_rows(link, kind)
    finally:
        await link.close()
