"""Claude Code's own files: where it keeps them (its config folder, a project folder's name), its session
file (``sessions/<PID>.json``) read safely, and which transcript paths batonpass may read at all. The chain
that picks one pane's files is :mod:`plugins.claude_code.resolve`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from pipeline.plugin.tools import proc

__all__ = [
    "UUID",
    "SessionFile",
    "config_dir",
    "live_sessions",
    "project_folder_name",
    "read_session_file",
    "session_files",
    "session_matches",
    "session_owner",
    "transcript_inside",
]

UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
MAX_SESSION_FILE = 64 * 1024
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


def session_files(config: Path) -> Iterator[tuple[str, SessionFile]]:
    """The readable session files of ``config`` (``sessions/*.json``) with their file names, in name order;
    parsed again only when a file changed."""
    try:
        names = sorted(os.listdir(config / "sessions"))
    except OSError:
        return
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            yield name, _read_cached(config / "sessions" / name)
        except (OSError, ValueError):
            continue


def live_sessions(config: Path) -> Iterator[tuple[str, SessionFile]]:
    """The session files of ``config`` (with their file names, in name order) whose process is alive and
    is the one that wrote them: the live Claude Code sessions of that config folder."""
    for name, session in session_files(config):
        live = proc.read_proc(session.pid)
        if live is not None and session_matches(session, live) is None:
            yield name, session


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


def session_owner(config: Path, session_id: str) -> proc.Proc | None:
    """The live Claude Code process whose session file (in ``config``) names ``session_id``, or None."""
    wanted = session_id.lower()
    for _, session in session_files(config):
        if session.session_id != wanted:
            continue
        live = proc.read_proc(session.pid)
        if live is not None and session_matches(session, live) is None:
            return live
    return None
