"""``baton up``: create the tmux panes of the tiles that declare a ``command``, and start the agents.

A tile whose pane already exists is left alone (``up`` can be run again safely), unless its command exited
there and left the pane dead: then the command is started in it again. A ``session:window.pane``
target creates the session (or splits its window); a ``title:NAME`` target creates a pane in the
``batonpass`` session and gives it that title. A ``%N`` target cannot be created: tmux chooses pane ids.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass

import anyio

from pipeline.cmdline.config import load, no_tiles_on, this_host, tmux_for
from pipeline.engine.config import Config
from pipeline.plugin.manager import load_registries
from pipeline.system.tmux import PaneGone, PaneInfo, ServerGone, Tmux, TmuxError

__all__ = ["UpResult", "bring_up", "up_command"]

_ADDRESS = re.compile(r"^(?P<session>[^:]+):(?P<window>[^.]+)(?:\.(?P<pane>\d+))?$")
DEFAULT_SESSION = "batonpass"
#: what a new pane runs until its tile's command replaces it (it reads nothing and types nothing)
PLACEHOLDER = "cat"
#: how long a command may take to fail for ``up`` to report it (a missing command fails in milliseconds)
SETTLE_S = 0.5
STATUS_WAIT_S = 0.5


@dataclass
class UpResult:
    tile: str
    action: str  # "exists" | "created" | "restarted" | "error" | "no command"
    detail: str


async def bring_up(config: Config, tmux: Tmux) -> list[UpResult]:
    """Create each missing pane and start its command in it. A command that exits at once (not installed,
    a typo) is reported with its exit status, instead of a pane that vanishes; its pane is removed when that
    moves no other pane (else it stays, dead, and the next ``up`` starts the command in it again)."""
    results: dict[str, UpResult] = {}
    started: dict[str, PaneInfo] = {}
    for name, tile in config.tiles.items():
        if not tile.command:
            results[name] = UpResult(name, "no command", "nothing to start (no `command:`)")
            continue
        cwd = os.path.expanduser(tile.cwd) if tile.cwd else None
        try:
            info = await tmux.resolve(tile.pane)
            if not info.dead:
                results[name] = UpResult(name, "exists", f"{tile.pane} is {info.pane_id}; left as it is")
                continue
            await tmux.run(
                "respawn-pane", "-k", "-t", info.pane_id, *(["-c", cwd] if cwd else []), tile.command
            )
            started[name] = info
            results[name] = UpResult(name, "restarted", f"{info.pane_id} ({info.address}) running "
                                     f"{tile.command} again (its command had exited)")
            continue
        except (PaneGone, ServerGone):
            pass
        except TmuxError as exc:
            results[name] = UpResult(name, "error", str(exc))
            continue
        try:
            # a placeholder first, so the pane can keep its command's exit status before the command runs
            info = await _create(tmux, tile.pane, PLACEHOLDER, cwd)
            await tmux.run("set-option", "-p", "-t", info.pane_id, "remain-on-exit", "on")
            await tmux.run(
                "respawn-pane", "-k", "-t", info.pane_id, *(["-c", cwd] if cwd else []), tile.command
            )
            await tmux.set_title(
                info.pane_id, tile.pane.removeprefix("title:") if tile.pane.startswith("title:") else name
            )
        except (TmuxError, ValueError) as exc:
            results[name] = UpResult(name, "error", str(exc))
            continue
        started[name] = info
        results[name] = UpResult(name, "created", f"{info.pane_id} ({info.address}) running {tile.command}")
    if started:
        await anyio.sleep(SETTLE_S)
    for name, info in started.items():
        if failed := await _exited(tmux, info.pane_id):
            results[name] = UpResult(name, "error", f"command {config.tiles[name].command!r} {failed}")
    return [results[name] for name in config.tiles]


async def _exited(tmux: Tmux, pane_id: str) -> str:
    """"exited at once (N)" or "" when the command still runs; from then on the pane closes as tmux panes
    do when their command ends. The dead pane is removed when it is alone in its window; beside other panes
    it stays (dead, showing what the command printed): removing it would move the panes after it, and a
    ``session:window.pane`` tile would then name its neighbour's pane."""
    for _ in range(2):  # again after remain-on-exit is off: a command that died in between is not left shown
        try:
            info = await tmux.pane(pane_id)
        except (PaneGone, ServerGone):
            return "exited at once"
        if not info.dead:
            await tmux.run("set-option", "-p", "-u", "-t", pane_id, "remain-on-exit", check=False)
            continue
        # tmux 3.3 sometimes marks the pane dead without ever recording the status (the pty closed
        # first); what the command printed is then the clue, and often the better one anyway
        with anyio.move_on_after(STATUS_WAIT_S):
            while info.dead_status is None:
                await anyio.sleep(0.02)
                info = await tmux.pane(pane_id)
        said = [ln.strip() for ln in (await tmux.capture(pane_id)).splitlines()
                if ln.strip() and not ln.startswith("Pane is dead")]
        alone = len((await tmux.run("list-panes", "-t", pane_id, "-F", "#{pane_id}")).split()) == 1
        if alone:
            await tmux.run("kill-pane", "-t", pane_id, check=False)
        return ("exited at once" + (f" ({info.dead_status})" if info.dead_status is not None else "")
                + (f": {said[-1][:200]}" if said else "")
                + ("" if alone else f"; its pane {info.address} stays, dead, so that the panes after it keep "
                   "their places: fix the command and run baton up again"))
    return ""


async def _create(tmux: Tmux, target: str, command: str, cwd: str | None) -> PaneInfo:
    if target.startswith("%"):
        raise ValueError(
            f"cannot create pane {target}: tmux chooses pane ids; name it session:window.pane or title:"
        )
    if target.startswith("title:"):
        session, window = DEFAULT_SESSION, None
    else:
        m = _ADDRESS.match(target)
        if m is None:
            raise ValueError(f"cannot create {target!r}: expected session:window.pane or title:NAME")
        session, window = m["session"], m["window"]
    try:
        sessions = {line for line in (await tmux.run("list-sessions", "-F", "#{session_name}")).splitlines()}
    except ServerGone:
        sessions = set()
    if session not in sessions:
        return await tmux.new_session(session, command, cwd=cwd)
    split_target = session if window is None else f"{session}:{window}"
    try:
        return await tmux.split(split_target, command, cwd=cwd)
    except PaneGone:
        out = await tmux.run("new-window", "-d", "-P", "-F", "#{pane_id}", "-t", split_target,
                             *(["-c", cwd] if cwd else []), command)
        return await tmux.pane(out.strip())


def up_command(args: argparse.Namespace) -> int:
    config, _ = load(args, load_registries())
    if config is None:
        return 1
    if note := no_tiles_on(config, args.host):  # nothing to do here is no failure (one `up` per machine)
        print(f"baton up: nothing to bring up: {note}", file=sys.stderr)
        return 0
    config = this_host(config, args.host)
    results = anyio.run(lambda: bring_up(config, tmux_for(args, config)))
    for r in results:
        print(f"{r.tile:<14} {r.action:<10} {r.detail}")
        if r.action == "error":
            print(f"{r.tile}: {r.detail}", file=sys.stderr)
    return 1 if any(r.action == "error" for r in results) else 0
