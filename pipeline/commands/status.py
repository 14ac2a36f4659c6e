"""``baton status``: per tile, what batonpass sees — pane, agent, its PID, session, transcript, state,
and a preview of the last answer."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio

from pipeline.cmdline.config import load, no_tiles_on, this_host, tmux_for
from pipeline.cmdline.output import json_text, table
from pipeline.commands.preview import PreviewError, last_response
from pipeline.engine.config import Config
from pipeline.engine.tiles import TileRuntime, build_tiles
from pipeline.plugin.manager import Registries, load_registries
from pipeline.system.text import count
from pipeline.system.tmux import Tmux, TmuxError

__all__ = ["status_command", "tile_row", "tile_status"]

#: resolve steps whose value is worth a column of its own
FILE_STEPS = {
    "session": ("session", "session file", "session-file", "thread"),
    "transcript": ("transcript", "rollout", "store"),
}


async def tile_status(
    config: Config, registries: Registries, tmux: Tmux, preview_chars: int = 80
) -> list[dict[str, Any]]:
    tiles = await build_tiles(config, registries.agents, tmux)
    return [await tile_row(name, runtime, preview_chars) for name, runtime in tiles.items()]


async def tile_row(name: str, runtime: TileRuntime, preview_chars: int = 80) -> dict[str, Any]:
    """One tile's row. ``baton status --watch`` keeps its tiles between calls, so adapters that read
    their agent's files as they grow only read what was appended."""
    row: dict[str, Any] = {"tile": name, "pane": runtime.ctx.tile.pane, "agent": runtime.adapter.name,
                           "pane_id": None, "agent_pid": None, "session": None, "transcript": None,
                           "state": None, "last_response": None}
    try:
        info = await runtime.ctx.pane()
        found = await runtime.adapter.agent_process() if runtime.adapter.process_names else None
        row.update(pane_id=info.pane_id, agent_pid=found.pid if found else None,
                   state=await runtime.adapter.target_state())
        if info.dead:
            status = f" with status {info.dead_status}" if info.dead_status is not None else ""
            row["error"] = f"the command in pane {info.pane_id} exited{status}; baton up starts it again"
        for step in await runtime.adapter.resolve():
            if step.step == "activity" and step.ok:  # what the agent does, in its adapter's words
                row["state"] = step.detail
            for column, names in FILE_STEPS.items():
                if step.step in names and step.ok and row[column] is None:
                    value = step.value
                    if isinstance(value, dict) and "path" in value:  # the session file's step: path and more
                        value = value["path"]
                    row[column] = str(value) if value is not None else step.detail
    except TmuxError as exc:
        row.update(state="gone", error=str(exc))
        return row
    try:
        text = (await last_response(runtime)).text.strip().replace("\n", " ⏎ ")
        row["last_response"] = text if len(text) <= preview_chars else text[: preview_chars - 1] + "…"
    except PreviewError:
        pass
    return row


def status_command(args: argparse.Namespace) -> int:
    """0; 1 when routes.yaml is invalid; 3 when none of the tiles has its pane."""
    registries = load_registries()
    config, _ = load(args, registries)
    if config is None:
        return 1
    if args.all_hosts and args.watch:
        from pipeline.commands.hosts_watch import watch_all_hosts

        return watch_all_hosts(args, config)
    if args.all_hosts:
        from pipeline.commands.allhosts import print_all_hosts

        return print_all_hosts("tiles", config, args.json)
    whole, config = config, this_host(config, args.host)
    if args.watch:
        from pipeline.commands.watch import watch_command

        return watch_command(args, config, registries)
    rows = anyio.run(lambda: tile_status(config, registries, tmux_for(args, config)))
    status = 3 if rows and all(r["state"] == "gone" for r in rows) else 0
    # every tile failing the same way (no tmux server): said once, not once per tile
    errors = {r.get("error") for r in rows}
    shared = errors.pop() if len(rows) > 1 and len(errors) == 1 and None not in errors else None
    if args.json:
        print(json_text(rows))
    else:
        _print_rows(rows, errors=shared is None)
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


def _print_rows(rows: list[dict[str, Any]], *, errors: bool = True) -> None:
    print(table(("TILE", "PANE", "AGENT", "PID", "STATE", "LAST ANSWER"),
                [(r["tile"], r["pane_id"] or r["pane"], r["agent"], r["agent_pid"] or "-", r["state"],
                  r["last_response"] or "-") for r in rows]))
    for r in rows:
        for key in ("session", "transcript", "error"):
            if r.get(key) and (errors or key != "error"):
                print(f"{r['tile']} {key}: {r[key]}")
