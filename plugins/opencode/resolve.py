"""Which OpenCode session a pane is showing: nothing in the store names a PID or a pane, so it is inferred.

The facts to go on (docs/agents.md, OpenCode): the pane's ``opencode`` process has a cwd and a start time;
each session has a ``directory`` (the cwd it was started in) and a creation time; OpenCode creates a session
at the first prompt, so a session the process made was created after the process started. The rules, in order
— the first that decides wins, and its name is shown by ``baton resolve``:

``prompt``  the session's newest user message is the prompt batonpass last typed into this pane;
``screen``  the session's newest user message is on this pane's screen (and not claimed by a peer's prompt);
``start``   the only sessions it could be: created in the folder since this process started (or named by
            ``-s``/``--session``, or ``--continue``d), and too old to be another pane's;
``kept``    still the session matched before, when the evidence is now ambiguous.

Among several sessions a rule allows, the one updated most recently wins (a pane's newest turn is in it).

"Another pane" is a *peer*: another tile of the same daemon whose OpenCode runs in the same folder on the same
store. A session created before a peer started cannot be the peer's; a session a peer matched by its own
prompt is the peer's.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pipeline.plugin.tools import proc
from plugins.opencode.reader import store_path
from plugins.opencode.turns import SessionRow

__all__ = ["Claim", "Match", "OpenCodeProcess", "PEERS", "choose_session", "read_process", "same_prompt"]

#: ms of tolerance between a process's start and a session's creation (start times come in 10 ms clock
#: ticks; OpenCode creates a session at the first prompt, a person's action well after the start)
SLACK_MS = 250
STRONG_RULES = frozenset({"prompt"})


@dataclass(frozen=True, slots=True)
class OpenCodeProcess:
    """The facts /proc gives about one OpenCode process."""

    pid: int
    start_ticks: int
    started_ms: int
    cwd: str | None
    store: Path | None
    argv: tuple[str, ...]
    #: ``$PWD`` of the process when it names the same folder as its cwd by another path (a symlink)
    pwd: str | None = None

    @property
    def directories(self) -> tuple[str, ...]:
        """The spellings of its working folder a session's ``directory`` may hold."""
        return tuple(d for d in (self.cwd, self.pwd) if d)

    @property
    def since_ms(self) -> int:
        """Sessions it uses were updated after it started — unless it was told to resume an older one."""
        return 0 if self.argv_session or self.continues else self.started_ms - SLACK_MS

    @property
    def argv_session(self) -> str | None:
        """The session named with ``-s ID`` / ``--session ID`` / ``--session=ID``."""
        args = list(self.argv[1:])
        for i, arg in enumerate(args):
            if arg in ("-s", "--session") and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith("--session="):
                return arg.split("=", 1)[1]
        return None

    @property
    def continues(self) -> bool:
        return any(a in ("-c", "--continue") for a in self.argv[1:])


def read_process(p: proc.Proc) -> OpenCodeProcess:
    """Cwd, start time, argv and store of ``p``. The store comes from the *process's* environment
    (``OPENCODE_DB``, ``XDG_DATA_HOME``, ``HOME``), which may differ from the daemon's."""
    env = proc.environ(p.pid) or dict(os.environ)  # unreadable: this environment's is the best guess
    argv = tuple(a for a in proc.cmdline(p.pid) if a)
    cwd = proc.cwd(p.pid)
    pwd = env.get("PWD")
    if not (pwd and cwd and pwd != cwd and os.path.realpath(pwd) == cwd):
        pwd = None
    return OpenCodeProcess(
        pid=p.pid,
        start_ticks=p.start_ticks,
        started_ms=int(proc.started_at(p) * 1000),
        cwd=cwd,
        store=store_path(env),
        argv=argv,
        pwd=pwd,
    )


@dataclass(slots=True)
class Claim:
    """What one tile's adapter knows about its OpenCode, shared with its peers."""

    started_ms: int
    cwd: str
    session_id: str | None = None
    rule: str = ""


#: store path → tile name → claim; filled by the adapters of one daemon (one process)
PEERS: dict[str, dict[str, Claim]] = {}


@dataclass(frozen=True, slots=True)
class Match:
    session: SessionRow | None
    rule: str
    detail: str


def _norm(text: str) -> str:
    return " ".join(text.split())


def same_prompt(stored: str, typed: str) -> bool:
    """Whether a stored user message is the prompt batonpass typed (whitespace aside; OpenCode may append)."""
    a, b = _norm(stored), _norm(typed)
    return bool(b) and (a == b or (len(b) >= 16 and b[:200] in a))


def _on_screen(session: SessionRow, screen: str) -> bool:
    flat = _norm(screen)
    for prompt in session.recent_prompts[:1]:
        first = next((ln.strip() for ln in prompt.splitlines() if ln.strip()), "")
        probe = _norm(first)[:32]
        if len(probe) >= 4 and probe in flat:
            return True
    return False


def choose_session(sessions: list[SessionRow], *, me: OpenCodeProcess, peers: Sequence[Claim] = (),
                   last_prompt: str | None = None, screen: str = "", previous: str | None = None) -> Match:
    """Pick this pane's session among ``sessions`` (all in its folder, newest-updated first); see the
    module."""
    where = me.cwd or "?"
    if not sessions:
        return Match(None, "none", f"no session in {where} yet (OpenCode creates one at the first prompt)")
    eligible = _eligible(sessions, me)
    if last_prompt:
        typed = [s for s in eligible if s.recent_prompts and same_prompt(s.recent_prompts[0], last_prompt)]
        if typed:
            return Match(_latest(typed), "prompt", "holds the prompt batonpass last typed into this pane")
    taken = {c.session_id for c in peers if c.rule in STRONG_RULES and c.session_id}
    eligible = [s for s in eligible if s.id not in taken]
    if not eligible:
        newest = max(sessions, key=lambda s: s.updated_ms)
        why = (
            "another pane's prompt is in it"
            if taken
            else f"created before this process started ({newest.id})"
        )
        return Match(None, "none", f"no session in {where} is this pane's yet: {why}")
    seen = [s for s in eligible if _on_screen(s, screen)]
    if seen:
        return Match(_latest(seen), "screen", "its newest prompt is on this pane's screen")
    return _by_start(eligible, peers, where, previous)


def _eligible(sessions: list[SessionRow], me: OpenCodeProcess) -> list[SessionRow]:
    """The sessions this process may be writing: created since it started, the one its argv names, and
    with ``--continue`` the latest one before it."""
    eligible = [s for s in sessions if s.created_ms >= me.started_ms - SLACK_MS or s.id == me.argv_session]
    if me.continues and me.argv_session is None:
        before = [s for s in sessions if s.created_ms < me.started_ms - SLACK_MS]
        if before:
            eligible.append(max(before, key=lambda s: s.updated_ms))
    return eligible


def _latest(group: list[SessionRow]) -> SessionRow:
    return max(group, key=lambda s: (s.updated_ms, s.created_ms))


def _by_start(eligible: list[SessionRow], peers: Sequence[Claim], where: str, previous: str | None) -> Match:
    """With neither prompt nor screen to tell: a session no other OpenCode of the folder could have
    created, else the one matched before, else none yet."""
    contested = {s.id for s in eligible for c in peers if c.started_ms - SLACK_MS <= s.created_ms}
    clear = [s for s in eligible if s.id not in contested]
    if clear:
        return Match(_latest(clear), "start", f"created in {where} since this OpenCode started"
                     + (" and before any other OpenCode there" if peers else ""))
    if previous is not None and any(s.id == previous for s in eligible):
        return Match(next(s for s in eligible if s.id == previous), "kept",
                     "the session matched before; another OpenCode in the folder could own the newer ones")
    return Match(
        None,
        "none",
        f"{len(eligible)} session(s) in {where} could be this pane's or another OpenCode's "
        "there; waiting for a prompt to tell them apart",
    )
