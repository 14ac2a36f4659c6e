"""Stand-in agents as hand-off targets, in real panes: the one place that starts them with the environment
their adapter reads (the daemon side gets the same variables: :meth:`StandinTarget.env`)."""

from __future__ import annotations

import os
import shlex
import time
from pathlib import Path

from tests.fakes.agent_tui import agent_tui_command
from tests.support.agents import demo_agent_command, messages
from tests.support.paths import REPO
from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

__all__ = ["TARGETS", "StandinTarget", "adapter_name", "press_enter", "say"]

#: every target the fault matrix and the recovery tests hand off to
TARGETS = ("demo", "claude", "codex", "opencode", "gemini", "copilot", "qwen", "pi", "cline")

_HOME = {"claude": "CLAUDE_CONFIG_DIR", "codex": "CODEX_HOME", "opencode": "XDG_DATA_HOME",
         "gemini": "GEMINI_CLI_HOME", "copilot": "COPILOT_HOME", "qwen": "QWEN_HOME",
         "pi": "PI_CODING_AGENT_DIR", "pi-0.73.1": "PI_CODING_AGENT_DIR", "cline": "CLINE_DATA_DIR"}


def adapter_name(standin: str) -> str:
    """The agent a stand-in stands for (``pi-0.73.1``, the old pi's look, is ``pi``)."""
    return standin.split("-")[0]


def press_enter(server: TmuxServer, pane: str) -> None:
    """Enter as a person presses it: a moment after the last key or paste. Sooner, Gemini CLI takes it for
    a newline (30 ms after a typed key, ~0.1 s after a paste: tests/fakes/agent_tui.py)."""
    time.sleep(0.2)  # shapes the scenario: a person's pause before Enter
    server.run("send-keys", "-t", pane, "Enter")


def say(server: TmuxServer, pane: str, text: str) -> None:
    """Type ``text`` and send it, as a person would."""
    server.type(pane, text, enter=False)
    press_enter(server, pane)


class StandinTarget:
    """A target agent in a pane of ``server``: the demo agent, or the Claude Code, Codex, OpenCode, Gemini
    CLI, Copilot CLI, Qwen Code or pi stand-in of tests/fakes/agent_tui.py; ``messages()`` is what it took as
    prompts, in order. ``under_shell``: run by a shell in the pane, not as the pane's own process (tmux
    continues a pane process that is stopped; a real agent's worker is a child process too).
    ``trust_dialog``: the project has ``.pi/`` settings, so pi 1.x asks whether to trust it at start."""

    def __init__(
        self, server: TmuxServer, tmp: Path, agent: str, name: str = "b", work_s: float = 0.1,
        *, under_shell: bool = False, trust_dialog: bool = False,
    ) -> None:
        self.server, self.agent = server, agent
        self.log = tmp / f"{name}.jsonl"
        self.home = tmp / f"{name}-{agent}-home"
        self.cwd = tmp / f"{name}-project"
        self.cwd.mkdir(exist_ok=True)
        if trust_dialog:
            (self.cwd / ".pi").mkdir(exist_ok=True)
            (self.cwd / ".pi" / "settings.json").write_text("{}\n")
        if agent == "demo":
            self.pane = server.new_pane(demo_agent_command(name, work_s=work_s, log=self.log), cwd=self.cwd)
            wait_for(lambda: "demo❯" in server.capture(self.pane), what="the demo agent")
        else:
            command = agent_tui_command(agent, self.log, work_s=work_s)
            self.pane = server.new_pane(
                f"bash -c {shlex.quote(command + '; exit')}" if under_shell else command,
                cwd=self.cwd,
                env={**self.env(), "PYTHONPATH": str(REPO)},
            )
            shows = ("stand-in", "Trust project folder?")
            wait_for(lambda: any(w in server.capture(self.pane) for w in shows), what=f"the {agent} stand-in")

    @property
    def tile(self) -> dict[str, str]:
        return {"pane": self.pane, "agent": adapter_name(self.agent)}

    def env(self) -> dict[str, str]:
        """What the daemon needs to find this agent's files (none for the demo agent)."""
        return self.home_env(self.agent, self.home)

    @staticmethod
    def home_env(agent: str, home: Path) -> dict[str, str]:
        """The variable naming ``agent``'s home, set to ``home`` (none for the demo agent)."""
        return {_HOME[agent]: str(home)} if agent in _HOME else {}

    def apply_env(self) -> None:
        os.environ.update(self.env())

    def messages(self) -> list[str]:
        return messages(self.log)
