"""OpenCode stand-ins in panes over a generated store (tests/fakes/opencode_store.py), with their adapters."""

from __future__ import annotations

import time
from pathlib import Path

from pipeline.engine.config import Tile
from pipeline.engine.context import EngineContext
from pipeline.engine.watch import FileWatcher
from plugins.opencode.adapter import OpenCodeAdapter
from tests.fakes.opencode_store import StoreWriter
from tests.fakes.standin_tui import standin_command
from tests.support.paths import FIXTURES, REPO
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

__all__ = ["SCREENS", "Scene"]

SCREENS = FIXTURES / "opencode" / "screens"


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
            "opencode", prompt="┃  ", busy="⬝⬝■■  esc interrupt", answer="screen answer {n}"
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

