"""``baton up``: create the tmux panes of the tiles that declare a ``command``, and start the agents.

A tile whose pane already exists is left alone (``up`` can be run again safely, and never adds a second
pane for a tile), unless its command exited there and left the pane dead: then the command is started in
it again. A ``title:NAME`` target creates a pane in the ``batonpass`` session and gives it that title (found
again by it, wherever it moves). A ``session:window.pane`` target creates the session, the window, or the
next pane of the window: tmux numbers a window's panes itself, so ``work:0.3`` can be created only where
``work:0`` has three panes (``work:0.0``–``work:0.2``); any other address is refused with the one to write
instead. A ``%N`` target cannot be created: tmux chooses pane ids. The addresses printed are read after every
pane was made. A command that exits within ``SETTLE_S`` is reported ``exited`` with its status and the last
line it printed; a ``cwd:`` that is no folder is refused before anything starts.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass, replace

import anyio

from pipeline.cmdline.config import load, no_tiles_on, this_host, tmux_for
from pipeline.engine.config import Config, Tile
from pipeline.plugin.manager import load_registries
from pipeline.system.tmux import PaneGone, PaneInfo, ServerGone, Tmux, TmuxError

__all__ = ["UpResult", "bring_up", "up_command"]

_ADDRESS = re.compile(r"^(?P<session>[^:]+):(?P<window>[^.]+)(?:\.(?P<pane>\d+))?$")
DEFAULT_SESSION = "batonpass"
#: what a new pane runs until its tile's command replaces it (it reads nothing and types nothing)
PLACEHOLDER = "cat"
#: how long a command may take to fail for ``up`` to report it ``exited`` (a missing command fails in
#: milliseconds, an agent that cannot start in about a second)
SETTLE_S = 1.2
STATUS_WAIT_S = 0.5
#: what a shell prints for a command it cannot find (tmux 3.3 does not always record the exit status)
_NOT_FOUND = re.compile(r"command not found|: not found$|No such file or directory")
_FAILED = ("error", "exited")


class CannotCreate(Exception):
    """This pane address cannot be made by ``up``; the message says what to write instead."""


@dataclass
class UpResult:
    tile: str
    action: str  # "exists" | "created" | "restarted" | "exited" | "error" | "no command"
    detail: str
    #: the pane the row is about, shown with its address as it is once every pane was made
    pane_id: str | None = None


async def bring_up(config: Config, tmux: Tmux) -> list[UpResult]:
    """Create each missing pane and start its command in it; the rows in routes.yaml's order. A command
    that exits at once (not installed, a typo) is reported with its exit status, instead of a pane that
    vanishes; its pane is removed when that moves no other pane (else it stays, dead, and the next ``up``
    starts the command in it again)."""
    results: dict[str, UpResult] = {}
    await _sessions(tmux)  # tmux not installed: one error for all (TmuxError), before any tile
    # a relative cwd is routes.yaml's folder's (tmux would read it from its server's own folder)
    base = os.path.dirname(os.path.abspath(config.path)) if config.path != "<memory>" else os.getcwd()
    for name in _creation_order(config):
        results[name] = await _bring_one(tmux, name, config.tiles[name], base)
    started = {n: r.pane_id for n, r in results.items() if r.action in ("created", "restarted") and r.pane_id}
    if started:
        await anyio.sleep(SETTLE_S)
    for name, pane_id in started.items():
        if failed := await _exited(tmux, pane_id):
            kept = pane_id if "stays, dead" in failed else None
            results[name] = UpResult(name, "exited", f"command {config.tiles[name].command!r} {failed}", kept)
    addresses = await _addresses(tmux)  # a split renumbers the panes after the one split: read them now
    return [_located(results[name], addresses) for name in config.tiles]


def _creation_order(config: Config) -> list[str]:
    """routes.yaml's order, but a window's panes lowest index first: a pane can only be added at the end."""
    def place(name: str) -> tuple[int, int]:
        pane = config.tiles[name].pane
        m = None if pane.startswith("title:") else _ADDRESS.match(pane)
        if m is None:
            return (-1, -1)
        return (int(m["window"]) if m["window"].isdigit() else 0, int(m["pane"] or 0))

    return sorted(config.tiles, key=place)


async def _bring_one(tmux: Tmux, name: str, tile: Tile, base: str) -> UpResult:
    try:
        info = await _find(tmux, tile.pane)
        if not tile.command:
            return _no_command(name, tile, info)
        if info is not None and not info.dead:
            return UpResult(name, "exists", "already there; left as it is", info.pane_id)
        cwd = _folder(tile.cwd, base)
        if info is None:
            # a placeholder first, so the pane can keep its command's exit status before the command runs
            info = await _create(tmux, tile.pane, name, cwd)
            action, what = "created", f"running {tile.command}"
        else:
            action, what = "restarted", f"running {tile.command} again (its command had exited)"
        await tmux.run("set-option", "-p", "-t", info.pane_id, "remain-on-exit", "on")
        await tmux.run("respawn-pane", "-k", "-t", info.pane_id, *(["-c", cwd] if cwd else []), tile.command)
        if action == "created":
            await tmux.set_title(info.pane_id, tile.pane.removeprefix("title:") if tile.pane.startswith(
                "title:") else name)
    except (TmuxError, CannotCreate) as exc:
        return UpResult(name, "error", str(exc))
    return UpResult(name, action, what, info.pane_id)


def _no_command(name: str, tile: Tile, info: PaneInfo | None) -> UpResult:
    if info is not None:
        return UpResult(name, "no command", "already there; nothing to start (no `command:`)", info.pane_id)
    make = (f"a pane titled {tile.pane.removeprefix('title:')} (tmux select-pane -T "
            f"{tile.pane.removeprefix('title:')})" if tile.pane.startswith("title:") else "it")
    return UpResult(name, "no command", f"its pane {tile.pane} does not exist, and up starts nothing "
                    f"without a `command:`: make {make} yourself, or give the tile a command")


def _folder(cwd: str | None, base: str) -> str | None:
    """The tile's ``cwd`` (``~`` expanded; relative to ``base``), refused when it is no folder: tmux would
    start the command somewhere else without a word."""
    if not cwd:
        return None
    path = os.path.join(base, os.path.expanduser(cwd))
    if not os.path.isdir(path):
        why = "not a folder" if os.path.exists(path) else "no such folder"
        raise CannotCreate(f"cwd {cwd} is {why}: fix the tile's `cwd:` or make the folder; nothing started")
    return path


async def _find(tmux: Tmux, target: str) -> PaneInfo | None:
    """The tile's pane, or None when there is none (several panes with its title is an error)."""
    try:
        return await tmux.resolve(target)
    except ServerGone:
        return None
    except PaneGone as exc:
        if target.startswith("title:") and "give each a unique title" in str(exc):
            raise
        return None


async def _create(tmux: Tmux, target: str, name: str, cwd: str | None) -> PaneInfo:
    """A new pane at exactly ``target`` (refused, with what to write instead, when tmux would number it
    otherwise), running the placeholder."""
    if target.startswith("%"):
        raise CannotCreate(f"cannot create pane {target}: tmux chooses pane ids; name the tile's pane "
                           f"session:window.pane, or title:{name} (up creates that and finds it again)")
    if target.startswith("title:"):
        return await _add_pane(tmux, DEFAULT_SESSION, None, cwd)
    m = _ADDRESS.match(target)
    if m is None:
        raise CannotCreate(f"cannot create {target!r}: expected session:window.pane or title:NAME")
    window = f"{m['session']}:{m['window']}"
    panes = await _window_panes(tmux, window)
    if panes and m["pane"] is not None:
        next_index = max(index for index, _ in panes) + 1
        if int(m["pane"]) != next_index:
            raise _elsewhere(target, f"{window}.{next_index}", name)
    info = await _add_pane(tmux, m["session"], m["window"], cwd)
    if not info.matches_address(target):  # tmux's base-index settings number it otherwise
        await tmux.run("kill-pane", "-t", info.pane_id, check=False)
        raise _elsewhere(target, info.address, name)
    return info


def _elsewhere(target: str, address: str, name: str) -> CannotCreate:
    return CannotCreate(f"cannot create {target}: tmux numbers a new pane there {address}; name the tile's "
                        f"pane {address}, or title:{name} (up creates that and finds it again)")


async def _window_panes(tmux: Tmux, window: str) -> list[tuple[int, str]]:
    """(index, pane id) of each pane of ``window``; [] when there is no such window, session or server."""
    try:
        out = await tmux.run("list-panes", "-t", window, "-F", "#{pane_index} #{pane_id}")
    except (PaneGone, ServerGone):
        return []
    return [(int(index), pane) for index, _, pane in (line.partition(" ") for line in out.splitlines())
            if index.isdigit()]


async def _add_pane(tmux: Tmux, session: str, window: str | None, cwd: str | None) -> PaneInfo:
    """A new pane after the last one of ``session:window`` (``window`` None: the session's current window),
    in a new session or window when there is none. Splitting the last pane moves no other pane: a split
    puts the new pane right after the one split. A window too full to split gets a new window beside it
    (title panes only: an address names its window)."""
    at = ["-c", cwd] if cwd else []
    if session not in await _sessions(tmux):
        named = ["-n", window] if window and not window.isdigit() else []
        out = await tmux.run("new-session", "-d", "-P", "-F", "#{pane_id}", "-s", session, "-x", "160", "-y",
                             "48", *named, *at, PLACEHOLDER)
        return await tmux.pane(out.strip())
    panes = await _window_panes(tmux, session if window is None else f"{session}:{window}")
    try:
        if panes:
            return await tmux.split(max(panes)[1], PLACEHOLDER, cwd=cwd)
    except TmuxError:
        if window is not None:
            raise
    where = ["-t", f"{session}:"] + (["-n", window] if window and not window.isdigit() else []) if (
        window is None or not window.isdigit()) else ["-t", f"{session}:{window}"]
    out = await tmux.run("new-window", "-d", "-P", "-F", "#{pane_id}", *where, *at, PLACEHOLDER)
    return await tmux.pane(out.strip())


async def _sessions(tmux: Tmux) -> set[str]:
    try:
        return set((await tmux.run("list-sessions", "-F", "#{session_name}")).splitlines())
    except ServerGone:
        return set()


async def _addresses(tmux: Tmux) -> dict[str, str]:
    try:
        out = await tmux.run("list-panes", "-a", "-F",
                             "#{pane_id} #{session_name}:#{window_index}.#{pane_index}")
    except TmuxError:
        return {}
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def _located(result: UpResult, addresses: dict[str, str]) -> UpResult:
    """The row with its pane named as it is now: ``%3 (work:0.1)``."""
    if result.pane_id is None:
        return result
    address = addresses.get(result.pane_id)
    where = f"{result.pane_id} ({address})" if address else result.pane_id
    return replace(result, detail=f"{where} {result.detail}" if result.action != "exited"
                   else f"{where}: {result.detail}")


async def _exited(tmux: Tmux, pane_id: str) -> str:
    """``exited (status N): its last line`` or "" when the command still runs; from then on the pane closes
    as tmux panes do when their command ends. The dead pane is removed when it is alone in its window;
    beside other panes it stays (dead, showing what the command printed): removing it would move the panes
    after it, and a ``session:window.pane`` tile would then name its neighbour's pane."""
    for _ in range(2):  # again after remain-on-exit is off: a command that died in between is not left shown
        try:
            info = await tmux.pane(pane_id)
        except (PaneGone, ServerGone):
            return "exited"
        if not info.dead:
            await tmux.run("set-option", "-p", "-u", "-t", pane_id, "remain-on-exit", check=False)
            continue
        status, said = await _last_words(tmux, info)
        alone = len((await tmux.run("list-panes", "-t", pane_id, "-F", "#{pane_id}")).split()) == 1
        if alone:
            await tmux.run("kill-pane", "-t", pane_id, check=False)
        return ("exited" + (f" (status {status})" if status is not None else "")
                + (f": {said[:200]}" if said else ": command not found" if status == 127 else "")
                + ("" if alone else "; its pane stays, dead, so that the panes after it keep their places: "
                   "fix the command and run baton up again"))
    return ""


async def _last_words(tmux: Tmux, info: PaneInfo) -> tuple[int | None, str]:
    """A dead pane's exit status and the last line its command printed. tmux 3.3 sometimes marks the pane
    dead without ever recording the status (the pty closed first), or before the last output is read: both
    are waited for a moment, and a shell's "command not found" stands for status 127."""
    said = ""
    with anyio.move_on_after(STATUS_WAIT_S):
        while True:
            lines = [ln.strip() for ln in (await tmux.capture(info.pane_id, start="-")).splitlines()
                     if ln.strip() and not ln.startswith("Pane is dead")]
            said = lines[-1] if lines else ""
            if info.dead_status is not None and said:
                break
            await anyio.sleep(0.02)
            info = await tmux.pane(info.pane_id)
    status = info.dead_status
    if status is None and _NOT_FOUND.search(said):
        status = 127
    return status, said


def up_command(args: argparse.Namespace) -> int:
    config, _ = load(args, load_registries())
    if config is None:
        return 1
    if note := no_tiles_on(config, args.host):  # nothing to do here is no failure (one `up` per machine)
        print(f"baton up: nothing to bring up: {note}", file=sys.stderr)
        return 0
    config = this_host(config, args.host)
    try:
        results = anyio.run(lambda: bring_up(config, tmux_for(args, config)))
    except TmuxError as exc:
        print(f"baton up: {exc}", file=sys.stderr)
        return 1
    tile_w = max((len(r.tile) for r in results), default=0)
    action_w = max((len(r.action) for r in results), default=0)
    for r in results:  # one table; its failed rows on standard error (each said once)
        failed = r.action in _FAILED
        print(f"{r.tile:<{tile_w}}  {r.action:<{action_w}}  {r.detail}",
              file=sys.stderr if failed else sys.stdout, flush=True)
    return 1 if any(r.action in _FAILED for r in results) else 0
