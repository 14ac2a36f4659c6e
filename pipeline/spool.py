"""The hook spool: how an agent's own completion hook reaches the running daemon.

An agent hook (Claude Code's Stop hook, Codex's ``notify``) runs ``python -m pipeline.spool AGENT``. It
writes one small JSON file into ``$XDG_STATE_HOME/batonpass/spool/`` (folder 0700, file 0600, written
under a temporary name and renamed, so a reader never sees half a record) and exits 0 — fast, and
whether or not a daemon runs, so it can never fail the agent's turn. The daemon learns of new files from
the shared watcher, hands each record to the adapters of that agent, and deletes it.

This module imports only the standard library at the top: it is what the hook starts, many times a day.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["HookRecord", "ensure_spool_dir", "read_records", "spool_dir", "state_dir", "write_record"]

MAX_RECORD_BYTES = 8 * 1024 * 1024
#: records older than this are dropped unread (no daemon ran when they were written)
STALE_S = 3600.0


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "batonpass"


def spool_dir() -> Path:
    return state_dir() / "spool"


def _private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if path.stat().st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


@dataclass(frozen=True)
class HookRecord:
    agent: str
    payload: dict[str, Any]
    #: $TMUX_PANE of the hook's environment: the pane of the agent that ran it, when it runs in one
    pane: str | None
    written_at: float
    path: Path | None = None


def ensure_spool_dir() -> Path:
    """The spool folder, created 0700 if missing (the daemon creates it at start, so that the watcher
    watches it and not some large ancestor)."""
    return _private_dir(spool_dir())


def write_record(agent: str, payload: dict[str, Any], pane: str | None) -> Path:
    folder = ensure_spool_dir()
    record = {"agent": agent, "pane": pane, "written_at": time.time(), "payload": payload}
    name = f"{time.time_ns()}-{os.getpid()}-{agent}"
    tmp = folder / f".{name}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(record, f, ensure_ascii=False)
    final = folder / f"{name}.json"
    os.replace(tmp, final)
    return final


def read_records(folder: Path | None = None) -> list[HookRecord]:
    """Every complete record in the spool, oldest first, each deleted as it is read. Unreadable or stale
    files are removed too, so the spool cannot grow without bound."""
    folder = folder or spool_dir()
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    except FileNotFoundError:
        return []
    records = []
    for name in names:
        path = folder / name
        try:
            if path.stat().st_size > MAX_RECORD_BYTES:
                raise ValueError("too large")
            data = json.loads(path.read_text(encoding="utf-8"))
            record = HookRecord(
                agent=str(data["agent"]),
                payload=dict(data["payload"]),
                pane=data.get("pane"),
                written_at=float(data["written_at"]),
                path=path,
            )
            if time.time() - record.written_at < STALE_S:
                records.append(record)
        except (OSError, ValueError, KeyError, TypeError, RecursionError):  # RecursionError: "[[[[…"
            pass
        try:
            path.unlink()
        except OSError:
            pass
    return records


def main(argv: list[str] | None = None) -> int:
    """``python -m pipeline.spool AGENT [JSON]``: the payload is the JSON argument (Codex notify) or stdin
    (Claude Code hooks). Always exits 0.

    ``python -m pipeline.spool AGENT --then PROG ARGS... JSON`` also runs the program the user had before
    (Codex allows one ``notify`` program): it is exec'd with its own arguments and the same JSON argument
    after the record is written, so it sees exactly what it saw before batonpass was installed.
    """
    argv = sys.argv[1:] if argv is None else argv
    then: list[str] = []
    if "--then" in argv:
        at = argv.index("--then")
        argv, then = argv[:at], argv[at + 1:]
        if len(then) > 1 and then[-1].lstrip().startswith("{"):
            argv = [
                *argv,
                then[-1],
            ]  # the JSON the agent appended lands after the chained program's arguments
    try:
        agent = argv[0] if argv else "unknown"
        raw = (
            argv[-1]
            if len(argv) > 1
            else (sys.stdin.read(MAX_RECORD_BYTES) if not sys.stdin.isatty() else "{}")
        )
        payload = json.loads(raw or "{}")
        if not isinstance(payload, dict):
            payload = {"value": payload}
        write_record(agent, payload, os.environ.get("TMUX_PANE"))
    except Exception as exc:  # never fail the agent's turn
        print(f"batonpass hook: {type(exc).__name__}: {exc}", file=sys.stderr)
    if then:
        try:
            os.execvp(then[0], then)
        except OSError as exc:
            print(f"batonpass hook: cannot run the chained program {then[0]!r}: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
