"""Agents that run as a Node.js script (Gemini CLI, Qwen Code): which ``node`` in a pane is the agent, which
of them does the work, and the home its settings and sessions are under.

Such an agent is a ``node`` whose comm says nothing; its argv names the script (``…/bin/gemini``,
``…/@qwen-code/qwen-code/cli.js``). Both relaunch themselves as a child ``node`` (with more heap, an
environment marker) that does the work: the deepest claiming process under the pane is the worker.
:class:`AgentProc` is such a process as an adapter found it (pi's too: a ``node`` titled ``pi``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pipeline.system import proc

__all__ = ["AgentProc", "deepest", "home_of", "runs_script"]


@dataclass(frozen=True)
class AgentProc:
    """The pane's working agent process, as an adapter found it (each agent adds where its files are)."""

    proc: proc.Proc
    cwd: str | None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.running()


def runs_script(p: proc.Proc, names: frozenset[str], package_dirs: tuple[str, ...]) -> bool:
    """Whether ``p`` is the agent: a process named one of ``names`` (a native build), or a ``node`` whose
    first non-option arguments name a command of ``names`` or a file under one of ``package_dirs``
    (``/gemini-cli/``)."""
    if p.comm in names or p.exe_name in names:
        return True
    if p.comm != "node" and not p.exe_name.startswith("node"):
        return False
    for arg in proc.cmdline(p.pid)[1:4]:
        if arg.startswith("-"):
            continue
        if os.path.basename(arg) in names or any(d in arg for d in package_dirs):
            return True
    return False


def deepest(pane_pid: int, claims: Callable[[proc.Proc], bool]) -> proc.Proc | None:
    """The deepest process under the pane that ``claims`` is the agent: the relaunched child does the work."""
    found = [p for p in proc.subtree(pane_pid) if claims(p)]
    return found[-1] if found else None


def home_of(env: dict[str, str], override: str | None = None) -> tuple[Path, str]:
    """The home a process keeps its agent's files under: ``$override`` (the agent's own variable) if set,
    else its ``$HOME``, else batonpass's; and where that came from, in words (for ``baton resolve``)."""
    if override and env.get(override):
        return Path(env[override]), f"${override} of the process"
    if env.get("HOME"):
        return Path(env["HOME"]), "$HOME of the process"
    return Path(os.path.expanduser("~")), "batonpass's home (environment unreadable)"
