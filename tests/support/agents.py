"""The package's demo agent (a real raw-mode TUI with bracketed paste) in a pane, and what it received."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

from tests.support.polling import wait_for
from tests.support.tmux import TmuxServer

__all__ = ["demo_agent_command", "messages", "read_log", "start_agent", "transcript_answers"]


def demo_agent_command(
    name: str = "agent", *, role: str = "echo", work_s: float = 0.3, log: Path | None = None
) -> str:
    """The shell command that runs the package's demo agent."""
    cmd = [sys.executable, "-m", "plugins.demo.agent", "--name", name, "--role", role,
           "--work-s", str(work_s)]
    if log is not None:
        cmd += ["--log", str(log)]
    return shlex.join(cmd)


def start_agent(
    server: TmuxServer, log: Path, name: str = "agent", role: str = "echo", work_s: float = 0.3
) -> str:
    """A demo agent in a new pane of ``server``, at its prompt; returns the pane id."""
    pane = server.new_pane(demo_agent_command(name, role=role, work_s=work_s, log=log))
    wait_for(lambda: "demo❯" in server.capture(pane), what=f"agent {name}")
    return pane


def read_log(path: Path) -> list[dict[str, Any]]:
    """The demo agent's --log: one record per message received (and per input typed while busy)."""
    if not path.exists():
        return []
    # only whole lines: the agent may be halfway through writing a long one (a 3 MB message)
    text = path.read_text()
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines() if line.strip()]


def messages(path: Path) -> list[str]:
    """The prompts the demo agent took, in order."""
    return [r["message"] for r in read_log(path) if "message" in r]


def transcript_answers(state: Path) -> list[str]:
    """Every answer the demo agents wrote to their transcripts under the state folder ``state``."""
    out = []
    for f in sorted((state / "batonpass" / "demo-agents").glob("*.jsonl")):
        out += [json.loads(line)["text"] for line in f.read_text().splitlines()
                if line.strip() and json.loads(line)["type"] == "answer"]
    return out
