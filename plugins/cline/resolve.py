"""Which session belongs to a pane: the Cline resolution chain (docs/agents.md, Cline).

Cline is one compiled binary (comm ``cline``). The TUI starts a hub daemon, the same binary run as ``cline
--cline-hub-daemon``, as its child in a session of its own: it outlives the pane (and ``tmux kill-server``)
and is never the pane's agent. The chain:

1. **process** — the ``cline`` under the pane that is not the hub daemon;
2. **data folder** — its ``--data-dir``, else ``$CLINE_DATA_DIR``, else ``data`` in its ``--config``,
   ``$CLINE_DIR`` or ``$HOME/.cline``; sessions in ``$CLINE_SESSION_DATA_DIR``, else ``sessions`` there;
3. **session** — the newest session the process started, as Cline's log says (``session.started`` lines
   carry the pid of the TUI that started the session, whichever process runs it: :mod:`plugins.cline.
   launches`); when the log names none of the process's, the newest session that started since the process
   did (its id begins with that time in ms: only those folders are read; a new task in the same process is
   a newer session), in its folder (``cwd``), run by it or by the hub daemon (a session's ``pid`` is the
   hub's when the hub runs it), less those the log gives another process and another TUI's in the same
   folder (the first that started after it); else the one ``--id ID`` resumes.

The session folder appears at the first prompt: before it, there is no session yet (not an error).
Blocking /proc and file work: callers run it in a worker thread.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from pipeline.plugin.node_cli import AgentProc
from pipeline.plugin.tools import proc
from pipeline.plugin.turns import FileResolution
from plugins.cline.launches import LaunchLog, log_path

__all__ = ["DAEMON_ARG", "ClineProcess", "Resolution", "cline_data_dir", "find_cline", "is_cline",
           "resolve_session"]

DAEMON_ARG = "--cline-hub-daemon"
#: a session's id (its start in ms) may precede its process's start by this much (clock granularity)
CLOCK_SLACK_S = 2.0


def is_cline(p: proc.Proc) -> bool:
    """A ``cline`` process that is not its hub daemon (nor another of its background helpers)."""
    if "cline" not in (p.comm, p.exe_name):
        return False
    return DAEMON_ARG not in proc.cmdline(p.pid)[1:]


def _arg(argv: tuple[str, ...], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def cline_data_dir(argv: tuple[str, ...], env: dict[str, str]) -> tuple[Path, str]:
    """Cline's data folder for a process with this ``argv`` and ``env``, and where that came from."""
    if (value := _arg(argv, "--data-dir")) is not None:
        return Path(value).expanduser(), "--data-dir"
    if env.get("CLINE_DATA_DIR"):
        return Path(env["CLINE_DATA_DIR"]).expanduser(), "$CLINE_DATA_DIR"
    config = _arg(argv, "--config") or env.get("CLINE_DIR")
    if config:
        return Path(config).expanduser() / "data", "--config / $CLINE_DIR"
    home = env.get("HOME") or os.path.expanduser("~")
    return Path(home) / ".cline" / "data", "$HOME/.cline/data"


@dataclass(frozen=True)
class ClineProcess(AgentProc):
    """The pane's Cline and where it keeps its sessions."""

    argv: tuple[str, ...]
    data_dir: Path
    data_from: str
    sessions_dir: Path
    started_at: float
    #: Cline's log, which says which process started which session
    log_file: Path


def find_cline(pane_pid: int) -> ClineProcess | None:
    """The pane's Cline: the first ``cline`` under the pane's shell that is not the hub daemon."""
    p = proc.find_first(pane_pid, is_cline)
    if p is None:
        return None
    argv, env = tuple(proc.cmdline(p.pid)), proc.environ(p.pid)
    data, data_from = cline_data_dir(argv, env)
    sessions = Path(env["CLINE_SESSION_DATA_DIR"]) if env.get("CLINE_SESSION_DATA_DIR") else data / "sessions"
    return ClineProcess(proc=p, argv=argv, cwd=proc.cwd(p.pid), data_dir=data, data_from=data_from,
                        sessions_dir=sessions, started_at=proc.started_at(p), log_file=log_path(data, env))


def _record(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _id_time(name: str) -> float | None:
    """The start a session id (``<ms>_<5 chars>``) carries, in epoch seconds."""
    head = name.split("_", 1)[0]
    return int(head) / 1000.0 if head.isdigit() else None


def _sessions_since(sessions_dir: Path, since: float) -> list[tuple[float, Path, dict[str, object]]]:
    """``(start, record path, record)`` of the sessions whose id says they started at or after ``since``,
    oldest first (only those folders are read)."""
    try:
        names = [d.name for d in os.scandir(sessions_dir) if d.is_dir()]
    except OSError:
        return []
    found = []
    for name in names:
        at = _id_time(name)
        if at is not None and at >= since:
            path = sessions_dir / name / f"{name}.json"
            found.append((at, path, _record(path)))
    return sorted(found, key=lambda f: f[0])


def other_tuis(process: ClineProcess) -> list[ClineProcess]:
    """The other Cline TUIs (not hub daemons) that keep their sessions where ``process`` does and work in
    its folder. Reads every process's ``/proc`` entry: asked only when several sessions could be its."""
    out = []
    for name in os.listdir("/proc"):
        p = proc.read_proc(int(name)) if name.isdigit() and int(name) != process.pid else None
        if p is None or not is_cline(p) or proc.cwd(p.pid) != process.cwd:
            continue
        other = find_cline(p.ppid)
        if other is not None and other.pid == p.pid and other.sessions_dir == process.sessions_dir:
            out.append(other)
    return out


def own_sessions(process: ClineProcess, log: LaunchLog | None = None) -> tuple[list[Path], bool]:
    """The session records ``process`` made, oldest first, and whether Cline's log said so: the sessions
    the log says it started; else those started since it did, in its folder, run by it or by the hub daemon
    (whose pid a session's record names when the hub runs it, seen on 3.0.65), less those the log gives
    another process and the first such session of each other TUI working in the same folder."""
    found = [(at, path, record) for at, path, record in
             _sessions_since(process.sessions_dir, process.started_at - CLOCK_SLACK_S)
             if record.get("cwd") in (None, process.cwd)]
    log = log if log is not None else LaunchLog(process.log_file)
    logged = log.sessions_of(process.pid, process.started_at - CLOCK_SLACK_S)
    if logged:
        return [path for _, path, _ in found if path.parent.name in logged], True
    others = log.started_by_others(process.pid) if logged is not None else set()
    return _by_time(process, [f for f in found if f[1].parent.name not in others]), False


def _by_time(process: ClineProcess, found: list[tuple[float, Path, dict[str, object]]]) -> list[Path]:
    """Of the sessions in ``process``'s folder since it started, those not another live TUI's: not run by
    one, nor the first that started after each other TUI in the folder did."""
    if len(found) > 1 and (others := other_tuis(process)):
        taken: dict[Path, int] = {}
        for tui in sorted([process, *others], key=lambda t: t.started_at):
            first = next((path for at, path, record in found if at >= tui.started_at - CLOCK_SLACK_S
                          and path not in taken and not _runs_other(record, tui)), None)
            if first is not None:
                taken[first] = tui.pid
        found = [f for f in found if taken.get(f[1], process.pid) == process.pid]
    return [path for _, path, record in found if not _runs_other(record, process)]


def _runs_other(record: dict[str, object], tui: ClineProcess) -> bool:
    """Whether a session record names another live Cline TUI than ``tui`` as the process that runs it (the
    hub daemon is none)."""
    pid = record.get("pid")
    if not isinstance(pid, int) or pid == tui.pid:
        return False
    p = proc.read_proc(pid)
    return p is not None and is_cline(p)


@dataclass
class Resolution(FileResolution):
    process: ClineProcess | None = None


def resolve_session(pane_pid: int, *, process: ClineProcess | None = None,
                    log: LaunchLog | None = None) -> Resolution:
    """Run the chain for the pane whose shell is ``pane_pid``; see the module docstring (``log``: Cline's
    log as read so far, when the caller keeps it between looks)."""
    process = process or find_cline(pane_pid)
    res = Resolution(process=process)
    if process is None:
        res.add("process", False, f"no cline process under pid {pane_pid} (its hub daemon is never one)")
        return res
    res.add("process", True, f"cline pid {process.pid}, cwd {process.cwd}", process.pid)
    res.add("data folder", True, f"{process.data_dir} ({process.data_from})", str(process.data_dir))
    own, logged = own_sessions(process, log)
    if own:
        more = f" (the newest of {len(own)})" if len(own) > 1 else ""
        if logged:
            return res.decide("log", own[-1], f"{own[-1].parent.name} started by pid {process.pid}, as "
                              f"{process.log_file} says{more}")
        return res.decide("start time", own[-1],
                          f"{own[-1].parent.name} started since pid {process.pid} did, in its folder{more}")
    named = _arg(process.argv, "--id")
    record = process.sessions_dir / named / f"{named}.json" if named else None
    if record is not None and record.exists():
        return res.decide("--id", record, f"{named}: resumed by `--id {named}`")
    res.add("session", True, f"none yet: no session in {process.sessions_dir} started since pid "
            f"{process.pid} did (it is written at the first prompt)")
    return res
