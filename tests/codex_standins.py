"""Stand-ins for the tests that need no real Codex: a CODEX_HOME written the way Codex 0.171 writes it
(rollouts, per-thread lock files, ``state_5.sqlite``), and real processes whose ``/proc/PID/comm`` is
``codex`` (bash started through a symlink of that name) with their own CODEX_HOME and cwd."""

from __future__ import annotations

import json
import os
import secrets
import signal
import sqlite3
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from plugins.codex.resolve import find_codex_process
from tests.conftest import wait_for

__all__ = [
    "CodexHome",
    "StandIns",
    "append",
    "iso",
    "older_turns",
    "prompt_lines",
    "recorded_turns",
    "rollout_path",
    "uuid7",
]


def uuid7(at: float) -> str:
    digits = f"{int(at * 1000):012x}7{secrets.token_hex(10)[:19]}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class CodexHome:
    """A CODEX_HOME with rollouts, lock files and (optionally) a state_5.sqlite, as Codex leaves them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def thread(self, at: float, *, lock: bool = True) -> str:
        """A thread started at ``at`` (its lock file, as the TUI makes at startup), no rollout yet."""
        tid = uuid7(at)
        if lock:
            (self.root / "thread-writer-locks").mkdir(exist_ok=True)
            (self.root / "thread-writer-locks" / f"{tid}.lock").touch()
        return tid

    def rollout(
        self,
        at: float,
        cwd: Path | str,
        *,
        prompts: tuple[str, ...] = ("hello",),
        originator: str = "codex-tui",
        tid: str | None = None,
        prompt_at: float | None = None,
    ) -> Path:
        tid = tid or self.thread(at)
        local = datetime.fromtimestamp(at)
        folder = self.root / "sessions" / f"{local:%Y}" / f"{local:%m}" / f"{local:%d}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"rollout-{local:%Y-%m-%dT%H-%M-%S}-{tid}.jsonl"
        lines = [{"timestamp": iso(at), "type": "session_meta",
                  "payload": {"id": tid, "timestamp": iso(at), "cwd": str(cwd), "originator": originator}}]
        for n, prompt in enumerate(prompts):
            turn, t = f"turn-{tid[:8]}-{n}", prompt_at or at + 1 + n
            lines += [
                {
                    "timestamp": iso(t),
                    "type": "event_msg",
                    "payload": {"type": "task_started", "turn_id": turn},
                },
                {
                    "timestamp": iso(t),
                    "type": "event_msg",
                    "payload": {
                        "type": "item_completed",
                        "turn_id": turn,
                        "item": {"type": "UserMessage", "content": [{"type": "text", "text": prompt}]},
                    },
                },
                {
                    "timestamp": iso(t + 0.2),
                    "type": "event_msg",
                    "payload": {
                        "type": "task_complete",
                        "turn_id": turn,
                        "last_agent_message": f"answer to {prompt}",
                    },
                },
            ]
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        return path

    def sqlite(self, rows: list[tuple[str, Path, float, str]], *, journal: str = "wal") -> Path:
        db = self.root / "state_5.sqlite"
        conn = sqlite3.connect(db)
        conn.execute(f"PRAGMA journal_mode={journal}")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS threads (id TEXT PRIMARY KEY, rollout_path TEXT NOT NULL, "
            "created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, source TEXT NOT NULL, cwd TEXT NOT "
            "NULL,"
            " title TEXT NOT NULL, created_at_ms INTEGER, originator TEXT)"
        )
        for tid, path, at, cwd in rows:
            conn.execute("INSERT INTO threads VALUES (?,?,?,?,?,?,?,?,?)",
                         (tid, str(path), int(at), int(at), "vscode", cwd, "t", int(at * 1000), "codex-tui"))
        conn.commit()
        conn.close()
        return db


class StandIns:
    """Real processes named ``codex``; every one started here is killed (its own session) at the end."""

    def __init__(self, tmp: Path) -> None:
        self.bin = tmp / "bin"
        self.bin.mkdir()
        (self.bin / "codex").symlink_to("/bin/bash")
        self.started: list[subprocess.Popen[bytes]] = []

    def pane(self, script: str, *, cwd: Path, home: Path, args: tuple[str, ...] = ()) -> int:
        """A 'pane' (an outer bash) running ``codex -c SCRIPT`` or ``codex ARGS...``; returns the pane pid
        once the codex process is there."""
        inner = (
            " ".join([str(self.bin / "codex"), *args])
            if args
            else f"{self.bin / 'codex'} -c '{script}; true'"
        )
        p = subprocess.Popen(["bash", "-c", f"{inner}; true"], cwd=cwd, start_new_session=True,
                             env={"PATH": os.environ["PATH"], "CODEX_HOME": str(home), "HOME": str(cwd)})
        self.started.append(p)
        wait_for(lambda: find_codex_process(p.pid), what="the codex stand-in")
        return p.pid

    def stop(self) -> None:
        for p in self.started:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def recorded_turns(fixture: Path, tid: str, cwd: Path | str, start: float) -> list[dict[str, Any]]:
    """A recorded rollout's lines as if thread ``tid`` had written them from ``start`` on, in ``cwd``."""
    records = [json.loads(line) for line in fixture.read_text().splitlines() if line.strip()]
    old_tid = records[0]["payload"]["id"]
    first = datetime.fromisoformat(records[0]["timestamp"].replace("Z", "+00:00")).timestamp()
    out = []
    for record in records:
        record = json.loads(json.dumps(record).replace(old_tid, tid))
        at = datetime.fromisoformat(record["timestamp"].replace("Z", "+00:00")).timestamp()
        record["timestamp"] = iso(start + at - first)
        if record["type"] == "session_meta":
            record["payload"].update(timestamp=iso(start), cwd=str(cwd))
        out.append(record)
    return out


def append(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in records))


def rollout_path(home: Path, tid: str, at: float) -> Path:
    local = datetime.fromtimestamp(at)
    return (
        home
        / "sessions"
        / f"{local:%Y}"
        / f"{local:%m}"
        / f"{local:%d}"
        / f"rollout-{local:%Y-%m-%dT%H-%M-%S}-{tid}.jsonl"
    )


def older_turns(fixture: Path, tid: str, cwd: Path | str, start: float) -> list[dict[str, Any]]:
    """An older-shape rollout (tests/fixtures/codex-old: no task events, or the legacy format with no
    envelope) as if thread ``tid`` had written it from ``start`` on, in ``cwd``. Legacy items carry no time:
    only the header's is moved."""
    records = [json.loads(line) for line in fixture.read_text().splitlines() if line.strip()]
    header = records[0].get("payload", records[0])
    old_tid = header["id"]
    first = datetime.fromisoformat(records[0]["timestamp"].replace("Z", "+00:00")).timestamp()
    out = []
    for record in records:
        record = json.loads(json.dumps(record).replace(old_tid, tid))
        if "timestamp" in record:
            at = datetime.fromisoformat(record["timestamp"].replace("Z", "+00:00")).timestamp()
            record["timestamp"] = iso(start + at - first)
        legacy_header = "type" not in record and "payload" not in record and "id" in record
        meta = (
            record.get("payload")
            if record.get("type") == "session_meta"
            else record
            if legacy_header
            else None
        )
        if meta is not None:
            meta.update(timestamp=iso(start), cwd=str(cwd))
        out.append(record)
    return out


def prompt_lines(records: list[dict[str, Any]]) -> list[int]:
    """The indexes of the lines that open a turn in an older-shape rollout (a ``user_message`` event, or a
    legacy user message that is not context Codex wrote itself)."""
    out = []
    for i, r in enumerate(records):
        p = r.get("payload") if "payload" in r else r
        if isinstance(p, dict) and p.get("type") == "user_message":
            out.append(i)
        elif "payload" not in r and r.get("type") == "message" and r.get("role") == "user":
            text = r["content"][0]["text"]
            if not text.startswith(("<user_instructions>", "<environment_context>")):
                out.append(i)
    return out
