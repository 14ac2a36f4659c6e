"""Which session belongs to a pane: the Copilot CLI resolution chain (docs/agents.md, GitHub Copilot CLI).

The pane's process tree holds ``bash → node`` (npm's loader, comm ``node``) ``→ copilot`` (the native
binary, a Node SEA whose **comm is** ``MainThread``: it is known by its executable's name). The chain:

1. **process** — the native ``copilot`` under the pane;
2. **home** — ``$COPILOT_HOME`` of the process, else ``$HOME/.copilot`` of the process;
3. **lock file** — the process writes ``session-state/<id>/inuse.<pid>.lock`` (holding its pid) while it
   runs, and holds ``inuse.<pid>.hold`` open: the folder of that lock is its session;
4. **argument** — ``--session-id=<uuid>`` / ``--resume=<uuid>`` names the session when no lock is found.

The session folder exists from the start; its ``events.jsonl`` appears only at the first prompt (not an
error: idle, no turn). Every step is recorded for ``baton resolve``. Blocking /proc and file work: callers
run it in a worker thread.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.plugin.agents import ResolveStep
from pipeline.plugin.tools import proc

__all__ = ["CopilotProcess", "Resolution", "default_copilot_home", "find_copilot_process", "resolve_session"]

#: the native binary's executable name (its comm is ``MainThread``)
EXE_NAME = "copilot"
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
_SESSION_ARG = re.compile(r"^--(?:session-id|resume)=(.+)$")


def default_copilot_home() -> Path:
    home = os.environ.get("COPILOT_HOME")
    return Path(home) if home else Path(os.path.expanduser("~")) / ".copilot"


@dataclass(frozen=True)
class CopilotProcess:
    """The pane's native Copilot process and where it keeps its state."""

    proc: proc.Proc
    argv: tuple[str, ...]
    cwd: str | None
    home: Path
    home_from: str

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def key(self) -> tuple[int, int]:
        return self.proc.key

    def alive(self) -> bool:
        return self.proc.running()

    def session_arg(self) -> str | None:
        """The session named on the command line (``--session-id=ID``, ``--resume ID``), if any."""
        args = list(self.argv[1:])
        for i, arg in enumerate(args):
            m = _SESSION_ARG.match(arg)
            value = m.group(1) if m else args[i + 1] if arg in ("--session-id", "--resume", "-r") \
                and i + 1 < len(args) else None
            if value and UUID.match(value):
                return value.lower()
        return None


def find_copilot_process(pane_pid: int) -> CopilotProcess | None:
    """The native ``copilot`` under the pane, by its executable (never npm's node loader, whose script is
    also ``copilot``: run by its shebang its comm may read so); by comm only when no executable says."""
    tree = list(proc.subtree(pane_pid))
    p = next((p for p in tree if p.exe_name == EXE_NAME), None) or \
        next((p for p in tree if p.comm == EXE_NAME), None)
    if p is None:
        return None
    env = proc.environ(p.pid)
    if env.get("COPILOT_HOME"):
        home, home_from = Path(env["COPILOT_HOME"]), "$COPILOT_HOME of the process"
    elif env.get("HOME"):
        home, home_from = Path(env["HOME"]) / ".copilot", "$HOME/.copilot of the process"
    else:
        home, home_from = default_copilot_home(), "batonpass's own (unreadable environment)"
    return CopilotProcess(proc=p, argv=tuple(proc.cmdline(p.pid)), cwd=proc.cwd(p.pid), home=home,
                          home_from=home_from)


@dataclass
class Resolution:
    process: CopilotProcess | None
    session_dir: Path | None = None
    rule: str = ""
    steps: list[ResolveStep] = field(default_factory=list)

    @property
    def events(self) -> Path | None:
        return self.session_dir / "events.jsonl" if self.session_dir else None

    @property
    def session_id(self) -> str | None:
        return self.session_dir.name if self.session_dir else None


def lock_session(home: Path, pid: int) -> Path | None:
    """The session folder holding ``inuse.<pid>.lock`` (the newest, should there be several)."""
    root = home / "session-state"
    try:
        found = [d for d in root.iterdir() if (d / f"inuse.{pid}.lock").exists()]
    except OSError:
        return None
    return max(found, key=lambda d: d.stat().st_mtime) if found else None


def resolve_session(pane_pid: int, *, process: CopilotProcess | None = None) -> Resolution:
    """Run the chain for the pane whose shell is ``pane_pid``; see the module docstring."""
    process = process or find_copilot_process(pane_pid)
    res = Resolution(process)
    if process is None:
        res.steps.append(ResolveStep("process", False, f"no copilot process under pid {pane_pid}"))
        return res
    res.steps.append(ResolveStep("process", True, f"copilot pid {process.pid} (comm {process.proc.comm}), "
                                 f"cwd {process.cwd}", process.pid))
    res.steps.append(ResolveStep("copilot home", True, f"{process.home} ({process.home_from})",
                                 str(process.home)))
    locked = lock_session(process.home, process.pid)
    if locked is not None:
        res.session_dir, res.rule = locked, "lock file"
        res.steps.append(ResolveStep("lock file", True, f"{locked.name}/inuse.{process.pid}.lock",
                                     str(locked)))
    else:
        res.steps.append(ResolveStep("lock file", True, f"no: no session-state/*/inuse.{process.pid}.lock"))
        named = process.session_arg()
        if named is not None and (process.home / "session-state" / named).is_dir():
            res.session_dir, res.rule = process.home / "session-state" / named, "argument"
            res.steps.append(ResolveStep("argument", True, f"session {named} named on the command line",
                                         str(res.session_dir)))
    if res.session_dir is None:
        res.steps.append(ResolveStep("session", False, "no session folder found for this process"))
        return res
    res.steps.append(ResolveStep("session", True, f"{res.session_dir.name} (rule: {res.rule})",
                                 res.session_dir.name))
    events = res.session_dir / "events.jsonl"
    res.steps.append(ResolveStep("transcript", True, str(events) if events.exists()
                                 else f"{events} not yet (it appears at the first prompt)", str(events)))
    return res
