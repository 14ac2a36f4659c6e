"""The REAL Codex CLI (``@openai/codex`` from npm, cached) against a fake Responses API, for the tests that
run it (tests/test_codex_e2e.py, tests/test_workflow_e2e.py).

One CODEX_HOME serves the whole test session (the first TUI start copies a 315 MB binary into it and
starts the shared app-server daemon: docs/agents.md, Codex); the daemon is stopped by PID at the end, and
``baton hooks install --codex``'s notify is chained to a notify program that was there before.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from plugins.codex.hooks import install_notify
from plugins.codex.screen import composer_draft
from tests.agent_versions import resolve
from tests.fakes.npm_agents import NpmInstallError, install
from tests.fakes.openai_responses import FakeResponses, codex_config
from tests.support.codex import stop_daemon
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

__all__ = ["CODEX", "CodexWorld", "codex_world", "start_codex"]

#: the release the facts of docs/agents.md (Codex) were recorded from
CODEX = resolve("codex")  # pinned, or npm latest with BATON_AGENTS=latest
NOTIFY_LOGGER = """import json, os, sys, time
with open(os.environ["BATON_TEST_NOTIFY_LOG"], "a") as f:
    f.write(json.dumps({"t": time.time(), "payload": json.loads(sys.argv[-1])}) + "\\n")
"""


@dataclass
class CodexWorld:
    command: Path
    home: Path
    project: Path
    state: Path
    notify_log: Path
    api: FakeResponses

    def env(self) -> dict[str, str]:
        return {
            "HOME": str(self.home.parent / "home"),
            "CODEX_HOME": str(self.home),
            "FAKE_KEY": "sk-fake-test",
            "XDG_STATE_HOME": str(self.state),
            "BATON_TEST_NOTIFY_LOG": str(self.notify_log),
        }

    def notified(self) -> list[dict]:
        if not self.notify_log.exists():
            return []
        return [
            json.loads(line)["payload"] for line in self.notify_log.read_text().splitlines() if line.strip()
        ]


@pytest.fixture(scope="session")
def codex_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CodexWorld]:
    try:
        command = install(*CODEX)
    except NpmInstallError as exc:
        if os.environ.get("CI"):
            pytest.fail(f"cannot install {CODEX[0]}@{CODEX[1]} from npm: {exc}")
        pytest.skip(f"cannot install {CODEX[0]}@{CODEX[1]} from npm (CI would fail here): {exc}")
    root = tmp_path_factory.mktemp("codex")
    home, project, state = root / "codex-home", root / "api", root / "state"
    for folder in (home, project, state, root / "home"):
        folder.mkdir()
    api = FakeResponses().start()
    logger = root / "notify_logger.py"
    logger.write_text(NOTIFY_LOGGER)
    (home / "config.toml").write_text(codex_config(api.base_url, trusted=(str(project),),
                                                   notify=[sys.executable, str(logger)]))
    # what `baton hooks install --codex` does, on this CODEX_HOME: chain to the notify program already there
    install_notify(home / "config.toml", [sys.executable, "-m", "pipeline.spool", "codex"])
    world = CodexWorld(command, home, project, state, root / "notify.jsonl", api)
    try:
        yield world
    finally:
        stop_daemon(home)
        api.stop()
        shutil.rmtree(home / "packages", ignore_errors=True)  # the 315 MB binary copy


def start_codex(server: TmuxServer, world: CodexWorld, count: int = 1, args: str = "") -> list[str]:
    """``count`` Codex TUIs started together (with command line ``args``), once all show their input line."""
    panes = [
        server.new_pane(f"{world.command} {args}".strip(), cwd=world.project, env=world.env(), height=48)
        for _ in range(count)
    ]

    def ready(pane: str) -> bool:
        screen = server.run("capture-pane", "-p", "-e", "-J", "-t", pane)
        return "gpt-fake" in screen and composer_draft(screen) == ""

    wait_for(lambda: all(ready(pane) for pane in panes), timeout=120, interval=0.1,
             what="the Codex TUI's input line")
    return panes
