"""The resolution chain of Claude Code: pane → process → session file → transcript (SPEC §5).

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

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.plugin.agents import ResolveStep
from pipeline.system import proc

__all__ = [
    "PROCESS_NAMES",
    "Resolution",
    "SessionFile",
    "config_dir",
    "project_folder_name",
    "read_session_file",
    "resolve_pid",
    "resolve_process",
    "session_owner",
    "transcript_inside",
]

PROCESS_NAMES = frozenset({"claude", "claude.exe"})
UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
MAX_SESSION_FILE = 64 * 1024
#: how the transcript that /clear starts begins (seen on 2.1.197, which also renames the session file's
#: sessionId; older versions are reported to keep the old one)
CLEAR_MARK = b"<command-name>/clear</command-name>"
#: Claude Code's limit on a project folder name before it switches to the hash form
MAX_FOLDER_NAME = 200


def project_folder_name(cwd: str) -> str:
    """Claude Code's folder name for ``cwd``: every UTF-16 unit outside ``[a-zA-Z0-9]`` becomes ``-``;
    over 200 units, the first 200 + ``-`` + base36 of the absolute Java-style 32-bit hash of ``cwd``.
    (Seen in 2.1.197's own code: JavaScript strings are UTF-16, so a character outside the BMP counts
    twice.)"""
    units = cwd.encode("utf-16-le")
    codes = [int.from_bytes(units[i:i + 2], "little") for i in range(0, len(units), 2)]
    name = "".join(chr(c) if c < 128 and chr(c).isalnum() else "-" for c in codes)
    if len(name) <= MAX_FOLDER_NAME:
        return name
    h = 0
    for c in codes:
        h = (h * 31 + c) & 0xFFFFFFFF
    h = abs(h - (1 << 32) if h >= 1 << 31 else h)
    digits = ""
    while True:
        h, r = divmod(h, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[r] + digits
        if h == 0:
            break
    return f"{name[:MAX_FOLDER_NAME]}-{digits}"


def config_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$CLAUDE_CONFIG_DIR``, else ``$HOME/.claude``, from ``env`` (default: this process's)."""
    environ: Mapping[str, str] = os.environ if env is None else env
    if environ.get("CLAUDE_CONFIG_DIR"):
        return Path(environ["CLAUDE_CONFIG_DIR"]).expanduser()
    return Path(environ.get("HOME") or os.path.expanduser("~")) / ".claude"


def process_env(pid: int) -> dict[str, str] | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in pairs}


@dataclass(frozen=True)
class SessionFile:
    """``sessions/<PID>.json`` as Claude Code writes it."""

    path: Path
    pid: int
    session_id: str
    cwd: str | None
    proc_start: str | None
    status: str | None
    waiting_for: str | None
    status_updated_at: int | None
    started_at: int | None
    version: str | None
    #: 2.1.332: ``"<session>:@<window>.%<pane>"``, written when the CLI's environment has ``$TMUX``
    tmux: str | None = None

    @property
    def pane_id(self) -> str | None:
        """The ``%N`` the ``tmux`` key names, if any."""
        tail = self.tmux.rsplit(".", 1)[-1] if self.tmux else ""
        return tail if re.fullmatch(r"%\d+", tail) else None


def read_session_file(path: Path) -> SessionFile:
    """Parse a session file. Raises ValueError (with the reason) for anything that is not one, and
    for a ``sessionId`` that is not a UUID."""
    try:
        raw = path.read_bytes()[:MAX_SESSION_FILE]
        data = json.loads(raw)
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: JSON nested past Python's stack
        raise ValueError(f"unreadable: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    session_id = data.get("sessionId")
    if not isinstance(session_id, str) or not UUID.match(session_id):
        raise ValueError(f"refused: sessionId {str(session_id)[:60]!r} is not a UUID")
    try:
        pid = int(data.get("pid"))  # type: ignore[arg-type]  # None or junk: the except below
    except (TypeError, ValueError, OverflowError):
        raise ValueError("no pid") from None

    def opt_int(key: str) -> int | None:
        value = data.get(key)
        return int(value) if isinstance(value, int) or (isinstance(value, float) and value == value
                                                          and abs(value) != float("inf")) else None

    return SessionFile(
        path=path,
        pid=pid,
        session_id=session_id.lower(),
        cwd=data.get("cwd") or None,
        proc_start=str(data["procStart"]) if data.get("procStart") is not None else None,
        status=data.get("status"),
        waiting_for=data.get("waitingFor"),
        status_updated_at=opt_int("statusUpdatedAt"),
        started_at=opt_int("startedAt"),
        version=data.get("version"),
        tmux=data["tmux"] if isinstance(data.get("tmux"), str) else None,
    )


#: session files parsed, by path: (mtime_ns, size, inode) and the result, so that looking at every session of
#: a config folder (another process's claim) costs a stat per file, not a read and a JSON parse
_parsed: dict[Path, tuple[tuple[int, int, int], SessionFile]] = {}


def _read_cached(path: Path) -> SessionFile:
    """:func:`read_session_file`, parsed again only when the file changed (same errors)."""
    try:
        st = path.stat()
    except OSError:
        _parsed.pop(path, None)
        raise
    key = (st.st_mtime_ns, st.st_size, st.st_ino)
    hit = _parsed.get(path)
    if hit is not None and hit[0] == key:
        return hit[1]
    session = read_session_file(path)
    if len(_parsed) > 4096:
        _parsed.clear()
    _parsed[path] = (key, session)
    return session


def session_matches(session: SessionFile, p: proc.Proc) -> str | None:
    """Why ``session`` does not belong to the live process ``p``, or None if it does."""
    if session.pid != p.pid:
        return f"its pid {session.pid} is not {p.pid}"
    if session.proc_start is not None and session.proc_start != str(p.start_ticks):
        return f"procStart {session.proc_start} != {p.start_ticks} in /proc/{p.pid}/stat (a reused PID)"
    return None


def transcript_inside(path: str | os.PathLike[str], config: Path) -> Path | None:
    """``path`` if it is a ``<UUID>.jsonl`` directly inside a project folder of ``config`` — also once
    symlinks are followed — else None: batonpass only reads Claude Code's own transcripts, whatever a hook
    payload or a link in the projects folder points at."""
    p = Path(os.path.abspath(path))
    projects = Path(os.path.abspath(config / "projects"))
    if p.suffix != ".jsonl" or not UUID.match(p.stem) or p.parent.parent != projects:
        return None
    if not os.path.realpath(p).startswith(os.path.realpath(projects) + os.sep):
        return None
    return p


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
    env = process_env(p.pid)
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
    try:
        names = sorted(os.listdir(res.config / "sessions"))
    except OSError:
        return
    cwd = proc.cwd(p.pid)
    for name in names:
        if not re.fullmatch(r"\d+\.json", name):
            continue
        try:
            other = _read_cached(res.config / "sessions" / name)
        except (OSError, ValueError):
            continue
        live = proc.read_proc(other.pid)
        if other.pane_id != pane_id or live is None or session_matches(other, live) is not None:
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
        newer = _newest_unclaimed(folder, claimed | {sid}, after=max(started, _mtime(named)), head=CLEAR_MARK)
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


def _claimed_elsewhere(res: Resolution) -> set[str]:
    """Session ids of the other live Claude Code processes of this config folder."""
    assert res.config is not None and res.process is not None
    claimed: set[str] = set()
    try:
        entries = os.listdir(res.config / "sessions")
    except OSError:
        return claimed
    for name in entries:
        if not name.endswith(".json") or name == f"{res.process.pid}.json":
            continue
        try:
            other = _read_cached(res.config / "sessions" / name)
        except (OSError, ValueError):
            continue
        live = proc.read_proc(other.pid)
        if live is not None and session_matches(other, live) is None:
            claimed.add(other.session_id)
    return claimed


def session_owner(config: Path, session_id: str) -> proc.Proc | None:
    """The live Claude Code process whose session file (in ``config``) names ``session_id``, or None."""
    try:
        entries = os.listdir(config / "sessions")
    except OSError:
        return None
    for name in entries:
        if not name.endswith(".json"):
            continue
        try:
            session = _read_cached(config / "sessions" / name)
        except (OSError, ValueError):
            continue
        if session.session_id != session_id.lower():
            continue
        live = proc.read_proc(session.pid)
        if live is not None and session_matches(session, live) is None:
            return live
    return None


def _newest_unclaimed(
    folder: Path, claimed: set[str], *, after: float, head: bytes | None = None
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
        if stem == entry.name or not UUID.match(stem) or stem.lower() in claimed:
            continue
        try:
            mtime = entry.stat().st_mtime
        except OSError:
            continue
        if mtime > after:
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
