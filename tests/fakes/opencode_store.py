"""A generated OpenCode store, written the way OpenCode 1.18.33 writes it (docs/agents.md, OpenCode,
fixtures/opencode/).

The schema is the one recorded from the real CLI (``fixtures/opencode/db_schema.sql``); rows carry the same
JSON shapes (``message.data`` with ``role``, ``parentID``, ``time.created/completed``, ``finish``, ``error``;
``part.data`` with ``text``, ``step-start``, ``tool``, ``step-finish``). The store is in WAL mode with
automatic checkpoints off, as OpenCode leaves it: new rows live only in the ``-wal`` file. Each write is
one transaction, like OpenCode's. Used for the edge cases the real CLI does not produce on demand (locks,
aborts, two sessions in one folder, schemas from elsewhere).
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from tests.support.paths import FIXTURES

__all__ = ["SCHEMA", "StoreWriter"]

SCHEMA = (FIXTURES / "opencode" / "db_schema.sql").read_text(encoding="utf-8")
_ids = itertools.count()


def _now_ms() -> int:
    return int(time.time() * 1000)


def _id(prefix: str) -> str:
    """Ascending like OpenCode's ids (time first), unique within the run."""
    return f"{prefix}_{_now_ms():012x}{next(_ids):06d}"


class StoreWriter:
    def __init__(self, path: Path, *, schema: str = SCHEMA, journal_mode: str = "wal") -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute(f"PRAGMA journal_mode={journal_mode}")
        self.conn.execute("PRAGMA wal_autocheckpoint=0")
        self.conn.executescript(schema)

    def close(self) -> None:
        self.conn.close()

    def _write(self, *statements: tuple[str, tuple[Any, ...]]) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        for sql, args in statements:
            self.conn.execute(sql, args)
        self.conn.execute("COMMIT")

    def session(
        self, directory: str | Path, *, created_ms: int | None = None, title: str = "New session",
        parent: str | None = None,
    ) -> str:
        """A session (``parent``: a sub-agent's session, made by the task tool of session ``parent``)."""
        sid, at = _id("ses"), created_ms or _now_ms()
        self._write(
            (
                "INSERT INTO project (id, worktree, time_created, time_updated, sandboxes) VALUES "
                "('global', '/', ?, ?, '[]') ON CONFLICT DO NOTHING",
                (at, at),
            ),
            (
                "INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, "
                "time_created, time_updated)"
                " VALUES (?, 'global', ?, 'slug', ?, ?, '1.18.33', ?, ?)",
                (sid, parent, str(directory), title, at, at),
            ),
        )
        return sid

    def user(self, session: str, text: str) -> str:
        mid, at = _id("msg"), _now_ms()
        data = {"role": "user", "time": {"created": at}, "agent": "build",
                "model": {"providerID": "fake", "modelID": "fake-model"}}
        self._write(
            self._message(mid, session, at, data),
            self._part(mid, session, {"type": "text", "text": text}),
            self._touch(session),
        )
        return mid

    def step(self, session: str, parent: str, *, cwd: str = "/", tool: str | None = None) -> str:
        """An assistant step in progress: ``tool`` = the state of a tool part (``running``: a permission
        prompt or a long command)."""
        mid, at = _id("msg"), _now_ms()
        data = {"parentID": parent, "role": "assistant", "mode": "build", "agent": "build",
                "path": {"cwd": cwd, "root": cwd}, "time": {"created": at}, "modelID": "fake-model",
                "providerID": "fake"}
        writes = [self._message(mid, session, at, data), self._part(mid, session, {"type": "step-start"})]
        if tool is not None:
            writes.append(self._part(mid, session, {"type": "tool", "tool": "bash", "callID": "call_1",
                                                    "state": {"status": tool, "input": {"command": "ls"}}}))
        self._write(*writes, self._touch(session))
        return mid

    def finish(self, session: str, message: str, *, texts: tuple[str, ...] = (), finish: str | None = "stop",
               error: dict[str, Any] | None = None, tool_done: bool = True,
               tokens: dict[str, Any] | None = None, cost: float | None = None) -> None:
        """End step ``message``: its text parts, ``finish``, ``time.completed`` (and ``error``; ``tokens``
        and ``cost`` as OpenCode records a step's usage)."""
        row = self.conn.execute("SELECT data FROM message WHERE id = ?", (message,)).fetchone()
        data = json.loads(row[0])
        data["time"]["completed"] = _now_ms()
        if tokens is not None:
            data["tokens"] = tokens
        if cost is not None:
            data["cost"] = cost
        if finish is not None:
            data["finish"] = finish
        if error is not None:
            data["error"] = error
        writes = [self._part(message, session, {"type": "text", "text": t}) for t in texts]
        if tool_done:
            writes.append(
                (
                    "UPDATE part SET data = json_set(data, '$.state.status', 'completed') WHERE message_id = "
                    "? "
                    "AND json_extract(data, '$.type') = 'tool'",
                    (message,),
                )
            )
        if finish is not None:
            writes.append(self._part(message, session, {"type": "step-finish", "reason": finish}))
        writes.append(("UPDATE message SET data = ?, time_updated = ? WHERE id = ?",
                       (json.dumps(data), _now_ms(), message)))
        self._write(*writes, self._touch(session))

    def turn(self, session: str, prompt: str, answer: str, *, tool_step: bool = False, cwd: str = "/") -> str:
        """A whole turn; returns its final message id (the turn id)."""
        user = self.user(session, prompt)
        if tool_step:
            first = self.step(session, user, cwd=cwd, tool="running")
            self.finish(session, first, finish="tool-calls")
        final = self.step(session, user, cwd=cwd)
        self.finish(session, final, texts=(answer,))
        return final

    @staticmethod
    def _message(mid: str, session: str, at: int, data: dict[str, Any]) -> tuple[str, tuple[Any, ...]]:
        return (
            "INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?)",
            (mid, session, at, at, json.dumps(data)),
        )

    @staticmethod
    def _part(mid: str, session: str, data: dict[str, Any]) -> tuple[str, tuple[Any, ...]]:
        at = _now_ms()
        return ("INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES "
                "(?, ?, ?, ?, ?, ?)", (_id("prt"), mid, session, at, at, json.dumps(data)))

    @staticmethod
    def _touch(session: str) -> tuple[str, tuple[Any, ...]]:
        return ("UPDATE session SET time_updated = ? WHERE id = ?", (_now_ms(), session))
