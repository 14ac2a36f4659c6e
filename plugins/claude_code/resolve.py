"""The resolution chain of Claude Code: pane → process → session file → transcript (docs/agents.md, Claude
Code, which says why each link holds).

Each step is recorded as a :class:`~pipeline.plugin.agents.ResolveStep`, so ``baton resolve`` shows where the
chain went, where it stopped and which fallback rule it took:

1. the first process under the pane (its own subtree only) whose comm or exe is ``claude``/``claude.exe``;
2. its config folder: ``CLAUDE_CONFIG_DIR`` (else ``$HOME/.claude``) from *its* environment, so a
   ``baton resolve`` typed in another shell finds the same files as the daemon;
3. ``sessions/<PID>.json``, trusted only if its ``pid`` and ``procStart`` match /proc (a reused PID or a file
   left behind by ``kill -9`` is stale) and its ``sessionId`` is a UUID (a session file must never make
   batonpass read outside the projects folder);
4. ``projects/<enc(cwd)>/<sessionId>.jsonl``, the folder named by the encoding rule (no scan); a scan
   of the project folders only when that folder does not exist;
5. fallbacks, each named in the result: after ``/clear`` (on versions that keep the old ``sessionId`` in
   the session file) the named transcript stops growing and a newer one appears in the same folder — the
   newest transcript there that starts with the ``/clear`` command, that no other live session claims and
   that was written after the named one is taken; with no usable session file, the newest transcript
   of the process's cwd written since the process started that no other live session claims.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.plugin.agents import ResolveStep
from pipeline.plugin.tools import proc
from plugins.claude_code.files import (
    UUID,
    SessionFile,
    config_dir,
    live_sessions,
    project_folder_name,
    read_session_file,
    session_files,
    session_matches,
    transcript_inside,
)

__all__ = ["PROCESS_NAMES", "Resolution", "resolve_pid", "resolve_process"]

PROCESS_NAMES = frozenset({"claude", "claude.exe"})
#: how the transcript that /clear starts begins (seen on 2.1.197, which also renames the session file's
#: sessionId; older versions are reported to keep the old one)
CLEAR_MARK = b"<command-name>/clear</command-name>"


@dataclass
class Resolution:
    """Where the chain got to. ``transcript`` is set when it reached one; ``rule`` says how."""

    steps: list[ResolveStep] = field(default_factory=list)
    process: proc.Proc | None = None
    config: Path | None = None
    session: SessionFile | None = None
    cwd: str | None = None
    project_dir: Path | None = None
    transcript: Path | None = None
    rule: str = ""

    @property
    def session_id(self) -> str | None:
        if self.transcript is not None and UUID.match(self.transcript.stem):
            return self.transcript.stem.lower()
        return self.session.session_id if self.session else None

    @property
    def started_at(self) -> float:
        """When the process started (the session file's ``startedAt``, else /proc), in epoch seconds."""
        if self.session is not None and self.session.started_at:
            return self.session.started_at / 1000
        return proc.started_at(self.process) if self.process else 0.0

    @property
    def stopped_at(self) -> str | None:
        return next((s.step for s in self.steps if not s.ok), None)

    def add(self, step: str, ok: bool, detail: str, value: object = None) -> None:
        self.steps.append(ResolveStep(step, ok, detail, value))


def resolve_pid(pane_pid: int, pane_id: str | None = None) -> Resolution:
    """Run the chain from a pane's PID (and its ``%N``, which a 2.1.332 session file names)."""
    found = proc.find_agent(pane_pid, PROCESS_NAMES)
    if found is None:
        res = Resolution()
        res.add("process", False, f"no process named claude or claude.exe under pid {pane_pid}")
        return res
    return resolve_process(found, pane_id)


def resolve_process(p: proc.Proc, pane_id: str | None = None) -> Resolution:
    """Run the chain from Claude Code's own process. With ``pane_id``, a session file whose ``tmux`` key
    names that pane is checked against, and stands in when the process's own session file is missing or
    stale (a wrapper process named claude whose child wrote it)."""
    res = Resolution(process=p)
    res.add("process", True, f"{p.comm} pid {p.pid} ({p.exe or 'exe unreadable'})", p.pid)
    env = proc.environ(p.pid) or None  # {}: unreadable (or empty): then this environment decides
    res.config = config_dir(env) if env is not None else config_dir()
    origin = ("CLAUDE_CONFIG_DIR of the process" if env and env.get("CLAUDE_CONFIG_DIR") else
              "HOME of the process" if env else "this environment (the process's is unreadable)")
    res.add("config", res.config.is_dir(), f"{res.config} (from {origin})", str(res.config))
    session_path = res.config / "sessions" / f"{p.pid}.json"
    try:
        session = read_session_file(session_path)
        why = session_matches(session, p)
        if why:
            res.add("session-file", False, f"{session_path} is stale: {why}", str(session_path))
        else:
            res.session = session
            state = session.status or "?"
            if session.waiting_for:
                state += f" ({session.waiting_for})"
            res.add("session-file", True, f"{session_path}: session {session.session_id}, status {state}",
                    {"path": str(session_path), "sessionId": session.session_id, "status": session.status})
    except FileNotFoundError:
        res.add(
            "session-file", False, f"{session_path} missing (written ~1.5 s after start; removed on /exit)"
        )
    except ValueError as exc:
        res.add("session-file", False, f"{session_path}: {exc}", str(session_path))
    if pane_id is not None:
        _pane_named(res, p, pane_id)
    res.cwd = (res.session.cwd if res.session else None) or proc.cwd(p.pid)
    if res.cwd is None:
        res.add("cwd", False, f"no cwd: /proc/{p.pid}/cwd unreadable")
        return res
    _find_transcript(res, proc.started_at(p))
    if res.config is not None:
        _refuse_outside(res, res.config)
    return res


def _pane_named(res: Resolution, p: proc.Proc, pane_id: str) -> None:
    """The session file's ``tmux`` key (2.1.332): confirms the session belongs to this pane, or finds the
    live session that names this pane when the process's own file did not serve."""
    assert res.config is not None
    if res.session is not None:
        if res.session.pane_id == pane_id:
            res.add("tmux", True, f"the session file names this pane ({res.session.tmux})", res.session.tmux)
        elif res.session.pane_id is not None:  # another tmux server's pane of the same number, say
            res.add(
                "tmux",
                True,
                f"the session file names pane {res.session.pane_id} ({res.session.tmux}), not "
                f"{pane_id}: another tmux server's? The process tree decided",
                res.session.tmux,
            )
        return
    cwd = proc.cwd(p.pid)
    for name, other in live_sessions(res.config):
        if not re.fullmatch(r"\d+\.json", name) or other.pane_id != pane_id:
            continue
        if cwd is not None and other.cwd is not None and os.path.realpath(other.cwd) != os.path.realpath(cwd):
            continue
        res.session = other
        res.add("tmux", True, f"{other.path} names this pane ({other.tmux}); its pid {other.pid} is live: "
                f"session {other.session_id}, status {other.status or '?'}", str(other.path))
        return


def _refuse_outside(res: Resolution, config: Path) -> None:
    """Drop a chosen transcript that a symlink (of the file or its folder) leads out of the projects
    folder, saying why."""
    if res.transcript is not None and transcript_inside(res.transcript, config) is None:
        real = os.path.realpath(res.transcript)
        res.add(
            "transcript",
            False,
            f"{res.transcript} leads to {real}, outside {config / 'projects'}: refused "
            "(a transcript is only read from Claude Code's own projects folder)",
            str(res.transcript),
        )
        res.transcript, res.rule = None, ""


def _find_transcript(res: Resolution, started: float) -> None:
    assert res.config is not None and res.cwd is not None
    projects = res.config / "projects"
    names = dict.fromkeys([project_folder_name(res.cwd), project_folder_name(os.path.realpath(res.cwd))])
    folder = next((projects / n for n in names if (projects / n).is_dir()), None)
    sid = res.session.session_id if res.session else None
    if folder is None and sid is not None:
        # the encoding did not find it (another version's rule?): look for the session's file anywhere
        hits = sorted(projects.glob(f"*/{sid}.jsonl")) if projects.is_dir() else []
        if hits:
            folder = hits[0].parent
            res.add("project-dir", True, f"{folder} (found by a scan of {projects}: the encoded name "
                    f"{next(iter(names))} does not exist)", str(folder))
    elif folder is not None:
        res.add("project-dir", True, f"{folder} (the encoded cwd {res.cwd})", str(folder))
    if folder is None:
        res.add(
            "project-dir",
            False,
            f"{projects / next(iter(names))} does not exist yet (created on the first prompt)",
            str(projects / next(iter(names))),
        )
        return
    res.project_dir = folder
    claimed = _claimed_elsewhere(res)
    if sid is not None:
        named = folder / f"{sid}.jsonl"
        newer = _newest_unclaimed(folder, lambda other: other == sid or claimed(other),
                                  after=max(started, _mtime(named)), head=CLEAR_MARK)
        if newer is not None:
            res.transcript, res.rule = newer, "newer-transcript"
            res.add(
                "transcript",
                True,
                f"{newer} (fallback: {named.name} "
                f"{'stopped growing' if named.exists() else 'does not exist'}; this newer transcript of the "
                "same folder starts with /clear and belongs to no other live session)",
                str(newer),
            )
        elif named.exists():
            res.transcript, res.rule = named, "session-file"
            res.add("transcript", True, f"{named}", str(named))
        else:
            res.add(
                "transcript",
                False,
                f"{named} not created yet (Claude Code creates it on the first prompt)",
                str(named),
            )
        return
    newest = _newest_unclaimed(folder, claimed, after=started)
    if newest is not None:
        res.transcript, res.rule = newest, "newest-in-folder"
        res.add("transcript", True, f"{newest} (fallback: no usable session file; the newest transcript of "
                "the cwd's folder written since the process started, claimed by no other live session)",
                str(newest))
    else:
        res.add("transcript", False, f"no transcript in {folder} written since the process started "
                "(and no usable session file to name one)")


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _claimed_elsewhere(res: Resolution) -> Callable[[str], bool]:
    """Whether another live Claude Code process of this config folder has a given session id. Asked only
    of the transcripts that could be chosen: the session files are listed once (parsed again only when
    they changed) and /proc is read only for the ones naming such a transcript, not for every session of
    the folder (50 tiles: 100 process reads on the event loop each time a transcript appears)."""
    assert res.config is not None and res.process is not None
    config, own = res.config, f"{res.process.pid}.json"
    by_id: dict[str, list[SessionFile]] | None = None

    def claimed(session_id: str) -> bool:
        nonlocal by_id
        if by_id is None:
            by_id = {}
            for name, other in session_files(config):
                if name != own:
                    by_id.setdefault(other.session_id, []).append(other)
        for other in by_id.get(session_id, ()):
            live = proc.read_proc(other.pid)
            if live is not None and session_matches(other, live) is None:
                return True
        return False

    return claimed


def _newest_unclaimed(
    folder: Path, claimed: Callable[[str], bool], *, after: float, head: bytes | None = None
) -> Path | None:
    """The most recently written ``<UUID>.jsonl`` of ``folder`` written after ``after``, that no other live
    session claims and (with ``head``) whose first lines contain ``head``."""
    candidates: list[tuple[float, Path]] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return None
    for entry in entries:
        stem = entry.name.removesuffix(".jsonl")
        if stem == entry.name or not UUID.match(stem):
            continue
        try:
            mtime = entry.stat().st_mtime
        except OSError:
            continue
        if mtime > after and not claimed(stem.lower()):
            candidates.append((mtime, Path(entry.path)))
    for _, path in sorted(candidates, reverse=True):
        if head is None or _head_has(path, head):
            return path
    return None


def _head_has(path: Path, marker: bytes, size: int = 64 * 1024) -> bool:
    try:
        with open(path, "rb") as f:
            return marker in f.read(size)
    except OSError:
        return False
