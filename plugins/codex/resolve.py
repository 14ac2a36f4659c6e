"""Which rollout belongs to a pane: the Codex resolution chain (docs/agents.md, Codex).

The pane's process tree holds ``node → codex`` (the TUI). By default the TUI runs its turns in a shared
daemon outside the pane, and only the daemon holds rollouts open, so the chain is:

1. **open fd** — the pane's own ``codex`` (``--no-daemon``, ``codex exec``) holds its rollout open;
2. **resume argument** — ``codex resume <thread id>`` names the thread;
3. **last prompt** — the rollout of this cwd that received the prompt batonpass last typed into this
   pane (since it typed it): decisive when two panes of one cwd started together, or when the TUI
   started a new thread;
4. **start time + cwd** — the thread whose start (its UUIDv7 id, in UTC) comes first after the TUI's
   process start, in the TUI's cwd. Threads are known (:mod:`plugins.codex.threads`) from
   ``state_5.sqlite`` (may be absent or locked), the rollout files, and the per-thread lock files Codex
   makes at startup — those name a thread before its rollout exists, so a pane with no prompt yet is not
   matched to a neighbour's file.

No rollout yet is not an error: it appears at the first prompt. Every step is recorded for
``baton resolve``. Everything here is blocking file and /proc work: callers run it in a worker thread.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import orjson

from pipeline.plugin.agents import ResolveStep
from pipeline.plugin.tools import proc
from plugins.codex.reader import ROLLOUT_NAME, message_text, parse_timestamp, thread_id_of, uuid7_time
from plugins.codex.threads import UUID, ThreadInfo, known_threads, rollout_of

__all__ = [
    "CodexProcess",
    "Resolution",
    "default_codex_home",
    "find_codex_process",
    "resolve_rollout",
]

#: the thread of a TUI starts this long after its process at most (the first start in a fresh
#: CODEX_HOME copies a 315 MB binary first)
MAX_STARTUP_S = 20.0
#: a thread is created after its TUI's process started; this much earlier still counts (clock granularity)
CLOCK_SLACK_S = 0.5
#: two threads starting closer together than this cannot be told apart by start time alone
AMBIGUOUS_S = 3.0
#: ``baton resolve`` prints step names in a narrow column
STEP_NAMES = {"open fd": "open fd", "resume argument": "resume", "last prompt": "last prompt",
              "start time + cwd": "start time"}


def default_codex_home() -> Path:
    home = os.environ.get("CODEX_HOME")
    return Path(home) if home else Path(os.path.expanduser("~")) / ".codex"


@dataclass(frozen=True)
class CodexProcess:
    """The Codex process of a pane (the TUI, or ``codex exec``)."""

    proc: proc.Proc
    argv: tuple[str, ...]
    cwd: str | None
    codex_home: Path
    home_from: str
    started_at: float

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def key(self) -> tuple[int, int]:
        return self.proc.key

    def alive(self) -> bool:
        return self.proc.running()


def _is_daemon(argv: list[str]) -> bool:
    return "app-server" in argv[1:3]


def find_codex_process(pane_pid: int) -> CodexProcess | None:
    """The pane's own ``codex`` (never the shared app-server daemon, which the first pane starts as its
    child and which serves every pane of the same CODEX_HOME)."""
    for p in proc.subtree(pane_pid):
        if "codex" not in (p.comm, p.exe_name):
            continue
        argv = proc.cmdline(p.pid)
        if _is_daemon(argv):
            continue
        env = proc.environ(p.pid)
        if env.get("CODEX_HOME"):
            home, home_from = Path(env["CODEX_HOME"]), "$CODEX_HOME of the process"
        elif env.get("HOME"):
            home, home_from = Path(env["HOME"]) / ".codex", "$HOME/.codex of the process"
        else:
            home, home_from = (
                default_codex_home(),
                "batonpass's own $CODEX_HOME (the process environment is unreadable)",
            )
        cwd = proc.cwd(p.pid)
        for flag in ("-C", "--cd"):  # codex -C DIR runs the session in DIR
            if flag in argv[1:-1]:
                cwd = os.path.join(cwd or "/", argv[argv.index(flag) + 1])
        return CodexProcess(proc=p, argv=tuple(argv), cwd=os.path.realpath(cwd) if cwd else None,
                            codex_home=home, home_from=home_from, started_at=proc.started_at(p))
    return None


def _norm(text: str) -> str:
    return " ".join(text.split())


def user_prompts(path: Path) -> list[tuple[float, str]]:
    """The prompts typed into a rollout's thread, with when each was written (UserMessage items, the
    older user_message events, or the legacy format's bare user messages, which carry no time)."""
    prompts = []
    try:
        with open(path, "rb") as f:
            for line in f:
                if b'"UserMessage"' not in line and b'"user_message"' not in line and b'"user"' not in line:
                    continue
                try:
                    record = orjson.loads(line)
                    payload = record.get("payload") or {}
                    at = parse_timestamp(record.get("timestamp")) or 0.0
                except (orjson.JSONDecodeError, AttributeError):
                    continue
                if payload.get("type") == "user_message" and isinstance(payload.get("message"), str):
                    prompts.append((at, payload["message"]))
                item = payload.get("item")
                if isinstance(item, dict) and item.get("type") == "UserMessage":
                    prompts.append((at, message_text(item.get("content")) or ""))
                if (
                    "payload" not in record
                    and record.get("type") == "message"
                    and record.get("role") == "user"
                ):
                    # no time of its own: no later than the file's last write
                    prompts.append(
                        (at or os.fstat(f.fileno()).st_mtime, message_text(record.get("content")) or "")
                    )
    except OSError:
        pass
    return prompts


@dataclass
class Resolution:
    process: CodexProcess | None
    rollout: Path | None = None
    rule: str = ""
    steps: list[ResolveStep] = field(default_factory=list)

    @property
    def thread_id(self) -> str | None:
        return thread_id_of(self.rollout) if self.rollout else None


def resolve_rollout(pane_pid: int, last_prompt: str | None = None, prompt_sent_at: float = 0.0, *,
                    process: CodexProcess | None = None) -> Resolution:
    """Run the chain for the pane whose process is ``pane_pid``; see the module docstring.

    ``last_prompt`` / ``prompt_sent_at``: what batonpass last typed into this pane, and when. A rollout
    that received that prompt since then is this pane's, whatever the start times say (two panes that
    started together; a new thread started inside the TUI)."""
    process = process or find_codex_process(pane_pid)
    res = Resolution(process)
    if process is None:
        res.steps.append(ResolveStep("process", False, f"no codex process under pid {pane_pid}"))
        return res
    _note_process(res, process)
    if _by_open_fd(res, process) or _by_resume_argument(res, process):
        return res
    mine, window, ambiguous = _candidates(res, process)
    if last_prompt and last_prompt.strip() and _by_last_prompt(
            res, mine, window, ambiguous, last_prompt, prompt_sent_at):
        return res
    if window and _by_start_time(res, process, window, ambiguous):
        return res
    res.steps.append(
        ResolveStep("rollout", True, "none yet: idle, no turn (a rollout appears at the first prompt)")
    )
    return res


def _note_process(res: Resolution, process: CodexProcess) -> None:
    """The chain's first steps: the pane's codex process and its home."""
    started = datetime.fromtimestamp(process.started_at).strftime("%Y-%m-%d %H:%M:%S")
    res.steps.append(
        ResolveStep(
            "process",
            True,
            f"codex pid {process.pid} ({' '.join(process.argv[1:3]) or 'TUI'}), "
            f"started {started}, cwd {process.cwd}",
            process.pid,
        )
    )
    res.steps.append(
        ResolveStep(
            "codex home", True, f"{process.codex_home} ({process.home_from})", str(process.codex_home)
        )
    )


def _decide(res: Resolution, rule: str, path: Path, detail: str) -> bool:
    """``path`` is the pane's rollout, by ``rule``: the chain ends here."""
    res.rollout, res.rule = path, rule
    res.steps.append(ResolveStep(STEP_NAMES[rule], True, f"decided: {detail}", str(path)))
    res.steps.append(ResolveStep("rollout", True, f"{path} (rule: {rule})", str(path)))
    return True


def _by_open_fd(res: Resolution, process: CodexProcess) -> bool:
    """A rollout the pane's codex (or a child of it) holds open is its own."""
    held = _held_rollouts(process)
    if held:
        return _decide(res, "open fd", held[-1], f"pid {process.pid} holds {held[-1].name} open")
    daemon = "--no-daemon" not in process.argv and "exec" not in process.argv[1:2]
    res.steps.append(ResolveStep("open fd", True, f"no: pid {process.pid} holds no rollout open"
                                 + (" (daemon mode: the shared daemon holds it)" if daemon else "")))
    return False


def _by_resume_argument(res: Resolution, process: CodexProcess) -> bool:
    """``codex resume <thread id>`` names its thread."""
    thread = next((a for a in process.argv[process.argv.index("resume") + 1:] if UUID.match(a)), None) \
        if "resume" in process.argv[1:] else None
    if thread:
        path = rollout_of(process.codex_home, thread)
        if path is not None:
            return _decide(res, "resume argument", path, f"`codex resume {thread}`")
    res.steps.append(ResolveStep("resume", True, "no: not started as `codex resume <thread id>`"
                                 if not thread else f"no: thread {thread} has no rollout"))
    return False


def _candidates(res: Resolution, process: CodexProcess) -> tuple[list[ThreadInfo], list[ThreadInfo], bool]:
    """The threads of the process's cwd (not ``codex exec``'s) since it started; those among them that
    started within :data:`MAX_STARTUP_S` of it; and whether the first two of those are too close to
    tell apart."""
    threads, note = known_threads(process.codex_home, process.started_at - CLOCK_SLACK_S)
    mine = [
        t
        for t in threads
        if (t.cwd is None or process.cwd is None or os.path.realpath(t.cwd) == process.cwd)
        and t.originator != "codex_exec"
    ]
    window = [t for t in mine if (t.started_at or 0) <= process.started_at + MAX_STARTUP_S]
    res.steps.append(ResolveStep("threads", True, f"{note}; {len(window)} in cwd {process.cwd} within "
                                 f"{MAX_STARTUP_S:.0f}s of the start"))
    ambiguous = len(window) > 1 and (window[1].started_at or 0) - (window[0].started_at or 0) < AMBIGUOUS_S
    return mine, window, ambiguous


def _by_last_prompt(res: Resolution, mine: list[ThreadInfo], window: list[ThreadInfo], ambiguous: bool,
                    last_prompt: str, prompt_sent_at: float) -> bool:
    """The rollout that received the prompt batonpass last typed here, since it was typed (of a thread
    no older than the start-time candidate, when there is one)."""
    wanted, since = _norm(last_prompt), prompt_sent_at - CLOCK_SLACK_S if prompt_sent_at else 0.0
    floor = window[0].started_at or 0.0 if window and not ambiguous else 0.0
    for info in mine:
        if info.rollout is None or (info.started_at or 0.0) < floor:
            continue
        if any(at >= since and _norm(text) == wanted for at, text in user_prompts(info.rollout)):
            return _decide(
                res,
                "last prompt",
                info.rollout,
                f"{info.rollout.name} holds the prompt batonpass last typed here",
            )
    res.steps.append(ResolveStep("last prompt", True, "no: no rollout of this cwd holds the last prompt"))
    return False


def _by_start_time(res: Resolution, process: CodexProcess, window: list[ThreadInfo], ambiguous: bool) -> bool:
    """The one thread that started soon after the process, in its cwd; or why there is none yet."""
    first = window[0]
    delay = (first.started_at or 0) - process.started_at
    if first.rollout is None:
        res.rule = "none yet"
        res.steps.append(
            ResolveStep(
                "start time",
                True,
                f"thread {first.thread_id} started {delay:+.1f}s after "
                "the process and has no rollout yet",
            )
        )
        return False
    if not ambiguous:
        return _decide(
            res,
            "start time + cwd",
            first.rollout,
            f"thread {first.thread_id} started {delay:+.1f}s after the process, in its cwd",
        )
    res.rule = "ambiguous"
    res.steps.append(
        ResolveStep(
            "start time",
            True,
            f"no: {len(window)} threads started within "
            f"{AMBIGUOUS_S:.0f}s of each other; type a prompt through batonpass to tell them apart",
        )
    )
    return False


def _held_rollouts(process: CodexProcess) -> list[Path]:
    """Rollouts held open by the pane's codex or its children (never by the shared daemon)."""
    held: list[str] = []
    queue, seen = [process.pid], set()
    while queue:
        pid = queue.pop(0)
        if pid in seen or (pid != process.pid and _is_daemon(proc.cmdline(pid))):
            continue  # the daemon and whatever it started (which may inherit its files) serve every pane
        seen.add(pid)
        held += [t for t in proc.open_files(pid) if ROLLOUT_NAME.match(os.path.basename(t)) and t not in held]
        queue += proc.children(pid)
    return sorted((Path(t) for t in held), key=lambda p: uuid7_time(thread_id_of(p) or "") or 0.0)
