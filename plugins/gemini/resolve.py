"""Which session file belongs to a pane: the Gemini CLI resolution chain (docs/agent-versions.md, Gemini CLI).

Gemini CLI runs as ``node …/gemini`` (comm ``node``) which relaunches itself as a child ``node`` with
``GEMINI_CLI_NO_RELAUNCH=true``: the child does the work (and is replaced by a new child, with a new
session, when the folder-trust dialog restarts it). It writes no PID file and holds no fd on its session
file, so the chain is:

1. **process** — the pane's gemini ``node`` processes; the worker is the deepest one;
2. **home** — ``$GEMINI_CLI_HOME`` (else ``$HOME``) of that process, ``/.gemini`` under it;
3. **project** — its cwd, and the slug ``~/.gemini/projects.json`` gives it (``tmp/<slug>/chats``);
4. **session** — the first rule that decides: a hook's ``transcript_path`` from this pane; the
   ``--session-id`` in its argv; else the sessions that started since the worker did (one is created at
   startup, before any prompt; ``/clear`` creates another in the same process), less the first session of
   each other Gemini CLI of the same project (another pane in this folder): the newest (the one holding
   the prompt batonpass last typed here, when none started since that prompt). With another Gemini CLI
   working in the folder, a newer session may be its ``/clear``: the one whose last prompt the pane's
   screen shows, else the one holding the prompt typed here, else the one followed until now (unsure:
   asked again on each change). Else (``--resume``) the one written to last since the worker started.

A new process appends a summary to the *previous* session's file, so the newest modified file is not a
rule. Everything here is blocking file and /proc work: callers run it in a worker thread.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from pipeline.plugin.node_cli import AgentProc, deepest, home_of, runs_script
from pipeline.plugin.started import CLOCK_SLACK_S, by_start, mtime, session_files, written_since
from pipeline.plugin.tools import proc
from pipeline.plugin.turns import FileResolution
from plugins.gemini.session import parse_time

__all__ = ["GeminiProcess", "Resolution", "SESSION_NAME", "find_gemini", "is_gemini", "resolve_session"]

SESSION_NAME = re.compile(r"^session-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-([0-9a-f]{8})\.jsonl$")
#: how much of a prompt must show on a pane's screen to say the prompt was typed there
PROMPT_SHOWN = 40
GEMINI_NAMES = frozenset({"gemini"})
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def is_gemini(p: proc.Proc) -> bool:
    """A ``node`` running Gemini CLI's command (``…/bin/gemini``, ``…/@google/gemini-cli/…``), or a
    process named ``gemini``."""
    return runs_script(p, GEMINI_NAMES, ("/gemini-cli/",))


@dataclass(frozen=True)
class GeminiProcess(AgentProc):
    """The pane's working Gemini CLI process and what it says about where its session is."""

    argv: tuple[str, ...]
    gemini_dir: Path
    home_from: str
    started_at: float
    relaunched: bool

    @property
    def session_id(self) -> str | None:
        """The ``--session-id`` of its argv (``--session-id X`` or ``--session-id=X``)."""
        for i, arg in enumerate(self.argv):
            value = self.argv[i + 1] if arg == "--session-id" and i + 1 < len(self.argv) else \
                arg.split("=", 1)[1] if arg.startswith("--session-id=") else None
            if value and UUID.match(value.lower()):
                return value.lower()
        return None


def find_gemini(pane_pid: int) -> GeminiProcess | None:
    """The deepest gemini process under the pane (the relaunched child does the work)."""
    found = deepest(pane_pid, is_gemini)
    if found is None:
        return None
    env = proc.environ(found.pid)
    home, home_from = home_of(env, "GEMINI_CLI_HOME")
    cwd = proc.cwd(found.pid)
    return GeminiProcess(proc=found, argv=tuple(proc.cmdline(found.pid)), cwd=cwd,
                         gemini_dir=home / ".gemini", home_from=home_from, started_at=proc.started_at(found),
                         relaunched=env.get("GEMINI_CLI_NO_RELAUNCH") == "true")


def project_slug(gemini_dir: Path, cwd: str) -> tuple[str, str]:
    """The folder name of ``cwd`` under ``tmp/``: its slug in ``projects.json``, else (older releases) the
    sha256 of the path; and where it came from."""
    try:
        projects = json.loads((gemini_dir / "projects.json").read_text(encoding="utf-8")).get("projects")
    except (OSError, ValueError, AttributeError):
        projects = None
    if isinstance(projects, dict) and isinstance(projects.get(cwd), str):
        return projects[cwd], "projects.json"
    return hashlib.sha256(cwd.encode()).hexdigest(), "sha256 of the path (no projects.json entry)"


def session_head(path: Path) -> tuple[str | None, float | None]:
    """A session file's id and start, from its first line."""
    try:
        with open(path, "rb") as f:
            head = json.loads(f.readline() or b"{}")
    except (OSError, ValueError):
        return None, None
    if not isinstance(head, dict):
        return None, None
    sid = head.get("sessionId")
    return (sid if isinstance(sid, str) else None), parse_time(head.get("startTime"))


def holds_prompt(path: Path, prompt: str) -> bool:
    """Whether the session file holds ``prompt`` as a typed message (whitespace ignored)."""
    want = " ".join(prompt.split())
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if '"user"' not in line:
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                for part in record.get("content") or [] if isinstance(record, dict) else []:
                    if isinstance(part, dict) and " ".join(str(part.get("text", "")).split()) == want:
                        return True
    except OSError:
        pass
    return False


def shows_last_prompt(path: Path, screen: str) -> bool:
    """Whether ``screen`` shows the start of the last prompt typed into the session file (whitespace
    ignored): the pane it was typed in."""
    last = None
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if '"user"' in line:
                    last = _typed_text(line) or last
    except OSError:
        return False
    start = " ".join((last or "").split())[:PROMPT_SHOWN]
    return bool(start) and start in " ".join(screen.split())


def _typed_text(line: str) -> str | None:
    """The text a person typed, of a session file's line (not Gemini's own ``<session_context>``)."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("type") != "user":
        return None
    texts = [str(p["text"]) for p in record.get("content") or [] if isinstance(p, dict) and "text" in p]
    text = "".join(texts).strip()
    return text if text and not text.startswith("<session_context>") else None


@dataclass
class Resolution(FileResolution):
    process: GeminiProcess | None = None
    #: another Gemini CLI works in this folder and a newer session may be its: ask again on each change
    unsure: bool = False


def resolve_session(pane_pid: int, *, hook_transcript: str | None = None, last_prompt: str | None = None,
                    prompt_sent_at: float = 0.0, process: GeminiProcess | None = None,
                    screen: str | None = None, current: Path | None = None) -> Resolution:
    """Run the chain for the pane whose shell is ``pane_pid`` (see the module docstring); ``screen`` is
    the pane's, ``current`` the session followed until now (kept when the rules cannot tell)."""
    process = process or find_gemini(pane_pid)
    res = Resolution(process=process)
    if process is None:
        res.add("process", False, f"no gemini process under pid {pane_pid}")
        return res
    which = "relaunched child" if process.relaunched else "top"
    res.add("process", True, f"node pid {process.pid} ({which}), cwd {process.cwd}", process.pid)
    res.add("gemini home", True, f"{process.gemini_dir} ({process.home_from})", str(process.gemini_dir))
    if process.cwd is None:
        res.add("project", False, f"cannot read the cwd of pid {process.pid}")
        return res
    slug, slug_from = project_slug(process.gemini_dir, process.cwd)
    chats = process.gemini_dir / "tmp" / slug / "chats"
    res.add("project", True, f"slug {slug} ({slug_from}) -> {chats}", str(chats))
    files = session_files(chats, SESSION_NAME)
    if hook_transcript and Path(hook_transcript) in files:
        return res.decide("hook", Path(hook_transcript), "a hook of this pane named it")
    res.add("hook", True, "no: no hook from this pane named a session file of this project")
    wanted = process.session_id
    if wanted:
        named = [p for p in files if p.name.endswith(f"-{wanted[:8]}.jsonl") and session_head(p)[0] == wanted]
        if named:
            return res.decide("--session-id", named[-1], f"`--session-id {wanted}` in its argv")
    res.add("--session-id", True, "no: not in its argv" if not wanted else f"no: no file of session {wanted}")
    return _by_start(res, process, files, last_prompt, prompt_sent_at, screen, current)


def _by_start(res: Resolution, process: GeminiProcess, files: list[Path], last_prompt: str | None,
              prompt_sent_at: float, screen: str | None, current: Path | None) -> Resolution:
    """The newest session that started since the worker (a ``/clear`` makes a new one) and is not another
    Gemini CLI's of this folder. With another one working here, a newer session may be its ``/clear``:
    the one whose last prompt this pane shows, else the one holding the prompt typed here, else the one
    followed until now, else the first (the resolution is then unsure: asked again on each change)."""
    every = by_start(files, lambda p: session_head(p)[1])
    started = [(start, p) for start, p in every if start >= process.started_at - CLOCK_SLACK_S]
    if len(started) > 1 and (others := _other_workers(process)):
        claimed = others_first_sessions(process, others, every)
        started = [(start, p) for start, p in started if p not in claimed] or started
        res.unsure = len(started) > 1
    if len(started) > 1:
        cleared_since = not res.unsure and started[-1][0] >= prompt_sent_at - CLOCK_SLACK_S
        sent = None if cleared_since else prompt_sent_at
        picked = _among(res, [p for _, p in started], last_prompt, screen, sent)
        if picked is not None:
            return picked
    if started:
        kept = [sp for sp in started if sp[1] == current]
        start, chosen = (kept or started)[0] if res.unsure else started[-1]
        which = ("the one followed" if kept else "the first") if res.unsure else "the newest: /clear"
        more = f" ({which} of {len(started)})" if len(started) > 1 else ""
        delay = f"{start - process.started_at:+.1f}s"
        return res.decide("start time", chosen, f"{chosen.name} started {delay} after the process{more}")
    res.add("start time", True, f"no: no session of this project started after pid {process.pid}")
    written = written_since(files, process.started_at)
    if written:  # ``--resume``: an older session, written to since the process started
        return res.decide("written since start", written[-1], f"{written[-1].name} was written to since "
                          "the process started (a resumed session)")
    res.add("written since start", False, f"no session file of this project was written to since pid "
            f"{process.pid} started ({len(files)} older)")
    return res


def _among(res: Resolution, started: list[Path], last_prompt: str | None, screen: str | None,
           prompt_sent_at: float | None) -> Resolution | None:
    """Of several sessions: the newest whose last prompt the screen shows (when unsure); else the newest
    holding the prompt typed here at ``prompt_sent_at`` (None: a session started since, a /clear's)."""
    if res.unsure and screen:
        shown = [p for p in started if shows_last_prompt(p, screen)]
        if shown:
            return res.decide("screen", shown[-1], f"{shown[-1].name}: the pane shows its last prompt")
    if prompt_sent_at is not None and last_prompt and last_prompt.strip():
        holding = [p for p in started if mtime(p) >= prompt_sent_at - CLOCK_SLACK_S
                   and holds_prompt(p, last_prompt)]
        if holding:
            return res.decide("last prompt", holding[-1], f"{holding[-1].name} holds the prompt typed here")
    return None


def others_first_sessions(process: GeminiProcess, others: list[GeminiProcess],
                          every: list[tuple[float, Path]]) -> set[Path]:
    """The session each other Gemini CLI working in the same folder and home started with: another pane's,
    not this one's ``/clear``. Of ``every`` (start, file) in start order, each process in the order they
    started takes the first session since it started that no earlier one took (two panes started a moment
    apart: each session comes seconds after its process)."""
    taken: dict[Path, GeminiProcess] = {}
    for worker in sorted([process, *others], key=lambda w: w.started_at):
        first = next((p for start, p in every if start >= worker.started_at - CLOCK_SLACK_S
                      and p not in taken), None)
        if first is not None:
            taken[first] = worker
    return {p for p, worker in taken.items() if worker is not process}


def _other_workers(process: GeminiProcess) -> list[GeminiProcess]:
    """The Gemini CLI processes outside this pane's tree, in the same cwd and Gemini home. Reads every
    process's ``/proc`` entry: asked only when several sessions started since this worker did."""
    mine = {p.pid for p in proc.subtree(_top(process.proc))}
    out: dict[int, GeminiProcess] = {}  # by the worker's pid: a pane's parent and child find one worker
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in mine:
            continue
        p = proc.read_proc(int(name))
        if p is None or not is_gemini(p) or proc.cwd(p.pid) != process.cwd:
            continue
        other = find_gemini(p.pid)
        if other is not None and other.gemini_dir == process.gemini_dir:
            out[other.pid] = other
    return list(out.values())


def _top(worker: proc.Proc) -> int:
    """The outermost gemini process above ``worker`` (the relaunching parent): its tree is this pane's."""
    top = worker
    while (parent := proc.read_proc(top.ppid)) is not None and is_gemini(parent):
        top = parent
    return top.pid
