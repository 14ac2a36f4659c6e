"""Which session file belongs to a pane: the pi resolution chain (docs/agents.md, pi).

pi runs as ``node`` with its title set to ``pi`` (comm ``pi``, argv overwritten: ``--session-dir`` cannot be
read back). It writes no PID file and holds no fd on its session file, which it creates at the first prompt
(``/new`` starts another at the next prompt). The chain is:

1. **process** — the pane's ``pi`` process;
2. **agent dir** — ``$PI_CODING_AGENT_DIR`` of that process (else ``$HOME/.pi/agent``), and its sessions
   folder: ``$PI_CODING_AGENT_SESSION_DIR``, else ``sessionDir`` in its ``settings.json``, else
   ``sessions/--<cwd>--`` under the agent dir (the cwd without its leading ``/``, ``/ \\ :`` as ``-``);
3. **session** — a hook's ``session_file`` from this pane; else the sessions whose header starts since the
   process did (:mod:`pipeline.plugin.started`): the one holding the prompt typed here last, else the newest;
   else (``--continue``, ``--resume``) the one written to last since the process started.

When no pi runs in the pane, the **node** step says whether the ``pi`` on the pane's PATH can start: pi 1.x
needs Node 22.19 or newer and exits at once on an older one. Everything here is blocking file and /proc work
(and one ``node --version``): callers run it in a worker thread.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pipeline.plugin.node_cli import AgentProc
from pipeline.plugin.started import session_files, started_since, written_since
from pipeline.plugin.tools import iso_time, proc
from pipeline.plugin.turns import FileResolution

__all__ = ["PiProcess", "Resolution", "find_pi", "is_pi", "node_check", "resolve_session", "session_folder"]

SESSION_NAME = re.compile(r"^\d{4}-\d{2}-\d{2}T[\d-]+Z_[0-9A-Za-z-]+\.jsonl$")
#: pi's own package names (the old one froze at 0.73.1)
PACKAGES = ("@earendil-works/pi-coding-agent", "@mariozechner/pi-coding-agent")


def is_pi(p: proc.Proc) -> bool:
    """The pi process: its title ``pi`` (comm) on a ``node`` or a binary named ``pi``, or a ``node`` whose
    argv still names pi's ``cli.js`` (before it set its title)."""
    if p.comm == "pi" or p.exe_name == "pi":
        return True
    if p.comm != "node" and not p.exe_name.startswith("node"):
        return False
    return any("pi-coding-agent/" in arg for arg in proc.cmdline(p.pid)[1:3])


@dataclass(frozen=True)
class PiProcess(AgentProc):
    """The pane's pi process and what it says about where its sessions are."""

    agent_dir: Path
    agent_dir_from: str
    session_dir: Path | None
    started_at: float


def find_pi(pane_pid: int) -> PiProcess | None:
    """The pi process under the pane (the deepest, should one start another)."""
    found = [p for p in proc.subtree(pane_pid) if is_pi(p)]
    if not found:
        return None
    p = found[-1]
    env = proc.environ(p.pid)
    home = env.get("HOME") or os.path.expanduser("~")
    if env.get("PI_CODING_AGENT_DIR"):
        agent = _home_path(env["PI_CODING_AGENT_DIR"], home)
        agent_from = "$PI_CODING_AGENT_DIR of the process"
    else:
        agent, agent_from = Path(home) / ".pi" / "agent", "$HOME/.pi/agent of the process"
    session_dir = _home_path(env["PI_CODING_AGENT_SESSION_DIR"], home) \
        if env.get("PI_CODING_AGENT_SESSION_DIR") else _settings_session_dir(agent, home)
    return PiProcess(proc=p, cwd=proc.cwd(p.pid), agent_dir=agent, agent_dir_from=agent_from,
                     session_dir=session_dir, started_at=proc.started_at(p))


def _home_path(value: str, home: str) -> Path:
    return Path(home + value[1:]) if value == "~" or value.startswith("~/") else Path(value)


def _settings_session_dir(agent: Path, home: str) -> Path | None:
    """``sessionDir`` of the agent dir's ``settings.json``, if set."""
    try:
        value = json.loads((agent / "settings.json").read_text(encoding="utf-8")).get("sessionDir")
    except (OSError, ValueError, AttributeError):
        return None
    return _home_path(value, home) if isinstance(value, str) and value else None


def session_folder(process: PiProcess) -> tuple[Path | None, str]:
    """Where the process keeps this folder's sessions, and why there."""
    if process.session_dir is not None:
        return process.session_dir, "its session dir ($PI_CODING_AGENT_SESSION_DIR or settings sessionDir)"
    if process.cwd is None:
        return None, f"cannot read the cwd of pid {process.pid}"
    return process.agent_dir / "sessions" / folder_name(process.cwd), f"the folder of cwd {process.cwd}"


def folder_name(cwd: str) -> str:
    """``--<cwd>--``: the cwd without its leading separator, ``/``, ``\\`` and ``:`` as ``-``."""
    return "--" + re.sub(r"[/\\:]", "-", cwd.lstrip("/\\")) + "--"


def session_start(path: Path) -> float | None:
    """A session file's start, from its header line."""
    try:
        with open(path, "rb") as f:
            head = json.loads(f.readline() or b"{}")
    except (OSError, ValueError):
        return None
    return iso_time(head.get("timestamp")) if isinstance(head, dict) and head.get("type") == "session" \
        else None


def holds_prompt(path: Path, prompt: str) -> bool:
    """Whether the session file holds ``prompt`` as a user message (whitespace ignored)."""
    want = " ".join(prompt.split())
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if '"role":"user"' not in line.replace(" ", ""):
                    continue
                try:
                    message = json.loads(line).get("message") or {}
                except (ValueError, AttributeError):
                    continue
                content = message.get("content")
                texts = [content] if isinstance(content, str) else [
                    b.get("text", "") for b in content or [] if isinstance(b, dict)]
                if " ".join("".join(str(t) for t in texts).split()) == want:
                    return True
    except OSError:
        pass
    return False


@dataclass
class Resolution(FileResolution):
    process: PiProcess | None = None


def resolve_session(pane_pid: int, *, hook_session: str | None = None, last_prompt: str | None = None,
                    process: PiProcess | None = None) -> Resolution:
    """Run the chain for the pane whose shell is ``pane_pid`` (see the module docstring)."""
    process = process or find_pi(pane_pid)
    res = Resolution(process=process)
    if process is None:
        res.add("process", False, f"no pi process under pid {pane_pid}")
        node = node_check(pane_pid)
        if node is not None:
            res.add("node", node[0], node[1])
        return res
    res.add("process", True, f"pi pid {process.pid} ({process.proc.exe_name}), cwd {process.cwd}",
            process.pid)
    res.add("agent dir", True, f"{process.agent_dir} ({process.agent_dir_from})", str(process.agent_dir))
    folder, why = session_folder(process)
    if folder is None:
        res.add("sessions", False, why)
        return res
    res.add("sessions", True, f"{folder} ({why})", str(folder))
    files = session_files(folder, SESSION_NAME)
    if hook_session and Path(hook_session) in files:
        return res.decide("hook", Path(hook_session), "a hook of this pane named it")
    res.add("hook", True, "no: no hook from this pane named a session file of this folder")
    started = started_since(files, process.started_at, session_start)
    if started:
        typed = last_prompt if last_prompt and last_prompt.strip() else None
        holding = [p for _, p in started if typed and holds_prompt(p, typed)]
        if holding and holding[-1] != started[-1][1]:
            return res.decide("last prompt", holding[-1], f"{holding[-1].name} holds the prompt typed here")
        start, chosen = started[-1]
        more = f" (the newest of {len(started)}: /new)" if len(started) > 1 else ""
        return res.decide("start time", chosen, f"{chosen.name} started "
                          f"{start - process.started_at:+.1f}s after the process{more}")
    res.add("start time", True, f"no: no session of this folder started after pid {process.pid} (pi makes "
            "its file at the first prompt)")
    written = written_since(files, process.started_at)
    if written:
        return res.decide("written since start", written[-1],
                          f"{written[-1].name} was written to since the process started (a resumed session)")
    res.add("written since start", False, f"no session file of this folder was written to since pid "
            f"{process.pid} started ({len(files)} older): no prompt yet")
    return res


# ---- can the pane's pi start at all ---------------------------------------------------------------------

_ENGINE = re.compile(r">=\s*(\d+)\.(\d+)(?:\.(\d+))?")


def node_check(pane_pid: int) -> tuple[bool, str] | None:
    """Whether the ``pi`` on the pane's PATH can start on the ``node`` beside it there: ``(ok, words)``, or
    None when the pane's PATH holds no pi."""
    path = proc.environ(pane_pid).get("PATH")
    pi = shutil.which("pi", path=path) if path else None
    package = _package_of(Path(pi)) if pi else None
    if package is None:
        return None
    manifest = json.loads(package.read_text(encoding="utf-8"))
    wanted = _ENGINE.search(str((manifest.get("engines") or {}).get("node") or ""))
    node = shutil.which("node", path=path)
    have = _node_version(node) if node else None
    name = f"{manifest.get('name')} {manifest.get('version')}"
    if wanted is None:
        return True, f"{name} names no minimum Node; node on the pane's PATH: {have or 'none'}"
    need = tuple(int(g or 0) for g in wanted.groups())
    if have is None or _version(have) < need:
        return False, (f"{name} needs Node {'.'.join(map(str, need))} or newer; the pane's PATH has "
                       f"{have + ' (' + str(node) + ')' if have else 'no node'}: pi exits at start")
    return True, f"{name} on Node {have} ({node})"


def _package_of(command: Path) -> Path | None:
    """The package.json of pi's package, found from its command (a link to ``…/dist/cli.js``)."""
    try:
        here = command.resolve().parent
    except OSError:
        return None
    for folder in (here, *here.parents):
        manifest = folder / "package.json"
        try:
            if json.loads(manifest.read_text(encoding="utf-8")).get("name") in PACKAGES:
                return manifest
        except (OSError, ValueError, AttributeError):
            continue
    return None


def _node_version(node: str) -> str | None:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=10,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", text)[:3])
