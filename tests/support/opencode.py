"""OpenCode stand-ins in panes over a generated store (tests/fakes/opencode_store.py), with their adapters;
and for the real OpenCode, its offline environment and the clean-up of what it started."""

from __future__ import annotations

import os
import time
from pathlib import Path

from pipeline.engine.config import Tile
from pipeline.engine.context import EngineContext
from pipeline.engine.watch import FileWatcher
from pipeline.system import proc
from plugins.opencode.adapter import OpenCodeAdapter
from tests.fakes.opencode_store import StoreWriter
from tests.fakes.standin_tui import standin_command
from tests.support.paths import FIXTURES, REPO
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

__all__ = ["BOX_BELOW", "SCREENS", "Scene", "opencode_env", "stop_left_behind"]

SCREENS = FIXTURES / "opencode" / "screens"
#: what the stand-in draws under its prompt: the rest of OpenCode's input box (its mode line and ``╹▀``
#: border) — a pane without the box is an OpenCode still starting (docs/agents.md, OpenCode)
BOX_BELOW = ("┃  Build · Fake Fake", "╹" + "▀" * 40)


class Scene:
    """A project folder, a data folder with the store, and OpenCode stand-ins in panes."""

    def __init__(self, server: TmuxServer, tmp: Path, schema: str | None = None) -> None:
        self.server, self.tmp = server, tmp
        self.project, self.data = tmp / "web", tmp / "data"
        self.project.mkdir()
        self.db = self.data / "opencode" / "opencode.db"
        self.writer = StoreWriter(self.db, **({"schema": schema} if schema else {}))
        self.watcher = FileWatcher()

    def env(self) -> dict[str, str]:
        return {"XDG_DATA_HOME": str(self.data), "HOME": str(self.tmp), "PYTHONPATH": str(REPO)}

    def start(self, *, shell: bool = False) -> str:
        """A pane running the stand-in (``shell``: typed into a bash, so that it can exit to a bare shell)."""
        command = standin_command(
            "opencode", prompt="┃  ", busy="⬝⬝■■  esc interrupt", answer="screen answer {n}",
            below=BOX_BELOW,
        )
        if shell:
            pane = self.server.new_pane(cwd=self.project, env=self.env())
            self.server.type(pane, command)
        else:
            pane = self.server.new_pane(command, cwd=self.project, env=self.env())
        wait_for(lambda: "opencode stand-in" in self.server.capture(pane), what="the stand-in")
        # shapes the scenario: sessions it makes are created after it started, as with the real OpenCode
        time.sleep(1.1)
        return pane

    def adapter(self, pane: str, name: str = "oc") -> OpenCodeAdapter:
        ctx = EngineContext(name=name, tile=Tile(pane=pane, agent="opencode"), tmux=self.server.tmux,
                          watcher=self.watcher)
        return OpenCodeAdapter(ctx)


def opencode_env(home: Path, command: Path) -> dict[str, str]:
    """A real OpenCode's environment, offline: its XDG folders under ``home``, no models fetch, update, LSP
    download or share, npm pointed at a closed port, and ``command``'s folder first on PATH."""
    env = {
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / ".local/share"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(home / ".local/state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        "npm_config_registry": "http://127.0.0.1:9/",
        "NPM_CONFIG_REGISTRY": "http://127.0.0.1:9/",
        "PATH": f"{command.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
    }
    for key in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        Path(env[key]).mkdir(parents=True, exist_ok=True)
    return env


def stop_left_behind(started: list[proc.Proc]) -> None:
    """OpenCode and what it started, if left behind: the very processes the test saw (pid and start time)."""
    for seen in started:
        live = proc.read_proc(seen.pid)
        if live is not None and live.start_ticks == seen.start_ticks:
            try:
                os.kill(seen.pid, 15)
            except OSError:
                pass
