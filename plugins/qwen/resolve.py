"""Which session file belongs to a pane: the Qwen Code resolution chain (docs/agent-versions.md, Qwen Code).

Qwen Code runs as ``node …/bin/qwen``, which relaunches itself as ``node --expose-gc
…/@qwen-code/qwen-code/cli.js`` (with ``QWEN_CODE_NO_RELAUNCH=true``): that child does the work, and writes
``<qwen dir>/sessions/<its pid>.json`` naming the session it is in (``sessionId``, rewritten by ``/clear``).
So the chain is exact, no clock involved:

1. **process** — the deepest Qwen Code ``node`` under the pane;
2. **qwen dir** — ``$QWEN_HOME`` of that process, else ``$HOME/.qwen``;
3. **pid file** — ``sessions/<pid>.json``: its ``sessionId`` (and its ``pid``, which must be this process);
4. **session** — ``projects/*/chats/<sessionId>.jsonl`` (the project folder is the cwd with every
   non-alphanumeric character as ``-``; any folder holding that id will do). It is created at the first
   prompt: until then the session is known and its file is not.

Blocking file and /proc work: callers run it in a worker thread.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from pipeline.plugin.node_cli import AgentProc, deepest, home_of, runs_script
from pipeline.plugin.tools import proc
from pipeline.plugin.turns import FileResolution

__all__ = ["QwenProcess", "Resolution", "find_qwen", "is_qwen", "project_folder", "resolve_session"]

QWEN_NAMES = frozenset({"qwen"})
PACKAGE_DIRS = ("/@qwen-code/qwen-code/",)
SESSION_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def is_qwen(p: proc.Proc) -> bool:
    """A ``node`` running Qwen Code (``…/bin/qwen``, ``…/@qwen-code/qwen-code/cli.js``), or a ``qwen``."""
    return runs_script(p, QWEN_NAMES, PACKAGE_DIRS)


@dataclass(frozen=True)
class QwenProcess(AgentProc):
    """The pane's working Qwen Code process and where its files are."""

    qwen_dir: Path
    home_from: str
    relaunched: bool


def find_qwen(pane_pid: int) -> QwenProcess | None:
    found = deepest(pane_pid, is_qwen)
    if found is None:
        return None
    env = proc.environ(found.pid)
    if env.get("QWEN_HOME"):
        qwen_dir, home_from = Path(env["QWEN_HOME"]).expanduser(), "$QWEN_HOME of the process"
    else:
        home, home_from = home_of(env)
        qwen_dir = home / ".qwen"
    return QwenProcess(proc=found, cwd=proc.cwd(found.pid), qwen_dir=qwen_dir, home_from=home_from,
                       relaunched=env.get("QWEN_CODE_NO_RELAUNCH") == "true")


def project_folder(cwd: str) -> str:
    """The folder of ``cwd``'s sessions under ``projects/``: ``/tmp/a.b`` → ``-tmp-a-b``."""
    return re.sub(r"[^A-Za-z0-9]", "-", cwd)


def pid_session(qwen_dir: Path, pid: int) -> str | None:
    """The session id Qwen Code's pid file says the process ``pid`` is in, or None."""
    try:
        data = json.loads((qwen_dir / "sessions" / f"{pid}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    sid = data.get("sessionId") if isinstance(data, dict) and data.get("pid") == pid else None
    return sid if isinstance(sid, str) and SESSION_ID.match(sid) else None


@dataclass
class Resolution(FileResolution):
    process: QwenProcess | None = None
    session_id: str | None = None


def _session_path(qwen_dir: Path, cwd: str | None, sid: str) -> Path | None:
    if cwd is not None:
        path = qwen_dir / "projects" / project_folder(cwd) / "chats" / f"{sid}.jsonl"
        if path.exists():
            return path
    return next(iter(sorted((qwen_dir / "projects").glob(f"*/chats/{sid}.jsonl"))), None)


def resolve_session(pane_pid: int, process: QwenProcess | None = None) -> Resolution:
    """Run the chain for the pane whose shell is ``pane_pid`` (see the module docstring)."""
    process = process or find_qwen(pane_pid)
    res = Resolution(process=process)
    if process is None:
        res.add("process", False, f"no Qwen Code process under pid {pane_pid}")
        return res
    which = "relaunched child" if process.relaunched else "top"
    res.add("process", True, f"node pid {process.pid} ({which}), cwd {process.cwd}", process.pid)
    res.add("qwen dir", True, f"{process.qwen_dir} ({process.home_from})", str(process.qwen_dir))
    pid_file = process.qwen_dir / "sessions" / f"{process.pid}.json"
    sid = pid_session(process.qwen_dir, process.pid)
    if sid is None:
        res.add("pid file", False, f"{pid_file} is missing or names no session of pid {process.pid} "
                "(starting?)")
        return res
    res.session_id = sid
    res.add("pid file", True, f"{pid_file}: session {sid}", sid)
    res.session = _session_path(process.qwen_dir, process.cwd, sid)
    if res.session is None:
        res.add("transcript", False, f"no {sid}.jsonl under {process.qwen_dir / 'projects'} yet (it is made "
                "at the first prompt)")
    else:
        res.add("transcript", True, str(res.session), str(res.session))
    return res
