"""``baton up``: create the tmux panes of the tiles that declare a ``command``, and start the agents.

A tile whose pane already exists is left alone (``up`` can be run again safely). A ``session:window.pane``
target creates the session (or splits its window); a ``title:NAME`` target creates a pane in the
``batonpass`` session and gives it that title. A ``%N`` target cannot be created: tmux chooses pane ids.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from pipeline.engine.config import Config
from pipeline.system.tmux import PaneGone, ServerGone, Tmux, TmuxError

__all__ = ["UpResult", "bring_up"]

_ADDRESS = re.compile(r"^(?P<session>[^:]+):(?P<window>[^.]+)(?:\.(?P<pane>\d+))?$")
DEFAULT_SESSION = "batonpass"


@dataclass
class UpResult:
    tile: str
    action: str  # "exists" | "created" | "error" | "no command"
    detail: str


async def bring_up(config: Config, tmux: Tmux) -> list[UpResult]:
    results = []
    for name, tile in config.tiles.items():
        if not tile.command:
            results.append(UpResult(name, "no command", "nothing to start (no `command:`)"))
            continue
        try:
            info = await tmux.resolve(tile.pane)
            results.append(UpResult(name, "exists", f"{tile.pane} is {info.pane_id}; left as it is"))
            continue
        except (PaneGone, ServerGone):
            pass
        cwd = os.path.expanduser(tile.cwd) if tile.cwd else None
        try:
            info = await _create(tmux, tile.pane, tile.command, cwd)
        except (TmuxError, ValueError) as exc:
            results.append(UpResult(name, "error", str(exc)))
            continue
        await tmux.set_title(info.pane_id, tile.pane.removeprefix("title:") if tile.pane.startswith("title:") else name)
        results.append(UpResult(name, "created", f"{info.pane_id} ({info.address}) running {tile.command}"))
    return results


async def _create(tmux: Tmux, target: str, command: str, cwd: str | None):
    if target.startswith("%"):
        raise ValueError(f"cannot create pane {target}: tmux chooses pane ids; name it session:window.pane or title:")
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
