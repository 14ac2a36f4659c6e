"""Qwen Code in tests: the real CLI (from npm, run on npm's Node 22) in an isolated home that starts straight
into its input box, offline, against :class:`tests.fakes.openai_chat.FakeChat`.

What Qwen Code 0.24.4 needs for that (seen on the real CLI): ``OPENAI_BASE_URL``/``OPENAI_API_KEY``/
``OPENAI_MODEL`` and ``security.auth.selectedType: "openai"`` (no auth dialog); ``tools.approvalMode:
"default"`` (out of the box an LLM classifier — one more API request — approves tools: "Auto mode");
auto-update, usage statistics, telemetry, the feedback and welcome-back dialogs and the memory extractor
(one more request after every turn) off; ``tools.useRipgrep: false`` (npm leaves its bundled ``rg`` without
its execute bit: a warning box). Follow-up suggestions stay on: batonpass must live with them. ``QWEN_HOME``
names its folder (``.qwen``); the pane runs ``env -i``, so nothing of the machine's environment leaks in.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from plugins.qwen.screen import input_draft
from plugins.qwen.session import SessionFile
from tests.support.agent_home import PANE_ENV, AgentHome, new_project
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

__all__ = ["QwenHome", "make_qwen_home", "qwen_settings"]


def qwen_settings() -> dict:
    """A quiet, offline ``settings.json`` (see the module docstring)."""
    return {
        "security": {"auth": {"selectedType": "openai"}},
        "model": {"name": "fake-model"},
        "general": {"enableAutoUpdate": False},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "ui": {"enableUserFeedback": False, "enableWelcomeBack": False},
        "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False,
                   "enableAutoSkill": False},
        "tools": {"approvalMode": "default", "useRipgrep": False},
    }


@dataclass(frozen=True)
class QwenHome(AgentHome):
    command = "qwen"
    reader = SessionFile
    qwen_dir: Path

    def session_files(self) -> list[Path]:
        return sorted((self.qwen_dir / "projects").glob("*/chats/*.jsonl"))

    def start(self, server: TmuxServer) -> str:
        """A pane running ``qwen`` in the project, at its empty input box; returns the pane id."""
        pane = self.launch(server)
        wait_for(lambda: self.draft(server, pane) == ""
                 and "Initializing" not in server.capture(pane), 60, what="Qwen Code's input box")
        time.sleep(1.0)  # shapes the scenario: keys typed while it still loads its tools are dropped
        return pane

    @staticmethod
    def draft(server: TmuxServer, pane: str) -> str | None:
        """The input box as the adapter reads it (with escapes: a follow-up suggestion is no draft)."""
        return input_draft(server.run("capture-pane", "-p", "-e", "-t", pane))

    def settings(self) -> dict:
        return json.loads((self.qwen_dir / "settings.json").read_text())


def make_qwen_home(root: Path, *, api_url: str, qwen_bin: Path, node_dir: Path,
                   state: Path | None = None) -> QwenHome:
    home, project = new_project(root)
    qwen_dir = home / ".qwen"
    qwen_dir.mkdir(parents=True)
    (qwen_dir / "settings.json").write_text(json.dumps(qwen_settings(), indent=2))
    env = {"HOME": str(home), "QWEN_HOME": str(qwen_dir), "OPENAI_BASE_URL": api_url,
           "OPENAI_API_KEY": "sk-fake", "OPENAI_MODEL": "fake-model",
           "PATH": f"{node_dir}:{qwen_bin.parent}:/usr/local/bin:/usr/bin:/bin", **PANE_ENV}
    if state is not None:
        env["XDG_STATE_HOME"] = str(state)  # where the hooks spool their records
    return QwenHome(qwen_dir=qwen_dir, project=project, env=env)
