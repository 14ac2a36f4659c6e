"""Stand-ins for the tests that need no real Codex: a CODEX_HOME written the way Codex 0.171 writes it
(rollouts, per-thread lock files, ``state_5.sqlite``), and real processes whose ``/proc/PID/comm`` is
``codex`` (bash started through a symlink of that name) with their own CODEX_HOME and cwd; :class:`Scene`,
such a stand-in showing a recorded screen in a pane, with its adapter."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import signal
import sqlite3
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import psutil

from pipeline.engine.config import Tile
from pipeline.engine.context import EngineContext
from pipeline.engine.watch import FileWatcher
from pipeline.plugin.events import Completion
from plugins.codex.adapter import CodexAdapter
from plugins.codex.resolve import find_codex_process
from tests.support.paths import FIXTURES
from tests.support.polling import wait_for
from tests.support.stages import with_catch_up
from tests.support.tmux import TmuxServer

__all__ = [
    "CODEX", "CodexHome", "ERROR_ROLLOUT", "SCREENS", "Scene", "StandIns", "TUI_ROLLOUT", "append",
    "following", "iso", "older_turns", "prompt_lines", "recorded_turns", "rollout_path", "stop_daemon",
    "turn_start", "upto",
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
                *turn_start(turn, prompt, t),
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


def turn_start(turn: str, prompt: str, at: float) -> list[dict[str, Any]]:
    """A Codex turn's first rollout lines: ``task_started``, then the person's prompt as a ``UserMessage``."""
    return [
        {"timestamp": iso(at), "type": "event_msg", "payload": {"type": "task_started", "turn_id": turn}},
        {
            "timestamp": iso(at),
            "type": "event_msg",
            "payload": {
                "type": "item_completed",
                "turn_id": turn,
                "item": {"type": "UserMessage", "content": [{"type": "text", "text": prompt}]},
            },
        },
    ]


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


# ---- a pane with a codex stand-in ----------------------------------------------------------------

CODEX = FIXTURES / "codex"
TUI_ROLLOUT = next((CODEX / "codex_home" / "sessions").glob("*/*/*/*01a236f2-8213*.jsonl"))
ERROR_ROLLOUT = CODEX / "failed-turns" / "rollout-tui-with-error-turn.jsonl"
SCREENS = CODEX / "screens"


class Scene:
    """A tmux pane with a codex stand-in showing a recorded screen, its CODEX_HOME, and an adapter."""

    def __init__(self, server: TmuxServer, tmp: Path, screen: str | Path = "screen_done.txt", *,
                 project: str = "api", name: str = "reviewer") -> None:
        self.server, self.tmp = server, tmp
        self.home = CodexHome(tmp / "codex-home")
        self.project = tmp / project
        self.project.mkdir(exist_ok=True)
        self.bin = tmp / "bin"
        self.bin.mkdir(exist_ok=True)
        if not (self.bin / "codex").exists():
            (self.bin / "codex").symlink_to("/bin/bash")
        self.pane = self.start(screen)
        self.ctx = EngineContext(name=name, tile=Tile(pane=self.pane, agent="codex"), tmux=server.tmux)
        self.adapter = CodexAdapter(self.ctx)

    def start(self, screen: str | Path) -> str:
        script = f"cat {shlex.quote(str(SCREENS / screen))}; sleep 300; true"
        # when the agent exits, a bare shell remains in the pane (as after /quit)
        inner = f"{self.bin / 'codex'} -c {shlex.quote(script)}; exec bash --norc --noprofile"
        pane = self.server.new_pane(f"bash -c {shlex.quote(inner)}", cwd=self.project,
                                    env={"CODEX_HOME": str(self.home.root)})
        pid = self.server.pane_pid(pane)
        found = wait_for(lambda: find_codex_process(pid), what="the codex stand-in")
        self.started_at = found.started_at
        self.tid = self.home.thread(self.started_at + 1.0)  # the TUI's thread exists from startup
        self.rollout = rollout_path(self.home.root, self.tid, self.started_at + 1.0)
        return pane

    def turns(self, fixture: Path = TUI_ROLLOUT) -> list[dict]:
        return recorded_turns(fixture, self.tid, self.project, time.time())


@asynccontextmanager
async def following(adapter: CodexAdapter,
                    watcher: FileWatcher | None = None) -> AsyncIterator[list[Completion]]:
    """``adapter.follow`` running with a shared watcher, as in the daemon; yields what it emits.
    ``watcher``: one already running, shared with other tiles' followers."""
    own = watcher is None
    watcher = watcher or FileWatcher()
    adapter.ctx.watcher = watcher
    emitted: list[Completion] = []

    async def emit(completion: Completion) -> None:
        emitted.append(completion)

    async with anyio.create_task_group() as tg:
        if own:
            tg.start_soon(watcher.run)
        tg.start_soon(adapter.follow, with_catch_up(adapter, emit))
        yield emitted
        tg.cancel_scope.cancel()


def upto(records: list[dict], kind: str, nth: int = 1) -> int:
    """The index just past the ``nth`` line whose payload type is ``kind``."""
    seen = 0
    for i, r in enumerate(records):
        if (r.get("payload") or {}).get("type") == kind:
            seen += 1
            if seen == nth:
                return i + 1
    raise AssertionError(f"no {kind} #{nth}")


def stop_daemon(home: Path) -> None:
    """Stop the app-server daemon (and its pid-update loop) that the first TUI started in ``home``: by the
    PIDs it recorded, and only if that PID really runs a binary from ``home``."""
    pids = []
    for name in ("daemon.pid", "daemon-updater.pid"):
        try:
            pid = int(json.loads((home / "app-server-daemon" / name).read_text())["pid"])
            if os.readlink(f"/proc/{pid}/exe").startswith(str(home) + "/"):
                pids.append(pid)
        except (OSError, ValueError, KeyError):
            continue
    procs = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            procs.append(psutil.Process(pid))
            procs[-1].terminate()
    for left in psutil.wait_procs(procs, timeout=5)[1]:  # a grace period, then SIGKILL
        with contextlib.suppress(psutil.NoSuchProcess):
            left.kill()
