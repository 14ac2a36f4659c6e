"""A real agent CLI's isolated home in tests (Gemini CLI, pi, Qwen Code): its project, the environment its
pane runs with (``env -i``: nothing of the machine's environment, a real key, leaks in), and what every such
test does with it — start it in a pane, type as a person would, read back the prompts its session files
hold. Each agent's module (tests/support/gemini.py, pi.py, qwen.py) says where its files are."""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from tests.support.tmux import TmuxServer

__all__ = ["AgentHome", "PANE_ENV", "env_shell", "new_project"]

#: the terminal and prompt every agent's pane has
PANE_ENV = {"TERM": "tmux-256color", "LANG": "C.UTF-8", "PS1": "$ "}


def env_shell(env: dict[str, str]) -> str:
    """A clean bash with only ``env`` — and tmux's own ``TMUX``/``TMUX_PANE``, which hooks report to tell
    panes apart."""
    pairs = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
    return f'env -i {pairs} TMUX="$TMUX" TMUX_PANE="$TMUX_PANE" bash --norc --noprofile'


def new_project(root: Path) -> tuple[Path, Path]:
    """``(home, project)`` under ``root``: an empty home and a project holding one small file."""
    home, project = root / "home", root / "proj" / "my-app"
    project.mkdir(parents=True)
    (project / "app.py").write_text('print("hello from my-app")\n')
    return home, project


@dataclass(frozen=True)
class AgentHome:
    #: the command that starts the agent
    command: ClassVar[str]
    #: its session file's reader (a ``FollowedFile`` whose state tells its turns)
    reader: ClassVar[Any]
    project: Path
    env: dict[str, str]

    def shell_command(self) -> str:
        return env_shell(self.env)

    def session_files(self) -> list[Path]:
        raise NotImplementedError

    def file_prompts(self, path: Path) -> list[str]:
        """The prompts one session file holds."""
        session = self.reader(path)
        session.read()
        turns = session.state.turns
        return [t.prompt for t in (turns() if callable(turns) else turns)]

    def prompts(self) -> list[str]:
        """Every prompt typed into any of its sessions, as the session files hold them."""
        return [prompt for path in self.session_files() for prompt in self.file_prompts(path)]

    def launch(self, server: TmuxServer, args: str = "") -> str:
        """A pane in the project where the agent's command was just typed (not waited for); returns the pane
        id."""
        pane = server.new_pane(self.shell_command(), cwd=self.project, width=120, height=40)
        server.type(pane, f"{self.command} {args}".strip())
        return pane

    @staticmethod
    def say(server: TmuxServer, pane: str, text: str) -> None:
        """Type ``text`` and submit it as a person would (Gemini CLI takes an Enter less than 30 ms after a
        typed key for a newline: its FAST_RETURN_TIMEOUT)."""
        server.type(pane, text, enter=False)
        time.sleep(0.2)  # shapes the scenario: a person's pause before Enter
        server.run("send-keys", "-t", pane, "Enter")
